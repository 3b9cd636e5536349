package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"hermes/events"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	_ events.Store         = (*Store)(nil)
	_ events.BatchAppender = (*Store)(nil)
	_ events.SnapshotStore = (*Store)(nil)
	_ events.Eraser        = (*Store)(nil)
)

// Errors of this store, besides the port's.
var (
	// ErrNotEventStore: the schema holds tables that are not a hermes event
	// store's (or a hermes store whose order guarantee was altered). Nothing
	// in it was changed.
	ErrNotEventStore = errors.New("not a hermes event store")
	// ErrNewerSchema: the schema was migrated by a newer hermes whose steps
	// this build does not know; using it could misread or damage it.
	ErrNewerSchema = errors.New("event store schema is newer than this build")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("event store closed")
	// ErrInvalidURL: the store URL is not one this store can use.
	ErrInvalidURL = errors.New("invalid PostgreSQL store URL")
	// ErrOlderSchema: a read-only open found a schema this build would
	// migrate (or none); open it for writing once (hermes serve) first.
	ErrOlderSchema = errors.New("event store schema is older than this build and a read-only open cannot migrate it")
	// ErrReadOnly: the store was opened with [WithReadOnly].
	ErrReadOnly = errors.New("event store is read-only")
)

// Bounds of what one append may hold. A bigger event is refused with
// events.ErrInvalidAppend, changing nothing: it would hold the order lock,
// and every other writer, while it is sent. Stream names and event ids are
// also keys of unique indexes, whose entries PostgreSQL bounds (about 2.7
// kB).
const (
	MaxEventSize      = 4 << 20
	MaxSnapshotSize   = 16 << 20
	maxStreamNameSize = 1024
	maxEventIDSize    = 256
	maxTypeSize       = 256
)

// SchemaParam is the query parameter of the store URL that names the
// schema holding the store's tables (DefaultSchema when absent). It is
// taken out of the URL before the rest goes to pgx, so several hermes
// deployments can share one database, each in its own schema.
const (
	SchemaParam   = "hermes_schema"
	DefaultSchema = "hermes"
)

// schemaName is what a schema name may be: lower case, so that it is the
// same quoted or not, and short enough for the LISTEN channel built on it.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

// Session settings every connection starts with, unless the URL sets them
// (pgx sends unknown URL parameters as run-time parameters): no statement
// runs, and no transaction stays open doing nothing, for longer than this.
// Lock waits count within statement_timeout: an append waiting behind a
// Purge's table rewrite fails past it.
var defaultRuntimeParams = map[string]string{
	"application_name":                    "hermes",
	"statement_timeout":                   "60s",
	"idle_in_transaction_session_timeout": "30s",
}

const (
	defaultPollInterval = time.Second
	// defaultWriters is how many connections of a Store append. One: a
	// second lets the next transaction wait for the order lock at the
	// server while one holds it, but it takes appends as they come and its
	// transactions were smaller and slower in all (BenchmarkAppendWriters,
	// 16 appenders, load 3: 2 writers 10,500-11,600 events/s at 5.2
	// appends a transaction; 1 writer 20,000-20,200 at 13-14; 1 writer
	// without the gather 15,000-15,700 at 8, two alternating cohorts).
	defaultWriters = 1
	maxReaders     = 8
	connectTimeout = 10 * time.Second
	// retryBudget bounds how long the writer keeps retrying a transaction
	// that failed transiently (a lost connection, a restarting server),
	// and subscriptionRetryBudget how long a subscription keeps reading
	// again: past it the append fails, or the subscription ends with the
	// error.
	retryBudget             = 15 * time.Second
	subscriptionRetryBudget = time.Minute
)

