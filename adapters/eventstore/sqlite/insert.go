package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"hermes/events"
)

const (
	// maxRowsPerInsert bounds one multi-row INSERT (7 parameters a row, far
	// below SQLite's 32766-parameter limit); exactRows is the largest row
	// count with a statement of its own (see statementRows).
	maxRowsPerInsert = 256
	exactRows        = 64
	columnsPerRow    = 7
)

// insertMode is how an INSERT of the writer fails on a constraint.
type insertMode int

const (
	// insertOrAbort undoes the failed statement only: SQLite keeps a
	// statement journal for a multi-row INSERT so that it can.
	insertOrAbort insertMode = iota
	// insertOrRollback rolls the whole transaction back, which needs no
	// statement journal: the fast path, replayed one request at a time
	// after a failure (apply).
	insertOrRollback
)

type insertKey struct {
	rows int
	mode insertMode
}

type slot struct {
	r *request
	i int
}

// insert writes the rows of reqs, versions following each request's base,
// with multi-row INSERTs failing as mode says, and fills in versions and
// positions; the rows are recorded at the transaction's time. Positions
// come from AUTOINCREMENT: the rows of one statement get consecutive
// positions ending at its last insert rowid, since no other writer can run
// inside this transaction.
func (w *writer) insert(reqs []*request, mode insertMode) error {
	w.args, w.slots = w.args[:0], w.slots[:0]
	for _, r := range reqs {
		n := len(r.rows)
		r.res = events.AppendResult{Versions: r.places[:n:n], Positions: r.places[n:]}
		for i := range r.rows {
			v := r.base + uint64(i) + 1
			r.res.Versions[i] = v
			a := &r.rows[i].args
			w.args = append(w.args, r.streamArg, int64(v), a[0], a[1], a[2], a[3], w.txNowArg)
			w.slots = append(w.slots, slot{r, i})
			if len(w.slots) == maxRowsPerInsert {
				if err := w.flush(mode); err != nil {
					return err
				}
			}
		}
	}
	if len(w.slots) > 0 {
		return w.flush(mode)
	}
	return nil
}

// flush inserts the pending rows, in as few statements as the prepared
// sizes allow.
func (w *writer) flush(mode insertMode) error {
	for done := 0; done < len(w.slots); {
		n := statementRows(len(w.slots) - done)
		stmt, err := w.insertStmt(insertKey{rows: n, mode: mode})
		if err != nil {
			return err
		}
		res, err := stmt.Exec(w.args[done*columnsPerRow : (done+n)*columnsPerRow]...)
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		last, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		first := uint64(last) - uint64(n) + 1
		for k, s := range w.slots[done : done+n] {
			s.r.res.Positions[s.i] = first + uint64(k)
		}
		done += n
	}
	clear(w.args)
	w.args, w.slots = w.args[:0], w.slots[:0]
	return nil
}

// statementRows is how many of n pending rows the next INSERT takes. Exact
// sizes up to exactRows each get their statement; larger counts go by powers
// of two, so at most exactRows+3 INSERTs are ever prepared per mode.
func statementRows(n int) int {
	if n <= exactRows {
		return n
	}
	c := maxRowsPerInsert
	for c > n {
		c /= 2
	}
	return c
}

func (w *writer) insertStmt(k insertKey) (*sql.Stmt, error) {
	if s, ok := w.inserts[k]; ok {
		return s, nil
	}
	var b strings.Builder
	b.WriteString("INSERT ")
	if k.mode == insertOrRollback {
		b.WriteString("OR ROLLBACK ")
	}
	b.WriteString("INTO events (stream, version, event_id, type, data, metadata, recorded_at) VALUES ")
	for i := range k.rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?)")
	}
	s, err := w.conn.PrepareContext(context.Background(), b.String())
	if err != nil {
		return nil, fmt.Errorf("prepare insert of %d rows: %w", k.rows, err)
	}
	w.inserts[k] = s
	return s, nil
}
