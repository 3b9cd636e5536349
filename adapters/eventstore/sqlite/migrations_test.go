package sqlite

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"hermes/projections/migrate"

	"github.com/google/go-cmp/cmp"
)

func withMigrations(steps []migrate.Step) Option {
	return func(c *config) { c.migrations = steps }
}

// schema1Copy is a copy of the log written by the schema-1 build.
func schema1Copy(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.db")
	src, err := os.Open(filepath.Join("testdata", "schema-1", "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
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
	return path
}

type migrationRecord struct {
	Version int
	Name    string
	Adopted bool
}

// fileSchema reads the version and the migration record of a closed store.
func fileSchema(t *testing.T, path string) (int, []migrationRecord) {
	t.Helper()
	db := rawDB(t, path)
	defer db.Close()
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query("SELECT version, name, adopted FROM " + migrationsTable + " ORDER BY version")
	if err != nil {
		t.Fatalf("read %s: %v", migrationsTable, err)
	}
	defer rows.Close()
	var recs []migrationRecord
	for rows.Next() {
		var r migrationRecord
		if err := rows.Scan(&r.Version, &r.Name, &r.Adopted); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return v, recs
}

func hasIndex(t *testing.T, path, name string) bool {
	t.Helper()
	db := rawDB(t, path)
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func openClose(t *testing.T, path string, opts ...Option) error {
	t.Helper()
	s, err := Open(path, opts...)
	if err != nil {
		return err
	}
	return s.Close()
}

// TestMigrations_fileBeforeRecords: a log written before migrations were
// recorded (user_version 1, no record table) is at version 1: it is not
// re-created, and its step 1 is recorded as adopted, once.
func TestMigrations_fileBeforeRecords(t *testing.T) {
	path := schema1Copy(t)
	for range 2 {
		if err := openClose(t, path); err != nil {
			t.Fatalf("Open(schema-1 log) error = %v", err)
		}
	}
	v, recs := fileSchema(t, path)
	want := []migrationRecord{{1, "events table", true}, {2, "snapshots table", false}}
	if v != 2 || !cmp.Equal(recs, want) {
		t.Errorf("schema-1 log after two opens: version %d, record %+v; want 2, %+v", v, recs, want)
	}
}

// TestMigrations_freshFile: a new log runs every step and records them.
func TestMigrations_freshFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	if err := openClose(t, path); err != nil {
		t.Fatal(err)
	}
	v, recs := fileSchema(t, path)
	want := []migrationRecord{{1, "events table", false}, {2, "snapshots table", false}}
	if v != 2 || !cmp.Equal(recs, want) {
		t.Errorf("fresh log: version %d, record %+v; want 2, %+v", v, recs, want)
	}
}

// TestMigrations_testStep: a further step (test-only: an index) on the
// schema-1 log runs once, in one transaction, is recorded; a failing one
// leaves the file at the version before it, readable, and is retried on the
// next open.
func TestMigrations_testStep(t *testing.T) {
	const index = "test_events_type"
	ran := 0
	addIndex := migrate.Step{Version: 3, Name: "test index on type", Up: func(ctx context.Context, tx migrate.Tx) error {
		ran++
		_, err := tx.ExecContext(ctx, "CREATE INDEX "+index+" ON events(type)")
		return err
	}}
	boom := errors.New("boom")
	failing := migrate.Step{Version: 3, Name: "test index on type", Up: func(ctx context.Context, tx migrate.Tx) error {
		if _, err := tx.ExecContext(ctx, "CREATE INDEX "+index+" ON events(type)"); err != nil {
			return err
		}
		return boom // after a write: the rollback must undo it
	}}
	withStep := func(s migrate.Step) Option { return withMigrations([]migrate.Step{migrations[0], migrations[1], s}) }

	t.Run("a failing step rolls back", func(t *testing.T) {
		path := schema1Copy(t)
		err := openClose(t, path, withStep(failing))
		if !errors.Is(err, boom) {
			t.Fatalf("Open(failing step 3) error = %v, want boom", err)
		}
		v, recs := fileSchema(t, path)
		if v != 2 || len(recs) != 2 || hasIndex(t, path, index) {
			t.Errorf("after a failing step 3: version %d, record %+v, index %v; want 2, steps 1 and 2 only, no index", v, recs, hasIndex(t, path, index))
		}
		s, err := Open(path, WithReadOnly())
		if err != nil {
			t.Fatalf("Open(read-only, version 2) error = %v", err)
		}
		if head, err := s.Head(context.Background()); err != nil || head == 0 {
			t.Errorf("Head() = %d, %v; want the log's events", head, err)
		}
		s.Close()
	})

	t.Run("a read-only open cannot migrate", func(t *testing.T) {
		path := schema1Copy(t)
		if err := openClose(t, path); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(path, WithReadOnly(), withStep(addIndex)); !errors.Is(err, ErrOlderSchema) {
			t.Errorf("Open(read-only, version 2 of 3) error = %v, want ErrOlderSchema", err)
		}
	})

	t.Run("a step runs once and is recorded", func(t *testing.T) {
		path := schema1Copy(t)
		ran = 0
		for range 3 {
			if err := openClose(t, path, withStep(addIndex)); err != nil {
				t.Fatalf("Open(with step 3) error = %v", err)
			}
		}
		v, recs := fileSchema(t, path)
		want := []migrationRecord{{1, "events table", true}, {2, "snapshots table", false}, {3, "test index on type", false}}
		if ran != 1 || v != 3 || !cmp.Equal(recs, want) || !hasIndex(t, path, index) {
			t.Errorf("after three opens with step 3: ran %d, version %d, record %+v, index %v; want 1, 3, %+v, true",
				ran, v, recs, hasIndex(t, path, index), want)
		}
		// A build that knows steps 1 and 2 only refuses the file.
		if _, err := Open(path); !errors.Is(err, ErrNewerSchema) {
			t.Errorf("Open(version 3) by a build of version 2 error = %v, want ErrNewerSchema", err)
		}
		if _, err := Open(path, WithReadOnly()); !errors.Is(err, ErrNewerSchema) {
			t.Errorf("Open(version 3, read-only) by a build of version 2 error = %v, want ErrNewerSchema", err)
		}
	})
}