type config struct {
	readOnly     bool
	clock        func() time.Time
	pollInterval time.Duration
	// migrations are the schema steps Open applies (tests apply fewer).
	migrations []step
	// Test hooks: beforeCommit runs on the writer after a transaction's
	// events have their positions and before its COMMIT; noOrderLock
	// leaves the order lock out (the pitfall the lock prevents, to show
	// that the tests catch it); noListen leaves the listener out, so that
	// only polling wakes the subscriptions.
	beforeCommit func(positions []uint64)
	noOrderLock  bool
	noListen     bool
	retryBudget  time.Duration
	// writers is how many connections append, and gatherWait how long a
	// lone writer waits for the appenders its last commit answered (see
	// writer.go).
	writers    int
	gatherWait time.Duration
}

// Option configures [Open].
type Option func(*config)

// WithReadOnly opens the store for reading only, for a command that tails
// or reads the log while servers append: no writer, no migration (a schema
// not at this build's last step is refused with ErrOlderSchema or
// ErrNewerSchema), sessions that the server keeps read-only
// (default_transaction_read_only), and ErrReadOnly from every write.
func WithReadOnly() Option { return func(c *config) { c.readOnly = true } }

// WithClock sets the clock that stamps RecordedAt (default time.Now). The
// writer reads it once per transaction.
func WithClock(now func() time.Time) Option { return func(c *config) { c.clock = now } }

// WithPollInterval sets how often a caught-up subscription reads the log
// when no notification came (default 1s). Commits of this Store wake its
// subscriptions at once, and those of other processes through LISTEN/NOTIFY;
// polling covers a notification lost with the listening connection.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.pollInterval = d
		}
	}
}

// Store is the PostgreSQL event store. It is safe for concurrent use; one
// Store per process is enough, since it already groups concurrent appends
// into shared transactions.
type Store struct {
	cfg     config
	schema  string // as given, unquoted
	sql     statements
	keys    lockKeys
	channel string // the LISTEN/NOTIFY channel

	connCfg *pgx.ConnConfig // for the writer's and listener's connections
	readers *pgxpool.Pool
	w       *writers
	stats   writerStats
	commits broadcast

	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error
	bg        sync.WaitGroup // listener and subscriptions
}

// Config is what ParseURL makes of a store URL.
type Config struct {
	// Schema holds the store's tables.
	Schema string
	// Pool is the pgx configuration of the rest of the URL (host, port,
	// database, user, TLS, the PG* environment variables, …).
	Pool *pgxpool.Config
}

// ParseURL reads a postgres:// (or postgresql://) store URL: pgx's URL,
// with its TLS and password options and the PG* environment variables,
// plus hermes_schema (default hermes).
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrInvalidURL, redact(err))
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return Config{}, fmt.Errorf("%w: scheme %q, want postgres://", ErrInvalidURL, u.Scheme)
	}
	q := u.Query()
	schema := DefaultSchema
	if vs, ok := q[SchemaParam]; ok {
		schema = vs[len(vs)-1]
		q.Del(SchemaParam)
		u.RawQuery = q.Encode()
	}
	if !schemaName.MatchString(schema) {
		return Config{}, fmt.Errorf("%w: %s %q: want lower-case letters, digits and _, at most 48, not starting with a digit", ErrInvalidURL, SchemaParam, schema)
	}
	pool, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	for k, v := range defaultRuntimeParams {
		if _, set := pool.ConnConfig.RuntimeParams[k]; !set {
			pool.ConnConfig.RuntimeParams[k] = v
		}
	}
	if pool.ConnConfig.ConnectTimeout == 0 {
		pool.ConnConfig.ConnectTimeout = connectTimeout
	}
	pool.MaxConns = maxReaders
	pool.MinConns = 0
	return Config{Schema: schema, Pool: pool}, nil
}

// redact keeps a URL's password out of an error.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return errors.New(ue.Err.Error())
	}
	return err
}

