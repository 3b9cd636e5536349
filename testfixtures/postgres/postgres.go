package postgres

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled: no PostgreSQL server binaries were found (or, as root,
// no unprivileged user to run them as).
var ErrNotInstalled = errors.New("PostgreSQL is not installed")

// InstallHint says how to get what the tests need.
const InstallHint = "install Debian's postgresql package (apt-get install postgresql), or set HERMES_TEST_POSTGRES_URL to the postgres:// URL of a server"

// EnvURL names the variable that points the tests at an existing server.
const EnvURL = "HERMES_TEST_POSTGRES_URL"

// superuser is the name initdb gives the cluster's superuser.
const superuser = "postgres"

// Bounds of the waits on the server process. Nothing waits for them to
// pass: they turn a server that never comes up (or never goes) into an
// error instead of a hung test, and are generous because the machine is
// shared and may be loaded.
const (
	readyLimit = 90 * time.Second
	stopLimit  = 60 * time.Second
)

// Cluster is a PostgreSQL server for tests: one this package started (see
// [Start]) or the existing one HERMES_TEST_POSTGRES_URL names.
type Cluster struct {
	base     *url.URL // the superuser on database postgres
	external bool

	// Set for a cluster this package started.
	dir  string // data/, server.log
	bin  string // the directory of initdb and postgres
	port int
	cred *syscall.Credential // nil: run as the current user

	mu     sync.Mutex
	proc   *exec.Cmd
	exited chan struct{}
	log    *os.File

	databases atomic.Int64
}

// Start initialises a cluster in a new temporary directory and starts it on
// a free loopback port. Close stops it and removes the directory.
func Start(ctx context.Context) (*Cluster, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	removeStale()
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("start PostgreSQL: %w", err)
	}
	c := &Cluster{dir: dir, bin: bin, cred: cred}
	if err := c.initdb(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := c.start(ctx, true); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

// dirPrefix names the clusters' temporary directories.
const dirPrefix = "hermes-postgres-"

// removeStale removes what a test process killed before its cleanup (a
// go test timeout) left of its cluster: a directory of this package more
// than an hour old whose server is gone (the kernel stopped it with its
// parent: Pdeathsig). A directory whose server still runs, or younger
// (another test binary's, being initialised), is left alone.
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		info, err := os.Stat(dir)
		if err != nil || time.Since(info.ModTime()) < time.Hour {
			continue
		}
		if pid, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
			first, _, _ := strings.Cut(string(pid), "\n")
			if n, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && syscall.Kill(n, 0) == nil {
				continue
			}
		}
		_ = os.RemoveAll(dir)
	}
}

// findBinaries returns the directory holding initdb and postgres: the one
// initdb on PATH resolves to, or the newest /usr/lib/postgresql/N/bin
// (Debian keeps the server's programs off PATH).
func findBinaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dir := filepath.Dir(real)
			if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
				return dir, nil
			}
		}
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(found, func(a, b string) int { return majorOf(a) - majorOf(b) })
	if len(found) == 0 {
		return "", fmt.Errorf("%w: no initdb on PATH or in /usr/lib/postgresql/*/bin: %s", ErrNotInstalled, InstallHint)
	}
	return filepath.Dir(found[len(found)-1]), nil
}

