package transcripts_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	"hermes/projections/transcripts"
)

// TestOpenRefusesPythonHermesStateDB: a state.db written by Python Hermes
// is user data, not a read model: Open refuses it and leaves it intact.
func TestOpenRefusesPythonHermesStateDB(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, started_at REAL NOT NULL);
		CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT);
		INSERT INTO sessions VALUES ('20260101_000000_abcdef', 'cli', 1.0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	if _, err := transcripts.Open(path); !errors.Is(err, transcripts.ErrForeignDatabase) {
		t.Fatalf("Open(Python Hermes state.db) = %v, want ErrForeignDatabase", err)
	}
	db, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sessions`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the foreign sessions table = %d rows, %v; want it untouched", n, err)
	}
}