// Open connects to the store the URL names, creating its schema and tables
// on first use and migrating them forward (numbered steps, each in its own
// transaction, applied once however many processes open the store at the
// same time). It fails with [ErrNotEventStore] or [ErrNewerSchema] when the
// schema is not one this build may use.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	cfg := config{clock: time.Now, pollInterval: defaultPollInterval, migrations: steps, retryBudget: retryBudget,
		writers: defaultWriters, gatherWait: maxGatherWait}
	for _, o := range opts {
		o(&cfg)
	}
	pc, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if cfg.readOnly {
		pc.Pool.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	quoted := pgx.Identifier{pc.Schema}.Sanitize()
	s := &Store{
		cfg:     cfg,
		schema:  pc.Schema,
		sql:     newStatements(quoted),
		keys:    newLockKeys(pc.Schema),
		channel: "hermes:" + pc.Schema,
		connCfg: pc.Pool.ConnConfig,
		closing: make(chan struct{}),
	}
	s.commits.init()
	where := fmt.Sprintf("open event store %s (schema %s)", hostOf(pc.Pool.ConnConfig), pc.Schema)

	conn, err := s.connectWriter(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if cfg.readOnly {
		err = s.checkReadable(ctx, conn)
		conn.Close(context.Background())
		conn = nil
	} else {
		err = s.migrate(ctx, conn)
	}
	if err != nil {
		if conn != nil {
			conn.Close(context.Background())
		}
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	s.readers, err = pgxpool.NewWithConfig(ctx, pc.Pool)
	if err != nil {
		if conn != nil {
			conn.Close(context.Background())
		}
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if !cfg.readOnly {
		s.w = newWriters(s, conn, cfg.writers)
	}
	if !cfg.noListen {
		s.bg.Add(1)
		go s.listen()
	}
	return s, nil
}

func hostOf(c *pgx.ConnConfig) string {
	return fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database)
}

// connect opens a connection of its own (the listener, a purge, the
// migrations).
func (s *Store) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	return pgx.ConnectConfig(ctx, s.connCfg)
}

// connectWriter opens a writer's connection. Its session plans the
// writer's statements once (plan_cache_mode force_generic_plan): a custom
// plan of the fast path's INSERT cost more to make than to run, inside the
// order lock (0.25 ms against 0.13 ms for one row, at load 9), and its
// generic plan is linear like the custom one (fast.go).
func (s *Store) connectWriter(ctx context.Context) (*pgx.Conn, error) {
	cfg := s.connCfg.Copy()
	if _, set := cfg.RuntimeParams["plan_cache_mode"]; !set {
		cfg.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	return pgx.ConnectConfig(ctx, cfg)
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
		s.bg.Wait()
		s.readers.Close()
		if s.w != nil {
			if err := s.w.close(); err != nil {
				s.closeErr = fmt.Errorf("close event store (schema %s): %w", s.schema, err)
			}
		}
	})
	if !first {
		return nil
	}
	return s.closeErr
}

// writable says why the store cannot write, or nil.
func (s *Store) writable() error {
	if s.w == nil {
		return ErrReadOnly
	}
	if s.closed() {
		return ErrClosed
	}
	return nil
}

func (s *Store) closed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// lockKeys are the keys of the advisory locks of one store, derived from
// its schema so that stores in other schemas of the same database never
// wait for each other (advisory locks are per database).
type lockKeys struct {
	order, migrate, purge int64
}