// majorOf is N of /usr/lib/postgresql/N/bin/initdb.
func majorOf(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// serverUser is who runs initdb and the server: the current user, or, for
// root (whom PostgreSQL refuses), the postgres user Debian's package
// creates.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(superuser)
	if err != nil {
		return nil, fmt.Errorf("%w: the tests run as root, which PostgreSQL refuses, and there is no unprivileged %q user to run it as (%v): %s",
			ErrNotInstalled, superuser, err, InstallHint)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("start PostgreSQL: user %s: %w", superuser, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "data") }

// initdb creates the cluster's files, owned by the server's user, with a
// random superuser password.
func (c *Cluster) initdb(ctx context.Context) error {
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	password := hex.EncodeToString(secret)
	pwfile := filepath.Join(c.dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	defer os.Remove(pwfile)
	if c.cred != nil {
		for _, p := range []string{c.dir, pwfile} {
			if err := os.Chown(p, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return fmt.Errorf("initdb: give %s to the server's user: %w", p, err)
			}
		}
	}
	if err := os.Chmod(c.dir, 0o700); err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	// --no-sync: initdb's final flush of the fresh files only matters to an
	// operating system crash, which ends the test anyway. The server itself
	// runs with fsync on.
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "initdb"),
		"-D", c.dataDir(), "-U", superuser, "--pwfile", pwfile, "--auth", "scram-sha-256",
		"--encoding", "UTF8", "--locale", "C", "--no-sync", "--no-instructions")
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	c.base = &url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(superuser, password),
		Path:     "/postgres",
		RawQuery: "sslmode=disable",
	}
	return nil
}

// start runs the server. With newPort it takes a free loopback port (and
// tries another when something took it first); otherwise it listens on the
// port it had.
func (c *Cluster) start(ctx context.Context, newPort bool) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if newPort || c.port == 0 {
			if c.port, err = freePort(); err != nil {
				return fmt.Errorf("start PostgreSQL: %w", err)
			}
		}
		c.base.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port))
		var bound bool
		if bound, err = c.run(ctx); err == nil || bound {
			return err
		}
		newPort = true
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// run starts the server process and waits until it accepts connections. It
// reports bound false when the server could not listen on its port (taken
// meanwhile), so that start tries another.
func (c *Cluster) run(ctx context.Context) (bound bool, err error) {
	logFile, err := os.OpenFile(filepath.Join(c.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return true, fmt.Errorf("start PostgreSQL: %w", err)
	}
	cmd := exec.Command(filepath.Join(c.bin, "postgres"),
		"-D", c.dataDir(),
		"-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		"-c", "fsync=on",
		"-c", "max_connections=200",
		"-c", "shared_buffers=32MB",
		"-c", "log_min_messages=warning",
	)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Pdeathsig: should the test process die without stopping the server,
	// the kernel asks it for a fast shutdown.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true, Pdeathsig: syscall.SIGINT}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return true, fmt.Errorf("start PostgreSQL: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	c.mu.Lock()
	c.proc, c.exited, c.log = cmd, exited, logFile
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, readyLimit)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.base.String()+"&connect_timeout=5")
		if err == nil {
			return true, conn.Close(ctx)
		}
		select {
		case <-exited:
			log := c.logTail()
			c.mu.Lock()
			c.proc = nil
			c.mu.Unlock()
			logFile.Close()
			return !strings.Contains(log, "could not bind") && !strings.Contains(log, "could not create any TCP/IP sockets"),
				fmt.Errorf("start PostgreSQL: the server exited:\n%s", log)
		case <-ctx.Done():
			_ = c.Stop(context.Background())
			return true, fmt.Errorf("start PostgreSQL: not accepting connections after %v: %v\n%s", readyLimit, err, c.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logTail is the end of the server's log, for error messages.
func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

// URL is the postgres:// URL of the cluster's superuser on database
// postgres.
func (c *Cluster) URL() string { return c.base.String() }

// External reports whether the cluster is an existing server
// (HERMES_TEST_POSTGRES_URL), which the tests cannot stop or look into.
func (c *Cluster) External() bool { return c.external }

// DataDir is the cluster's data directory ("" for an external one). As
// root, read it as root: the files belong to the server's user.
func (c *Cluster) DataDir() string {
	if c.external {
		return ""
	}
	return c.dataDir()
}

// DatabaseURL is the URL of database name, as the cluster's superuser.
func (c *Cluster) DatabaseURL(name string) string {
	u := *c.base
	u.Path = "/" + name
	return u.String()
}

// NewDatabase creates an empty database for t, dropped when t ends
// (connections still open to it are ended), and returns its URL.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", c.databases.Add(1), identifierPart(t.Name(), 40))
	ctx, cancel := context.WithTimeout(context.Background(), readyLimit)
	defer cancel()
	if err := c.exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), readyLimit)
		defer cancel()
		if err := c.exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return c.DatabaseURL(name)
}

