package storage_test

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"hermes/projections/storage"
)

// TestScrubFreeSpace_KeepsEveryRow: given a table and an index churned by
// growing updates and deletes in random order (rebalances leave old cells
// in pages' free space), when the free space is scrubbed, then the file
// passes integrity_check, every row reads as before, some page was
// rewritten, and a second scrub finds nothing left to zero.
func TestScrubFreeSpace_KeepsEveryRow(t *testing.T) {
	ctx := t.Context()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db")+"?_pragma=journal_mode(WAL)&_pragma=secure_delete(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	mustExec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	mustExec(`CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT UNIQUE, v TEXT)`)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		mustExec(`INSERT INTO t (id, k, v) VALUES (?, ?, ?)`, i, fmt.Sprintf("k%08d", rng.IntN(1e8)), strings.Repeat("v", rng.IntN(50)))
	}
	for range 3000 {
		id := rng.IntN(2000)
		if rng.IntN(4) == 0 {
			mustExec(`DELETE FROM t WHERE id = ?`, id)
			continue
		}
		mustExec(`UPDATE t SET v = ?, k = ? WHERE id = ?`, strings.Repeat("w", rng.IntN(300)), fmt.Sprintf("k%08d", rng.IntN(1e8)), id)
	}
	dump := func() string {
		t.Helper()
		var s string
		if err := db.QueryRowContext(ctx, `SELECT group_concat(id || ':' || k || ':' || v, ',') FROM (SELECT * FROM t ORDER BY id)`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := dump()

	res, err := storage.ScrubFreeSpace(ctx, db)
	if err != nil {
		t.Fatalf("ScrubFreeSpace() error = %v", err)
	}
	if res.Rewritten == 0 || res.Rewritten > res.Pages {
		t.Errorf("ScrubFreeSpace() = %+v, want some of the pages rewritten", res)
	}
	var check string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v", check, err)
	}
	if dump() != before {
		t.Error("rows changed by the scrub")
	}
	again, err := storage.ScrubFreeSpace(ctx, db)
	if err != nil || again.Rewritten != 0 {
		t.Errorf("second ScrubFreeSpace() = %+v, %v; want nothing rewritten", again, err)
	}
}

// TestScrubFreeSpace_RefusesAutoVacuumFiles: given a file with auto_vacuum
// (its pointer-map pages start with a byte a b-tree page could start
// with), when it is scrubbed, then the scrub fails and writes nothing.
func TestScrubFreeSpace_RefusesAutoVacuumFiles(t *testing.T) {
	ctx := t.Context()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "av.db")+"?_pragma=auto_vacuum(1)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('a')`); err != nil {
		t.Fatal(err)
	}
	res, err := storage.ScrubFreeSpace(ctx, db)
	if err == nil || !strings.Contains(err.Error(), "auto_vacuum") || res.Rewritten != 0 {
		t.Errorf("ScrubFreeSpace() = %+v, %v; want an auto_vacuum refusal", res, err)
	}
}
