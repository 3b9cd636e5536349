package transcripts

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"hermes/projections/migrate"
)

func rawConn(t *testing.T, path string) *sql.Conn {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); db.Close() })
	return conn
}

func versionOf(t *testing.T, conn *sql.Conn) int {
	t.Helper()
	v, err := migrate.Version(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestOpen_stateDBBeforeMigrations: a state.db written by hermes before
// migrations (Hermes' schema 11, the projection name, user_version 0) opens
// at version 1 with its rows and Hermes' schema_version kept; a test-only
// step 2 then runs once, a failing one leaves the file at version 1, and a
// build that knows step 1 only refuses the version-2 file.
func TestOpen_stateDBBeforeMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	conn := rawConn(t, path)
	if _, err := conn.ExecContext(ctx, schemaSQL); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (11);
		INSERT INTO state_meta (key, value) VALUES ('hermes_projection', '`+Name+`'), ('hermes_checkpoint', '7');
		INSERT INTO sessions (id, source, started_at) VALUES ('s1', 'cli', 1.0)`); err != nil {
		t.Fatal(err)
	}

	p := openAt(t, path)
	if cp, err := p.Checkpoint(ctx); err != nil || cp != 7 {
		t.Errorf("Checkpoint() = %d, %v; want 7 (the file kept)", cp, err)
	}
	mustSession(t, p.Reader, "s1")
	var hermesVersion, adopted int
	queryRow(t, p, "SELECT version FROM schema_version", nil, &hermesVersion)
	queryRow(t, p, "SELECT adopted FROM "+migrationsTable+" WHERE version = 1", nil, &adopted)
	if hermesVersion != SchemaVersion || adopted != 1 {
		t.Errorf("schema_version %d, step 1 adopted %d; want %d, 1", hermesVersion, adopted, SchemaVersion)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	cur := len(migrations)
	if v := versionOf(t, conn); v != cur {
		t.Errorf("user_version = %d, want %d", v, cur)
	}

	ran := 0
	step2 := func(fail bool) []migrate.Step {
		return append(migrations[:cur:cur], migrate.Step{Version: cur + 1, Name: "test index", Up: func(ctx context.Context, tx migrate.Tx) error {
			ran++
			if _, err := tx.ExecContext(ctx, "CREATE INDEX hermes_test_idx ON messages(role)"); err != nil {
				return err
			}
			if fail {
				return errors.New("boom")
			}
			return nil
		}})
	}
	if err := migrateSchema(ctx, conn, step2(true)); err == nil {
		t.Fatal("migrate(failing step 2) = nil, want its error")
	}
	if v := versionOf(t, conn); v != cur {
		t.Errorf("user_version after a failing next step = %d, want %d", v, cur)
	}
	ran = 0
	for range 2 {
		if err := migrateSchema(ctx, conn, step2(false)); err != nil {
			t.Fatalf("migrate(step 2) error = %v", err)
		}
	}
	if v := versionOf(t, conn); v != cur+1 || ran != 1 {
		t.Errorf("after two migrations with the next step: user_version %d, ran %d; want %d, 1", v, ran, cur+1)
	}
	if _, err := Open(path); !errors.Is(err, migrate.ErrNewer) {
		t.Errorf("Open(a newer version) by this build error = %v, want ErrNewer", err)
	}
}

// TestOpen_migratedWithoutName: a file migrated by hermes whose name was
// never recorded (a crash between the two) is hermes' own, not Python
// Hermes': it is rebuilt, not refused.
func TestOpen_migratedWithoutName(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	conn := rawConn(t, path)
	if err := migrateSchema(ctx, conn, migrations); err != nil {
		t.Fatal(err)
	}
	p := openAt(t, path)
	h := newHistory()
	mustApply(t, p, h.lane("k", created("k", "s1", at(1))))
	mustSession(t, p.Reader, "s1")
}