// identifierPart is s reduced to lower-case letters, digits and
// underscores, at most n of them.
func identifierPart(s string, n int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if b.Len() == n {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// exec runs one statement as the superuser on database postgres.
func (c *Cluster) exec(ctx context.Context, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// TerminateBackends ends every server process connected to database (the
// server closes their connections, as on a network failure or an
// administrator's pg_terminate_backend), and returns how many it ended.
func (c *Cluster) TerminateBackends(ctx context.Context, database string) (int, error) {
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'`, database).Scan(&n)
	return n, err
}

// Stop shuts the server down (a fast shutdown: sessions are ended, a
// checkpoint written), keeping its files; [Cluster.Restart] starts it
// again on the same port.
func (c *Cluster) Stop(ctx context.Context) error {
	if c.external {
		return errors.New("stop PostgreSQL: an external server cannot be stopped by the tests")
	}
	c.mu.Lock()
	proc, exited, logFile := c.proc, c.exited, c.log
	c.proc = nil
	c.mu.Unlock()
	if proc == nil {
		return nil
	}
	defer logFile.Close()
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGINT, stopLimit}, {syscall.SIGQUIT, 10 * time.Second}, {syscall.SIGKILL, 10 * time.Second}} {
		_ = proc.Process.Signal(step.sig)
		select {
		case <-exited:
			return nil
		case <-time.After(step.wait):
		case <-ctx.Done():
			_ = proc.Process.Kill()
			<-exited
			return ctx.Err()
		}
	}
	return errors.New("stop PostgreSQL: the server did not exit")
}

// Restart stops the server, if it runs, and starts it again on the same
// port with the same files: sessions end, and new ones see every committed
// transaction.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.Stop(ctx); err != nil {
		return err
	}
	return c.start(ctx, false)
}

// Close stops the server and removes its files; an external server is left
// as it is.
func (c *Cluster) Close() error {
	if c.external {
		return nil
	}
	err := c.Stop(context.Background())
	return errors.Join(err, os.RemoveAll(c.dir))
}

// external returns the server HERMES_TEST_POSTGRES_URL names.
func external(raw string) (*Cluster, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("%s must be a postgres:// URL (got %q): %v", EnvURL, raw, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyLimit)
	defer cancel()
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", EnvURL, err)
	}
	_ = conn.Close(ctx)
	return &Cluster{base: u, external: true}, nil
}

var shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Shared returns the test binary's cluster, started on first use (or the
// server HERMES_TEST_POSTGRES_URL names). Without PostgreSQL it skips t,
// saying how to install it, or fails t when CI is set. Call [Main] from the
// package's TestMain so that the cluster stops when the tests end.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	shared.once.Do(func() {
		if raw := os.Getenv(EnvURL); raw != "" {
			shared.c, shared.err = external(raw)
			return
		}
		shared.c, shared.err = Start(context.Background())
	})
	switch err := shared.err; {
	case errors.Is(err, ErrNotInstalled) && os.Getenv("CI") != "":
		t.Fatalf("%v; CI must run the PostgreSQL tests (.ci/run installs it with apt-get install postgresql)", err)
	case errors.Is(err, ErrNotInstalled):
		t.Skipf("%v; the PostgreSQL tests are skipped outside CI", err)
	case err != nil:
		t.Fatalf("PostgreSQL for the tests: %v", err)
	}
	return shared.c
}

// Main runs the tests and then stops the shared cluster, if one was
// started: call it from TestMain as os.Exit(postgres.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if shared.c != nil {
		if err := shared.c.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "stop the tests' PostgreSQL:", err)
		}
	}
	return code
}