func newLockKeys(schema string) lockKeys {
	key := func(what string) int64 {
		h := sha256.Sum256([]byte("hermes/" + what + "/" + schema))
		return int64(binary.BigEndian.Uint64(h[:8]))
	}
	return lockKeys{order: key("order"), migrate: key("migrate"), purge: key("purge")}
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

// statements are the store's SQL with its schema filled in. Values are
// always parameters; only the schema, an identifier quoted by pgx, is
// part of the text.
type statements struct {
	schema                                        string
	lock, lockShared                              string
	streamVersions, lookupIDs, insert             string
	fastInsert, notify                            string
	readForwards, readBackwards, readLast         string
	streamExists, readAll, head                   string
	eraseRead, eraseUpdate, eraseSnapshot         string
	markUnpurged                                  string
	snapshotRead, snapshotEventID, snapshotErased string
	snapshotWrite, snapshotDelete                 string
	sequenceCache                                 string
	positionOf                                    string
}

const columns = "position, stream, version, event_id, type, data, metadata, recorded_at"

func newStatements(schema string) statements {
	q := func(s string) string { return strings.ReplaceAll(s, "{schema}", schema) }
	return statements{
		schema:     schema,
		lock:       "SELECT pg_advisory_xact_lock($1)",
		lockShared: "SELECT pg_advisory_xact_lock_shared($1)",
		// One index probe per stream (the last version through the
		// (stream, version) index), however long the stream.
		streamVersions: q(`SELECT s, coalesce((SELECT max(version) FROM {schema}.events WHERE stream = s), 0)
			FROM unnest($1::text[]) AS s`),
		fastInsert: q(fastInsert),
		// Subscribers read by position, so the payload says nothing.
		notify:    "SELECT pg_notify($1, '')",
		lookupIDs: q("SELECT event_id, stream, version, position FROM {schema}.events WHERE event_id = ANY($1::text[])"),
		// The identity column numbers the rows in the order the SELECT
		// yields them (its ORDER BY), which is the order of the append.
		insert: q(`INSERT INTO {schema}.events (stream, version, event_id, type, data, metadata, recorded_at)
			SELECT stream, version, event_id, type, data, metadata, $7
			FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[])
				WITH ORDINALITY AS r(stream, version, event_id, type, data, metadata, n)
			ORDER BY n
			RETURNING event_id, position`),
		readForwards:  q("SELECT " + columns + " FROM {schema}.events WHERE stream = $1 AND version >= $2 ORDER BY version LIMIT $3"),
		readBackwards: q("SELECT " + columns + " FROM {schema}.events WHERE stream = $1 AND version <= $2 ORDER BY version DESC LIMIT $3"),
		readLast:      q("SELECT " + columns + " FROM {schema}.events WHERE stream = $1 ORDER BY version DESC LIMIT $2"),
		streamExists:  q("SELECT EXISTS (SELECT 1 FROM {schema}.events WHERE stream = $1)"),
		readAll:       q("SELECT " + columns + " FROM {schema}.events WHERE position > $1 ORDER BY position LIMIT $2"),
		head:          q("SELECT coalesce(max(position), 0) FROM {schema}.events"),
		eraseRead:     q("SELECT position, type, data, metadata FROM {schema}.events WHERE stream = $1 AND version < $2 ORDER BY version"),
		eraseUpdate: q(`UPDATE {schema}.events AS e SET data = u.data, metadata = u.metadata
			FROM unnest($1::bigint[], $2::text[], $3::text[]) AS u(position, data, metadata)
			WHERE e.position = u.position`),
		eraseSnapshot:   q("DELETE FROM {schema}.snapshots WHERE stream = $1"),
		markUnpurged:    q("INSERT INTO {schema}.unpurged_erasures (position) VALUES ($1) ON CONFLICT DO NOTHING"),
		snapshotRead:    q("SELECT schema_version, version, event_id, data FROM {schema}.snapshots WHERE stream = $1"),
		snapshotEventID: q("SELECT event_id FROM {schema}.events WHERE stream = $1 AND version = $2"),
		snapshotErased: q(`SELECT EXISTS (SELECT 1 FROM {schema}.events WHERE stream = $1 AND version > $2
			AND type = ANY($3::text[]))`),
		// A snapshot of an older version of the same schema never replaces
		// a newer one (two loads racing); one of another schema always does.
		snapshotWrite: q(`INSERT INTO {schema}.snapshots AS s (stream, schema_version, version, event_id, data) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (stream) DO UPDATE SET schema_version = excluded.schema_version, version = excluded.version,
				event_id = excluded.event_id, data = excluded.data
			WHERE excluded.version >= s.version OR excluded.schema_version <> s.schema_version`),
		snapshotDelete: q("DELETE FROM {schema}.snapshots WHERE stream = $1"),
		positionOf:     q("SELECT position FROM {schema}.events WHERE event_id = $1"),
		sequenceCache: `SELECT s.seqcache FROM pg_sequence s
			WHERE s.seqrelid = pg_get_serial_sequence($1, 'position')::regclass`,
	}
}
