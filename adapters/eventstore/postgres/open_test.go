package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"

	"hermes/events"
	pgtest "hermes/testfixtures/postgres"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		name       string
		url        string
		wantSchema string
		wantErr    bool
		// wantParams are run-time parameters the connections must carry.
		wantParams map[string]string
	}{
		{name: "defaults", url: "postgres://u:secret@db.example:5433/hermes?sslmode=require", wantSchema: "hermes",
			wantParams: map[string]string{"statement_timeout": "60s", "idle_in_transaction_session_timeout": "30s", "application_name": "hermes"}},
		{name: "schema chosen", url: "postgresql://u@db/app?hermes_schema=tenant_2", wantSchema: "tenant_2"},
		{name: "the URL's own setting wins", url: "postgres://u@db/app?statement_timeout=5000&application_name=node-a", wantSchema: "hermes",
			wantParams: map[string]string{"statement_timeout": "5000", "application_name": "node-a"}},
		{name: "an upper-case schema", url: "postgres://u@db/app?hermes_schema=Tenant", wantErr: true},
		{name: "a quote in the schema", url: `postgres://u@db/app?hermes_schema=a"b`, wantErr: true},
		{name: "an empty schema", url: "postgres://u@db/app?hermes_schema=", wantErr: true},
		{name: "a schema too long", url: "postgres://u@db/app?hermes_schema=" + strings.Repeat("s", 49), wantErr: true},
		{name: "another scheme", url: "mysql://u@db/app", wantErr: true},
		{name: "not a URL", url: "host=db dbname=app", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseURL(tc.url)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseURL(%s) error = %v, want error %v", tc.url, err, tc.wantErr)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidURL) {
					t.Errorf("ParseURL(%s) error = %v, want ErrInvalidURL", tc.url, err)
				}
				return
			}
			if cfg.Schema != tc.wantSchema {
				t.Errorf("Schema = %q, want %q", cfg.Schema, tc.wantSchema)
			}
			if _, sent := cfg.Pool.ConnConfig.RuntimeParams[SchemaParam]; sent {
				t.Errorf("%s would be sent to the server as a run-time parameter", SchemaParam)
			}
			for k, v := range tc.wantParams {
				if got := cfg.Pool.ConnConfig.RuntimeParams[k]; got != v {
					t.Errorf("run-time parameter %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestParseURLKeepsThePasswordOutOfErrors(t *testing.T) {
	_, err := ParseURL("postgres://u:hunter2@db:notaport/app")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("ParseURL error = %v, want an error without the password", err)
	}
}

// TestAppendBounds: what PostgreSQL cannot store, or this store refuses to
// hold the order lock for, is refused before the writer with
// ErrInvalidAppend, and nothing is appended.
func TestAppendBounds(t *testing.T) {
	s := openTemp(t)
	big := events.Proposed{ID: "big", Event: events.TitleSet{SessionID: "s", Title: strings.Repeat("x", MaxEventSize), At: t0}}
	for _, tc := range []struct {
		name   string
		stream string
		ps     []events.Proposed
	}{
		{"an event past MaxEventSize", "transcript-s", []events.Proposed{big}},
		{"a NUL in the stream name", "lane-a\x00b", touch("a")},
		{"invalid UTF-8 in the stream name", "lane-\xff", touch("a")},
		{"a stream name past its bound", "lane-" + strings.Repeat("k", maxStreamNameSize), touch("a")},
		{"a NUL in an event id", "lane-1", touch("a\x00")},
		{"an event id past its bound", "lane-1", touch(strings.Repeat("i", maxEventIDSize+1))},
	} {
		_, err := s.Append(t.Context(), tc.stream, events.AnyVersion(), tc.ps)
		if !errors.Is(err, events.ErrInvalidAppend) {
			t.Errorf("Append with %s error = %v, want ErrInvalidAppend", tc.name, err)
		}
	}
	if h, err := s.Head(t.Context()); err != nil || h != 0 {
		t.Errorf("Head() = %d, %v after refused appends; want 0", h, err)
	}
	// A batch with one refused value among good ones answers that one alone.
	res, err := s.AppendBatch(t.Context(), func(yield func(events.StreamAppend) bool) {
		_ = yield(events.StreamAppend{Stream: "lane-1", Expected: events.NoStream(), Proposed: touch("ok-1")}) &&
			yield(events.StreamAppend{Stream: "lane-\xff", Expected: events.NoStream(), Proposed: touch("bad")}) &&
			yield(events.StreamAppend{Stream: "lane-2", Expected: events.NoStream(), Proposed: touch("ok-2")})
	})
	if err != nil || len(res) != 3 || res[0].Err != nil || !errors.Is(res[1].Err, events.ErrInvalidAppend) || res[2].Err != nil {
		t.Fatalf("AppendBatch = %+v, %v; want the middle append refused alone", res, err)
	}
}

func TestClassify(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("insert: %w", &pgconn.PgError{Code: code, Message: "m"}) }
	for _, tc := range []struct {
		name          string
		err           error
		wantFull      bool
		wantTransient bool
	}{
		{"disk_full", pg(codeDiskFull), true, false},
		{"io_error", pg(codeIOError), true, false},
		{"ENOSPC seen by the client", fmt.Errorf("write: %w", syscall.ENOSPC), true, false},
		{"serialization_failure", pg(codeSerializationFailure), false, true},
		{"deadlock_detected", pg(codeDeadlock), false, true},
		{"lock_not_available", pg(codeLockNotAvailable), false, true},
		{"admin_shutdown", pg(codeAdminShutdown), false, true},
		{"crash_shutdown", pg(codeCrashShutdown), false, true},
		{"cannot_connect_now", pg(codeCannotConnectNow), false, true},
		{"connection_failure", pg("08006"), false, true},
		{"idle_in_transaction_session_timeout", pg(codeIdleInTransaction), false, true},
		{"a lost connection", fmt.Errorf("commit: %w", io.ErrUnexpectedEOF), false, true},
		{"a refused connection", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, false, true},
		{"a closed connection", fmt.Errorf("begin: %w", pgconn.ErrConnClosed), false, true},
		{"unique_violation", pg(codeUniqueViolation), false, false},
		{"query_canceled (statement_timeout)", pg("57014"), false, false},
		{"undefined_table", pg("42P01"), false, false},
		{"a cancelled context", context.Canceled, false, false},
	} {
		if got := errors.Is(classify(tc.err), events.ErrStorageFull); got != tc.wantFull {
			t.Errorf("classify(%s) is ErrStorageFull = %v, want %v", tc.name, got, tc.wantFull)
		}
		if got := transient(tc.err); got != tc.wantTransient {
			t.Errorf("transient(%s) = %v, want %v", tc.name, got, tc.wantTransient)
		}
	}
	if err := classify(pg(codeDiskFull)); !strings.Contains(err.Error(), "m") {
		t.Errorf("classify dropped the server's message: %v", err)
	}
}

