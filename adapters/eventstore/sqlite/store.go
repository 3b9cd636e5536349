package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"hermes/events"
	"hermes/projections/migrate"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var (
	_ events.Store  = (*Store)(nil)
	_ events.Eraser = (*Store)(nil)
)

// Errors of this store, besides the port's.
var (
	// ErrNotEventStore: the file is not a hermes event store (another
	// SQLite database, not SQLite at all, or, for a read-only open, a file
	// no writer has initialised yet). Nothing in it was changed.
	ErrNotEventStore = errors.New("not a hermes event store")
	// ErrNewerSchema: the file was written by a newer hermes whose schema
	// this build does not know; opening it could misread or damage it.
	ErrNewerSchema = errors.New("event store schema is newer than this build")
	// ErrOlderSchema: a read-only open found a file whose schema this build
	// would migrate; open it for writing once (hermes serve) first.
	ErrOlderSchema = errors.New("event store schema is older than this build and a read-only open cannot migrate it")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("event store closed")
	// ErrReadOnly: the store was opened with [WithReadOnly] and cannot append.
	ErrReadOnly = errors.New("event store is read-only")
)

// MaxEventSize bounds the stored size of one event (its JSON data plus its
// JSON metadata). A bigger event is refused with events.ErrInvalidAppend: it
// would stall the group commit of every other writer and every reader.
const MaxEventSize = 4 << 20

const (
	// applicationID is "hrms": the file header mark of a hermes event store.
	applicationID = 0x68726d73

	defaultBusyTimeout  = 5 * time.Second
	defaultPollInterval = 100 * time.Millisecond
	maxReaders          = 8
)

type config struct {
	readOnly     bool
	soleWriter   bool
	clock        func() time.Time
	pollInterval time.Duration
	busyTimeout  time.Duration
	// migrations are the schema steps (tests add some of their own).
	migrations []migrate.Step
}

// Option configures [Open].
type Option func(*config)

// WithReadOnly opens an existing store for reading only: no writer
// connection, Append answers [ErrReadOnly]. It is meant for a process that
// tails the log while a server appends to the same file; its subscriptions
// see those appends by polling.
func WithReadOnly() Option { return func(c *config) { c.readOnly = true } }

// WithSoleWriter says that no other process writes to the file while the
// Store is open (hermes serve holds the home's gateway lock, which every
// other writer takes too). The writer then trusts its cache of stream
// versions across transactions instead of reading PRAGMA data_version at
// the start of each to see whether another connection committed. Were
// another process to append anyway, nothing would fork: the UNIQUE
// (stream, version) constraint refuses the insert, and the writer re-reads
// the stream's version and tries once more (commit.go).
func WithSoleWriter() Option { return func(c *config) { c.soleWriter = true } }

// WithClock sets the clock that stamps RecordedAt (default time.Now). The
// store reads it once per commit, holding the writer (on the writer's
// goroutine or on that of an append committed inline).
func WithClock(now func() time.Time) Option { return func(c *config) { c.clock = now } }

// WithPollInterval sets how often a caught-up subscription looks for events
// appended by another process (default 100ms). Appends made through this
// Store wake subscriptions at once, whatever the interval.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.pollInterval = d
		}
	}
}

// WithBusyTimeout sets how long a connection waits for another process's
// lock before giving up (default 5s).
func WithBusyTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.busyTimeout = d
		}
	}
}

// Store is the SQLite event store. It is safe for concurrent use; one Store
// per file per process is enough, since it already batches concurrent appends.
type Store struct {
	path    string
	cfg     config
	readers *sql.DB
	reads   readStatements
	// snapshotRead is ReadSnapshot's statement, prepared on first use.
	snapshotRead lazyStatement
	w            *writer // nil when read-only
	commits      broadcast
	// tail holds the rows of the writer's last commits (tail.go).
	tail committedTail
	// damage refuses writes once the log was found damaged (damage.go).
	damage damage

	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error
	subs      sync.WaitGroup
}

// Open opens the event store in the file at path, creating and initialising
// it (mode 0600) unless [WithReadOnly] is given. It fails with
// [ErrNotEventStore] or [ErrNewerSchema] when the file is not one this build
// may use.
func Open(path string, opts ...Option) (*Store, error) {
	cfg := config{
		clock:        time.Now,
		pollInterval: defaultPollInterval,
		busyTimeout:  defaultBusyTimeout,
		migrations:   migrations,
	}
	for _, o := range opts {
		o(&cfg)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open event store %s: %w", path, err)
	}
	if cfg.readOnly {
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("open event store %s: %w", abs, err)
		}
	} else if err := createPrivate(abs); err != nil {
		return nil, fmt.Errorf("open event store %s: %w", abs, err)
	}

	s := &Store{path: abs, cfg: cfg, closing: make(chan struct{})}
	s.commits.init()
	if !cfg.readOnly {
		s.w, err = openWriter(abs, cfg, &s.tail, &s.damage, s.commits.notify, s.closing)
		if err != nil {
			return nil, openError(abs, err)
		}
	}
	if err := s.openReaders(); err != nil {
		if s.w != nil {
			close(s.closing)
			<-s.w.done
			err = errors.Join(err, s.w.close())
		}
		return nil, openError(abs, err)
	}
	return s, nil
}

// openError names the file, and says ErrNotEventStore for a file SQLite
// itself refuses, whichever statement first read it.
func openError(path string, err error) error {
	if isCode(err, sqlite3.SQLITE_NOTADB) && !errors.Is(err, ErrNotEventStore) {
		return fmt.Errorf("open event store %s: %w: %w", path, ErrNotEventStore, err)
	}
	return fmt.Errorf("open event store %s: %w", path, err)
}

