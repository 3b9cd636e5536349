package sessions

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"hermes/projections/migrate"
)

func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func userVersion(t *testing.T, db *sql.DB) int {
	t.Helper()
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestOpen_lanesDBBeforeMigrations: a lanes.db written before migrations
// (the schema, user_version 0) opens at version 1, rows kept, step 1
// recorded as adopted, and the later steps run; a test-only next step then
// runs once, and a failing one leaves the file where it was.
func TestOpen_lanesDBBeforeMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lanes.db")
	db := rawDB(t, path)
	if _, err := db.Exec(schemaSQL + `; INSERT INTO meta(key, value) VALUES ('projection', '` + Name + `'), ('checkpoint', '42')`); err != nil {
		t.Fatal(err)
	}

	p, err := Open(path, Exports{})
	if err != nil {
		t.Fatalf("Open(lanes.db before migrations) error = %v", err)
	}
	cp, err := p.Checkpoint(ctx)
	p.Close()
	if err != nil || cp != 42 {
		t.Errorf("Checkpoint() = %d, %v; want 42 (the file kept)", cp, err)
	}
	var adopted int
	if err := db.QueryRow("SELECT adopted FROM " + migrationsTable + " WHERE version = 1").Scan(&adopted); err != nil || adopted != 1 {
		t.Errorf("record of step 1: adopted %d, %v; want 1", adopted, err)
	}
	last := len(migrations)
	if v := userVersion(t, db); v != last {
		t.Errorf("user_version = %d, want %d", v, last)
	}
	var indexes []string
	rows, err := db.Query("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'lanes' AND sql IS NOT NULL ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		rows.Scan(&name)
		indexes = append(indexes, name)
	}
	rows.Close()
	if got := strings.Join(indexes, ","); got != "lanes_live,lanes_session_id" {
		t.Errorf("lanes indexes after the migrations = %s, want lanes_live,lanes_session_id (step 4 drops lanes_updated_at)", got)
	}

	ran := 0
	step2 := func(fail bool) []migrate.Step {
		return append(migrations[:last:last], migrate.Step{Version: last + 1, Name: "test column", Up: func(ctx context.Context, tx migrate.Tx) error {
			ran++
			if _, err := tx.ExecContext(ctx, "ALTER TABLE lanes ADD COLUMN test_note TEXT"); err != nil {
				return err
			}
			if fail {
				return errors.New("boom")
			}
			return nil
		}})
	}
	if err := migrateSchema(ctx, db, step2(true)); err == nil {
		t.Fatal("migrate(failing step 2) = nil, want its error")
	}
	if v := userVersion(t, db); v != last {
		t.Errorf("user_version after a failing next step = %d, want %d", v, last)
	}
	ran = 0
	for range 2 {
		if err := migrateSchema(ctx, db, step2(false)); err != nil {
			t.Fatalf("migrate(step 2) error = %v", err)
		}
	}
	if v := userVersion(t, db); v != last+1 || ran != 1 {
		t.Errorf("after two migrations with the next step: user_version %d, ran %d; want %d, 1", v, ran, last+1)
	}
	if _, err := Open(path, Exports{}); !errors.Is(err, migrate.ErrNewer) {
		t.Errorf("Open(a newer version) by this build error = %v, want ErrNewer", err)
	}
}