func schemaMigrations(t *testing.T, url string) []string {
	t.Helper()
	cfg, err := ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(t.Context(), cfg.Pool.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), "SELECT version || ' ' || name FROM "+pgx.Identifier{cfg.Schema}.Sanitize()+".schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func withSteps(n int) Option { return func(c *config) { c.migrations = steps[:n] } }

func execSQL(t *testing.T, url, sql string) {
	t.Helper()
	cfg, err := ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(t.Context(), cfg.Pool.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), strings.ReplaceAll(sql, "{schema}", pgx.Identifier{cfg.Schema}.Sanitize())); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestMigrations(t *testing.T) {
	all := []string{"1 events table", "2 snapshots table", "3 unpurged erasures table"}
	t.Run("a fresh schema gets every step, recorded", func(t *testing.T) {
		url := tempSchema(t)
		openAt(t, url)
		if got := schemaMigrations(t, url); strings.Join(got, ",") != strings.Join(all, ",") {
			t.Errorf("schema_migrations = %v, want %v", got, all)
		}
	})
	t.Run("a schema of step 1 keeps its log and moves on", func(t *testing.T) {
		url := tempSchema(t)
		old, err := Open(t.Context(), url, withSteps(1))
		if err != nil {
			t.Fatal(err)
		}
		res := mustAppend(t, old, "lane-1", events.NoStream(), touch("a", "b"))
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
		s := openAt(t, url)
		envs, err := s.ReadStream(t.Context(), "lane-1", 1, 10, events.Forwards)
		if err != nil || len(envs) != 2 || envs[1].Position != res.Positions[1] {
			t.Fatalf("ReadStream after the migration = %+v, %v", envs, err)
		}
		if err := s.WriteSnapshot(t.Context(), events.Snapshot{Stream: "lane-1", Schema: 1, Version: 2, EventID: "b", Data: []byte("x")}); err != nil {
			t.Errorf("WriteSnapshot after step 2 was applied: %v", err)
		}
		if got := schemaMigrations(t, url); len(got) != len(all) {
			t.Errorf("schema_migrations = %v, want %v", got, all)
		}
	})
	t.Run("a schema newer than the build is refused", func(t *testing.T) {
		url := tempSchema(t)
		openAt(t, url)
		if _, err := Open(t.Context(), url, withSteps(2)); !errors.Is(err, ErrNewerSchema) {
			t.Errorf("Open by a build of 2 steps error = %v, want ErrNewerSchema", err)
		}
	})
	t.Run("a schema of something else is refused and left alone", func(t *testing.T) {
		url := tempSchema(t)
		execSQL(t, url, "CREATE SCHEMA {schema}; CREATE TABLE {schema}.orders (id int); INSERT INTO {schema}.orders VALUES (7)")
		if _, err := Open(t.Context(), url); !errors.Is(err, ErrNotEventStore) {
			t.Fatalf("Open error = %v, want ErrNotEventStore", err)
		}
		execSQL(t, url, "DO $$ BEGIN IF (SELECT count(*) FROM {schema}.orders) <> 1 OR to_regclass('{schema}.events') IS NOT NULL THEN RAISE 'schema changed'; END IF; END $$")
	})
	t.Run("an order-breaking sequence is refused", func(t *testing.T) {
		url := tempSchema(t)
		s, err := Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		execSQL(t, url, "ALTER TABLE {schema}.events ALTER COLUMN position SET CACHE 20")
		if _, err := Open(t.Context(), url); !errors.Is(err, ErrNotEventStore) || !strings.Contains(err.Error(), "CACHE 1") {
			t.Errorf("Open error = %v, want ErrNotEventStore saying CACHE 1", err)
		}
	})
	t.Run("nodes opening a fresh schema together apply each step once", func(t *testing.T) {
		url := tempSchema(t)
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for range 6 {
			wg.Go(func() {
				s, err := Open(context.Background(), url)
				if err == nil {
					err = s.Close()
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("Open error = %v", err)
			}
		}
		if got := schemaMigrations(t, url); len(got) != len(all) {
			t.Errorf("schema_migrations = %v, want %v", got, all)
		}
	})
}

// TestSchemasShareADatabase: two stores in two schemas of one database are
// two logs: their own positions and streams, and a transaction stalled in
// one holds no append of the other (their order locks differ).
func TestSchemasShareADatabase(t *testing.T) {
	db := pgtest.Shared(t).NewDatabase(t)
	release := make(chan struct{})
	stalled := make(chan struct{})
	var once sync.Once
	a := openAt(t, schemaOn(t, db), func(c *config) {
		c.beforeCommit = func([]uint64) { once.Do(func() { close(stalled); <-release }) }
	})
	b := openAt(t, schemaOn(t, db))
	done := make(chan error, 1)
	go func() {
		_, err := a.Append(context.Background(), "lane-1", events.NoStream(), touch("a-1"))
		done <- err
	}()
	<-stalled
	res := mustAppend(t, b, "lane-1", events.NoStream(), touch("b-1", "b-2"))
	if res.Positions[0] != 1 || res.Versions[1] != 2 {
		t.Errorf("schema b's first append = %+v, want positions from 1 and versions 1, 2", res)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h, _ := a.Head(t.Context()); h != 1 {
		t.Errorf("schema a's Head() = %d, want 1", h)
	}
	if envs, err := a.ReadStream(t.Context(), "lane-1", 1, 10, events.Forwards); err != nil || len(envs) != 1 || envs[0].ID != "a-1" {
		t.Errorf("schema a's lane-1 = %+v, %v; want only a-1", envs, err)
	}
}

// TestReadOnly: a read-only open reads a store that servers append to,
// sees their appends through its subscriptions, writes nothing (the server
// refuses a write on its sessions too), and creates or migrates nothing.
func TestReadOnly(t *testing.T) {
	url := tempSchema(t)
	if _, err := Open(t.Context(), url, WithReadOnly()); !errors.Is(err, ErrOlderSchema) {
		t.Fatalf("read-only Open of an empty schema error = %v, want ErrOlderSchema", err)
	}
	old, err := Open(t.Context(), url, withSteps(2))
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	if _, err := Open(t.Context(), url, WithReadOnly()); !errors.Is(err, ErrOlderSchema) {
		t.Fatalf("read-only Open of a schema at step 2 error = %v, want ErrOlderSchema", err)
	}
	w := openAt(t, url)
	r := openAt(t, url, WithReadOnly())
	c := collect(t, r, 0)
	res := mustAppend(t, w, "lane-1", events.NoStream(), touch("a"))
	c.waitThrough(t, res.LastPosition())
	if _, err := r.Append(t.Context(), "lane-1", events.AnyVersion(), touch("b")); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Append on a read-only store error = %v, want ErrReadOnly", err)
	}
	if err := r.Purge(t.Context()); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Purge on a read-only store error = %v, want ErrReadOnly", err)
	}
	if _, err := r.readers.Exec(t.Context(), "DELETE FROM "+r.sql.schema+".events"); sqlState(err) != "25006" {
		t.Errorf("a DELETE on a read-only store's session error = %v, want read_only_sql_transaction", err)
	}
	if _, err := Open(t.Context(), url, WithReadOnly(), withSteps(2)); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("read-only Open by a build of 2 steps error = %v, want ErrNewerSchema", err)
	}
}