// createPrivate creates the database file with mode 0600 before SQLite
// opens it: SQLite gives its -wal and -shm files the mode of the database
// file, so this keeps all three private. An existing file keeps its mode.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

func (s *Store) openReaders() error {
	db, err := sql.Open("sqlite", dsn(s.path, true, s.cfg.busyTimeout))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(maxReaders)
	db.SetMaxIdleConns(maxReaders)
	if s.cfg.readOnly {
		latest := len(s.cfg.migrations)
		v, err := checkSchema(context.Background(), db, false, latest)
		if err == nil && v < latest {
			err = fmt.Errorf("%w: file schema %d, this build knows %d", ErrOlderSchema, v, latest)
		}
		if err != nil {
			return errors.Join(err, db.Close())
		}
	}
	if err := s.reads.prepare(db); err != nil {
		return errors.Join(fmt.Errorf("prepare reads: %w", err), db.Close())
	}
	s.readers = db
	return nil
}

// dsn builds a modernc.org/sqlite URI. The connection options are pragmas
// run on every new connection, so a pooled connection opened later is set up
// like the first one.
func dsn(path string, readOnly bool, busy time.Duration) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	if readOnly {
		q.Set("mode", "ro")
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "synchronous(FULL)")
		// Freed space (an erased payload, a freed page) is zeroed, so an
		// erasure leaves nothing in the file (docs/ERASURE.md).
		q.Add("_pragma", "secure_delete(1)")
		// The writer appends: the table pages it writes are not read
		// again, and it checks versions from its own cache. 2 MiB holds
		// the index pages an append looks up; a 10k-lane sweep's dirty
		// pages (~7 MB) spill to the WAL before its commit at 4 MiB too.
		// A cached page costs about twice its size resident (modernc's
		// allocator gives a 4 KiB page and its header an 8 KiB slot), so
		// 4 MiB was ~8 MiB of the server's RSS, its biggest single cache.
		// 1 MiB saved 2 MiB more and measured ~10% slower sweeps (noisy).
		q.Add("_pragma", "cache_size(-2048)")
		q.Add("_pragma", "temp_store(MEMORY)")
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}

// queryer is what checkSchema needs from a *sql.DB or a *sql.Conn.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// checkSchema tells whether the file is a hermes event store of a schema
// this build can use (1 to latest: an older one is migrated by the writer)
// and returns its version. An empty file (no schema objects, no
// application id) is fresh: errFresh lets the writer initialise it, and is
// ErrNotEventStore for a reader.
func checkSchema(ctx context.Context, q queryer, allowFresh bool, latest int) (int, error) {
	var appID, userVersion, objects int64
	err := q.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID)
	if err == nil {
		err = q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&userVersion)
	}
	if err == nil {
		err = q.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&objects)
	}
	switch {
	case isCode(err, sqlite3.SQLITE_NOTADB):
		return 0, fmt.Errorf("%w: %w", ErrNotEventStore, err)
	case err != nil:
		return 0, fmt.Errorf("read schema: %w", err)
	case appID == applicationID && userVersion >= 1 && userVersion <= int64(latest):
		return int(userVersion), nil
	case appID == applicationID && userVersion > int64(latest):
		return 0, fmt.Errorf("%w: file schema %d, this build knows %d", ErrNewerSchema, userVersion, latest)
	case appID == 0 && objects == 0 && allowFresh:
		return 0, errFresh
	case appID == 0 && objects == 0:
		return 0, fmt.Errorf("%w: the file was never initialised", ErrNotEventStore)
	default:
		return 0, fmt.Errorf("%w: application id %#x, schema %d", ErrNotEventStore, appID, userVersion)
	}
}

var errFresh = errors.New("fresh database")

func isCode(err error, code int) bool {
	var se *sqlitedriver.Error
	return errors.As(err, &se) && se.Code()&0xff == code
}

// SetMaxPageCount bounds the file's growth to n pages (SQLite's
// max_page_count; a limit below the current size holds the file at its
// size), from the next group commit on; 0 lifts the bound. An append that
// would grow the file past it fails with events.ErrStorageFull as on a full
// disk, and appends nothing. It is how tests make the store full
// deterministically, without root or a small file system.
func (s *Store) SetMaxPageCount(n int64) {
	if s.w != nil {
		s.w.pageLimit.Set(n)
	}
}

// Close stops the writer once every append already handed to it is
// committed, ends the subscriptions and closes the connections. Calls after
// the first return nil; every other method then answers ErrClosed.
func (s *Store) Close() error {
	first := false
	s.closeOnce.Do(func() {
		first = true
		close(s.closing)
		if s.w != nil {
			<-s.w.done
		}
		s.subs.Wait()
		// The writer's connection closes last: as the last connection of
		// the process it checkpoints the WAL and removes it.
		errs := []error{s.reads.close(), s.snapshotRead.close(), s.readers.Close()}
		if s.w != nil {
			errs = append(errs, s.w.close())
		}
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("close event store %s: %w", s.path, err)
		}
	})
	if !first {
		return nil
	}
	return s.closeErr
}

func (s *Store) closed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// broadcast wakes every waiter once per commit: a channel closed and
// replaced, so a notifier never blocks and a waiter that took the channel
// before reading cannot miss a commit that happened after its read.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) init() { b.ch = make(chan struct{}) }

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcast) notify() {
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}
