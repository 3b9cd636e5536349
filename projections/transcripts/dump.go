package transcripts

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// fts5Shadows are the suffixes of the tables FTS5 keeps for a virtual
// table. Their bytes depend on how inserts were grouped into transactions
// (segment merges), so Dump leaves them out and writes the virtual
// tables' content instead, which does not.
var fts5Shadows = []string{"_data", "_idx", "_content", "_docsize", "_config"}

// Dump writes every schema object and every row of the file in a canonical
// text form: objects by type and name (without root pages), then each
// table's rows ordered by primary key (rowid for the FTS tables, whose
// stored text is written; sqlite_sequence by name). Two files that hold the
// same state give the same bytes, however the state was reached, so a
// rebuild can be compared with an incremental run. The migration record
// (hermes_schema_migrations) is left out: it says how the file got its
// schema, not what it holds.
func (r *Reader) Dump(ctx context.Context, w io.Writer) error {
	bw := bufio.NewWriter(w)
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		return dump(ctx, tx, bw)
	})
	if err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	return nil
}

type schemaObject struct {
	typ, name, table, sql string
}

func dump(ctx context.Context, tx *sql.Tx, w *bufio.Writer) error {
	rows, err := tx.QueryContext(ctx, "SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_schema ORDER BY type, name")
	if err != nil {
		return err
	}
	var objects []schemaObject
	for rows.Next() {
		var o schemaObject
		if err := rows.Scan(&o.typ, &o.name, &o.table, &o.sql); err != nil {
			_ = rows.Close()
			return err
		}
		objects = append(objects, o)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	_ = rows.Close()

	virtual := map[string]bool{}
	for _, o := range objects {
		if o.typ == "table" && strings.HasPrefix(strings.ToUpper(o.sql), "CREATE VIRTUAL TABLE") {
			virtual[o.name] = true
		}
	}
	shadow := func(name string) bool {
		for _, suffix := range fts5Shadows {
			if base, ok := strings.CutSuffix(name, suffix); ok && virtual[base] {
				return true
			}
		}
		return false
	}

	fmt.Fprintln(w, "-- schema")
	var tables []string
	for _, o := range objects {
		if shadow(o.name) || shadow(o.table) {
			continue
		}
		if o.name == migrationsTable || o.table == migrationsTable {
			// How the file got its schema (when, run or adopted) is not
			// state: a live file and its rebuild hold the same rows
			// with different records.
			continue
		}
		fmt.Fprintf(w, "%s %s %s %s\n", o.typ, strconv.Quote(o.name), strconv.Quote(o.table), strconv.Quote(o.sql))
		if o.typ == "table" {
			tables = append(tables, o.name)
		}
	}
	slices.Sort(tables)
	for _, t := range tables {
		order, err := dumpOrder(ctx, tx, t, virtual[t])
		if err != nil {
			return fmt.Errorf("table %s: %w", t, err)
		}
		cols := "*"
		if virtual[t] {
			cols = "rowid, *"
		}
		where := ""
		if t == "state_meta" {
			// Whether a purge still owes the FTS indexes a rewrite is
			// bookkeeping of this file, not state (a rebuild has not
			// been purged yet).
			where = " WHERE key != '" + metaFTSRewrite + "'"
		}
		fmt.Fprintf(w, "-- table %s\n", strconv.Quote(t))
		if err := dumpRows(ctx, tx, w, "SELECT "+cols+" FROM "+quoteIdent(t)+where+" ORDER BY "+order); err != nil {
			return fmt.Errorf("table %s: %w", t, err)
		}
	}
	return nil
}

// dumpOrder is the ORDER BY of a table's rows: its primary key, the rowid
// of a virtual table, or every column when it has no key.
func dumpOrder(ctx context.Context, tx *sql.Tx, table string, virtual bool) (string, error) {
	if virtual {
		return "rowid", nil
	}
	if table == "sqlite_sequence" {
		return "name", nil
	}
	rows, err := tx.QueryContext(ctx, "SELECT name, pk FROM pragma_table_info(?) ORDER BY cid", table)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var all []string
	type key struct {
		name string
		pos  int
	}
	var keys []key
	for rows.Next() {
		var name string
		var pk int
		if err := rows.Scan(&name, &pk); err != nil {
			return "", err
		}
		all = append(all, quoteIdent(name))
		if pk > 0 {
			keys = append(keys, key{quoteIdent(name), pk})
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if len(keys) == 0 {
		return strings.Join(all, ", "), nil
	}
	slices.SortFunc(keys, func(a, b key) int { return a.pos - b.pos })
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.name
	}
	return strings.Join(names, ", "), nil
}

func dumpRows(ctx context.Context, tx *sql.Tx, w *bufio.Writer, query string) error {
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "columns %s\n", strings.Join(cols, " "))
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		for i, v := range vals {
			if i > 0 {
				w.WriteByte('\t')
			}
			w.WriteString(dumpValue(v))
		}
		w.WriteByte('\n')
	}
	return rows.Err()
}

// dumpValue writes a value with its SQLite storage class, so that 1 and
// 1.0 and '1' stay distinct.
func dumpValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case int64:
		return "i:" + strconv.FormatInt(x, 10)
	case float64:
		return "r:" + strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		return "t:" + strconv.Quote(x)
	case []byte:
		return "b:" + hex.EncodeToString(x)
	case bool:
		if x {
			return "i:1"
		}
		return "i:0"
	}
	return fmt.Sprintf("?:%v", v)
}
