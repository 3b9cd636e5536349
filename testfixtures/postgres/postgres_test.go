package postgres

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func setting(t *testing.T, conn *pgx.Conn, name string) string {
	t.Helper()
	var v string
	if err := conn.QueryRow(t.Context(), "SELECT current_setting($1)", name).Scan(&v); err != nil {
		t.Fatalf("current_setting(%s): %v", name, err)
	}
	return v
}

// TestSharedCluster checks what every PostgreSQL test relies on: a server
// with fsync on, reached over loopback TCP with a password, not running as
// root, and a database per test that starts empty and is gone afterwards.
func TestSharedCluster(t *testing.T) {
	c := Shared(t)
	conn := connect(t, c.URL())
	if got := setting(t, conn, "fsync"); got != "on" {
		t.Errorf("fsync = %s, want on", got)
	}
	if !c.External() {
		if got := setting(t, conn, "listen_addresses"); got != "127.0.0.1" {
			t.Errorf("listen_addresses = %q, want 127.0.0.1", got)
		}
		info, err := os.Stat(c.DataDir())
		if err != nil {
			t.Fatal(err)
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == 0 {
			t.Errorf("data directory owned by root: the server must run as an unprivileged user")
		}
	}

	var dbName string
	t.Run("database", func(t *testing.T) {
		url := c.NewDatabase(t)
		db := connect(t, url)
		if err := db.QueryRow(t.Context(), "SELECT current_database()").Scan(&dbName); err != nil {
			t.Fatal(err)
		}
		var tables int
		if err := db.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil || tables != 0 {
			t.Fatalf("tables in a new database = %d, %v; want 0", tables, err)
		}
		if _, err := db.Exec(t.Context(), "CREATE TABLE kept (x int)"); err != nil {
			t.Fatal(err)
		}
	})
	var exists bool
	if err := conn.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", dbName).Scan(&exists); err != nil || exists {
		t.Errorf("database %s exists after its test = %v, %v; want dropped", dbName, exists, err)
	}
}

// TestRestartKeepsDataAndEndsSessions restarts a cluster of its own: the
// committed rows survive, the old session is gone, and the port is the
// same.
func TestRestartKeepsDataAndEndsSessions(t *testing.T) {
	if Shared(t).External() {
		t.Skip("an external server cannot be restarted by the tests")
	}
	c, err := Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if _, err := os.Stat(c.DataDir()); !os.IsNotExist(err) {
			t.Errorf("data directory after Close: %v, want removed", err)
		}
	})
	old, err := pgx.Connect(t.Context(), c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(context.Background())
	if _, err := old.Exec(t.Context(), "CREATE TABLE t (x int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	url := c.URL()
	if err := c.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c.URL() != url {
		t.Errorf("URL after restart = %s, want %s", c.URL(), url)
	}
	if err := old.Ping(t.Context()); err == nil {
		t.Errorf("a session from before the restart still answers")
	}
	var x int
	if err := connect(t, c.URL()).QueryRow(t.Context(), "SELECT x FROM t").Scan(&x); err != nil || x != 42 {
		t.Errorf("SELECT x after restart = %d, %v; want 42", x, err)
	}
}

func TestTerminateBackends(t *testing.T) {
	c := Shared(t)
	url := c.NewDatabase(t)
	victim := connect(t, url)
	if err := victim.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	n, err := c.TerminateBackends(t.Context(), victim.Config().Database)
	if err != nil || n != 1 {
		t.Fatalf("TerminateBackends = %d, %v; want 1", n, err)
	}
	if err := victim.Ping(t.Context()); err == nil {
		t.Errorf("a terminated session still answers")
	}
}

// TestRemoveStale: a directory an hour old whose server is gone goes; one
// whose server runs, or a young one, stays.
func TestRemoveStale(t *testing.T) {
	old := time.Now().Add(-2 * time.Hour)
	mk := func(pid string, at time.Time) string {
		dir, err := os.MkdirTemp("", dirPrefix)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if pid != "" {
			if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "data", "postmaster.pid"), []byte(pid+"\n/data\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(dir, at, at); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	gone := mk("", old)
	dead := mk("2147483000", old)
	running := mk(strconv.Itoa(os.Getpid()), old)
	young := mk("", time.Now())
	removeStale()
	for _, tc := range []struct {
		dir  string
		want bool
	}{{gone, false}, {dead, false}, {running, true}, {young, true}} {
		_, err := os.Stat(tc.dir)
		if exists := err == nil; exists != tc.want {
			t.Errorf("%s exists after removeStale = %v, want %v", tc.dir, exists, tc.want)
		}
	}
}
