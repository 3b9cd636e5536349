package storage_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	_ "modernc.org/sqlite"

	"hermes/events"
	"hermes/projections/storage"
)

// sqliteFull returns a real SQLITE_FULL from a file limited by
// max_page_count.
func sqliteFull(t *testing.T) error {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "full.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (v BLOB); PRAGMA max_page_count = 1"); err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(ctx, "INSERT INTO t VALUES (zeroblob(100000))")
	if err == nil {
		t.Fatal("insert past max_page_count succeeded")
	}
	return err
}

func TestClassify(t *testing.T) {
	full := sqliteFull(t)
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"sqlite full", full, true},
		{"wrapped sqlite full", fmt.Errorf("apply: %w", full), true},
		{"enospc", &fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, true},
		{"edquot", fmt.Errorf("x: %w", syscall.EDQUOT), true},
		{"sentinel", fmt.Errorf("x: %w", events.ErrStorageFull), true},
		{"other", errors.New("boom"), false},
		{"permission", &fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := storage.IsFull(tc.err); got != tc.want {
				t.Errorf("IsFull(%v) = %v, want %v", tc.err, got, tc.want)
			}
			got := storage.Classify(tc.err)
			if errors.Is(got, events.ErrStorageFull) != tc.want {
				t.Errorf("Classify(%v) = %v, ErrStorageFull %v", tc.err, got, !tc.want)
			}
			if tc.err != nil && !errors.Is(got, tc.err) {
				t.Errorf("Classify(%v) lost the cause: %v", tc.err, got)
			}
		})
	}
}
