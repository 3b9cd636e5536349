// Package ondisk holds what erasure tests share to look at SQLite files as
// the bytes on disk: a bare WAL checkpoint on a connection of its own (the
// purge as it was before hermes scrubbed free space, the control that shows
// a check can fail) and a search of a file's bytes. It imports nothing of
// hermes, so any package's internal tests can use it.
package ondisk

import (
	"bytes"
	"database/sql"
	"os"
	"testing"

	_ "modernc.org/sqlite" // the "sqlite" driver
)

// BareCheckpoint copies the WAL of the SQLite file at path into the file
// and truncates it, on a connection of its own, and nothing else.
func BareCheckpoint(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var busy, frames, done int
	if err := db.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &done); err != nil || busy != 0 {
		t.Fatalf("wal_checkpoint(TRUNCATE) = busy %d, %v", busy, err)
	}
}

// Holds reports whether any byte run of the file at path is one of
// needles; a file that does not exist holds nothing.
func Holds(t *testing.T, path string, needles ...[]byte) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, n := range needles {
		if bytes.Contains(b, n) {
			return true
		}
	}
	return false
}
