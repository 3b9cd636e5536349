package fts5

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

var update = flag.Bool("update", false, "make the fixtures of testdata/ again")

// testDB is an SQLite database of FTS5 tables, and a Ranker over it.
type testDB struct {
	db *sql.DB
	r  *Ranker
}

// openDB opens (or creates) the database at path, with a Ranker that reads
// the row lengths in the search that needs them.
func openDB(t testing.TB, path string) *testDB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	d := &testDB{db: db}
	d.r = New(d.readTx, Options{LoadLengthsInline: true})
	t.Cleanup(d.r.Close)
	return d
}

// openFixture opens a copy of testdata/name (the fixture itself is never
// written, not even a journal next to it).
func openFixture(t testing.TB, name string) *testDB {
	t.Helper()
	src, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("open fixture: %v (make the fixtures with go test -run TestFixtures -update)", err)
	}
	defer src.Close()
	path := filepath.Join(t.TempDir(), name)
	dst, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return openDB(t, path)
}

func (d *testDB) readTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer func() {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			err = errors.Join(err, rbErr)
		}
	}()
	return fn(tx)
}

// exec runs statements in one transaction.
func (d *testDB) exec(t testing.TB, stmts ...string) {
	t.Helper()
	tx, err := d.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if _, err := tx.Exec(s); err != nil {
			_ = tx.Rollback()
			t.Fatalf("%s: %v", s, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// insert adds rows (rowid, text) to table in one transaction: one new
// segment of its index.
func (d *testDB) insert(t testing.TB, table string, rows map[int64]string, order []int64) {
	t.Helper()
	tx, err := d.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range order {
		if _, err := tx.Exec(`INSERT INTO `+table+`(rowid, content) VALUES (?, ?)`, id, rows[id]); err != nil {
			_ = tx.Rollback()
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// sqliteScores is SQLite's answer: rowid → bm25() bits of every match.
func (d *testDB) sqliteScores(t testing.TB, table, query string) map[int64]uint64 {
	t.Helper()
	out := map[int64]uint64{}
	rows, err := d.db.Query(`SELECT rowid, bm25(`+table+`) FROM `+table+` WHERE `+table+` MATCH ?`, query)
	if err != nil {
		t.Fatalf("%s MATCH %q: %v", table, query, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var score float64
		if err := rows.Scan(&id, &score); err != nil {
			t.Fatal(err)
		}
		out[id] = math.Float64bits(score)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// goScores is the Ranker's answer, or its error (ErrDeclined for SQLite).
func (d *testDB) goScores(t testing.TB, tb Table, query string) (map[int64]uint64, error) {
	t.Helper()
	out := map[int64]uint64{}
	err := d.readTx(context.Background(), func(tx *sql.Tx) error {
		rk, err := d.r.Rank(context.Background(), tx, tb, query)
		if err != nil {
			return err
		}
		for _, m := range rk.All() {
			out[m.ID] = math.Float64bits(m.Score)
		}
		return nil
	})
	return out, err
}

// structureOf is the decoded structure record of table.
func (d *testDB) structureOf(t testing.TB, table string) ftsStructure {
	t.Helper()
	var s ftsStructure
	err := d.readTx(context.Background(), func(tx *sql.Tx) error {
		var err error
		s, err = (&ftsIndex{ctx: context.Background(), tx: tx, table: table, r: d.r}).structure()
		return err
	})
	if err != nil {
		t.Fatalf("structure of %s: %v", table, err)
	}
	return s
}
