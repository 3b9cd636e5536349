package transcripts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"hermes/projections"
	"hermes/projections/storage"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

var (
	_ projections.Projection = (*Projection)(nil)
	_ projections.Dumper     = (*Projection)(nil)
	_ projections.Assigner   = (*Projection)(nil)
)

// Name is the versioned name of this projection. Bump it when the rows it
// derives from the same events change: every file with another name is
// emptied and rebuilt from position 0.
// v2: token and cost sums are bounded (domain/clamp.go) and the agent's raw
// JSON is valid text, so a row an older build overflowed, made infinite or
// stored with invalid UTF-8 is rebuilt.
const Name = "transcripts.v3"

// SchemaVersion is the Hermes schema version written to schema_version.
const SchemaVersion = 11

// Keys of state_meta owned by hermes.
const (
	metaProjection = "hermes_projection"
	metaCheckpoint = "hermes_checkpoint"
	// metaFTSRewrite is set by a batch holding an erasure, in its
	// transaction, and cleared by the purge that rewrote the FTS indexes.
	metaFTSRewrite = "hermes_fts_rewrite_pending"
)

const (
	busyTimeout = 5 * time.Second
	maxReaders  = 4
)

// Errors of this package.
var (
	// ErrNotFound: no such session, message event or title.
	ErrNotFound = errors.New("not found")
	// ErrNotProjection: a read-only open found no transcripts projection of
	// this version in the file (never written, or written by another build).
	ErrNotProjection = errors.New("not a transcripts projection")
	// ErrClosed: the projection was closed.
	ErrClosed = errors.New("transcripts projection closed")
	// ErrForeignDatabase: the file holds tables but was not written by this
	// projection (typically Python Hermes' own state.db); it is never
	// dropped or rewritten.
	ErrForeignDatabase = errors.New("database was not written by hermes (Python Hermes' state.db?); it is left untouched: move it aside to let hermes build its read model here")
)

// Projection is the transcripts read model on one state.db file. Apply is
// serialised internally; the query methods (of the embedded [Reader]) run
// on a read-only pool and are safe to call concurrently with Apply.
type Projection struct {
	*Reader

	path string
	name string

	mu     sync.Mutex // serialises Apply and Close
	clamps projections.ClampReporter
	wdb    *sql.DB
	conn   *sql.Conn // the only write connection
	stmts  *writeStatements
	closed bool
	// limit is the max_page_count of SetMaxPageCount.
	limit storage.PageLimit
	// ids numbers the message rows (messageids.go).
	ids messageIDs

	// bulk is set between BeginBulk and EndBulk; bulkTx while Apply
	// keeps its transaction open across batches (bulkPending events so
	// far, committed every bulkCommitEvents).
	bulk        bool
	bulkTx      bool
	bulkPending int
	// bulkVersions are the stream versions held while bulkTx (see
	// streamVersions).
	bulkVersions *streamVersions
	// bulkKnown are the sessions known to have a row during a bulk load
	// (applier.known), dropped with bulkVersions.
	bulkKnown map[string]bool
	// liveVersions and liveKnown are what bulkVersions and bulkKnown
	// are to a bulk load for the live path: held across committed batches
	// (Projection.held), dropped by a rollback.
	liveVersions *streamVersions
	liveKnown    map[string]bool
	// builders index the messages of a bulk load as they are committed
	// (see ftsBuilder); none on a load that Open finishes.
	builders []*ftsBuilder
	// contentDone is the highest message id whose FTS %_content rows a
	// bulk load with builders has written (bulkcontent.go).
	contentDone int64
	// erasedSinceScrub is set by a batch holding an erasure and cleared
	// by the Purge that scrubs the file's free space (vacuum.go).
	// notScrubbedSinceOpen is set by Open: an erasure applied before a
	// crash may not have been scrubbed, so the first purge of a process
	// scrubs, unless MarkPurged says the last process's clean stop did.
	erasedSinceScrub, notScrubbedSinceOpen atomic.Bool
}

// SetMaxPageCount bounds the file's growth to n pages from the next batch
// on (0 lifts the bound): a batch that needs more fails with
// events.ErrStorageFull, as on a full disk. For tests.
func (p *Projection) SetMaxPageCount(n int64) { p.limit.Set(n) }

// Open opens the projection in the file at path (Hermes' state.db),
// creating it with mode 0600 and schema version 11 if needed. A file whose
// stored projection name is not [Name] (including a file with tables but
// no name) is emptied and rebuilt: its checkpoint becomes 0.
func Open(path string) (*Projection, error) {
	return open(path, Name)
}

// open is Open with the projection name as a parameter, so tests can write
// a file under another name and watch Open rebuild it.
func open(path, name string) (*Projection, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open transcripts %s: %w", path, err)
	}
	if err := createPrivate(abs); err != nil {
		return nil, fmt.Errorf("open transcripts %s: %w", abs, err)
	}
	p := &Projection{path: abs, name: name}
	p.notScrubbedSinceOpen.Store(true)
	if err := p.openWriter(); err != nil {
		return nil, fmt.Errorf("open transcripts %s: %w", abs, err)
	}
	// A bulk load that did not finish (a crash, an error) is finished
	// before anything reads the file: the FTS indexes are built from the
	// messages and the triggers are back.
	if err := p.finishBulk(context.Background()); err != nil {
		return nil, errors.Join(fmt.Errorf("open transcripts %s: finish bulk load: %w", abs, err), p.closeWriter())
	}
	if err := p.ids.load(context.Background(), p.conn); err != nil {
		return nil, errors.Join(fmt.Errorf("open transcripts %s: %w", abs, err), p.closeWriter())
	}
	r, err := openReader(abs)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open transcripts %s: %w", abs, err), p.closeWriter())
	}
	p.Reader = r
	return p, nil
}

// createPrivate creates the database file with mode 0600 before SQLite
// opens it: SQLite gives its -wal and -shm files the mode of the database
// file, so all three stay private. An existing file keeps its mode.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// dsn builds a modernc.org/sqlite URI whose pragmas run on every new
// connection. The writer uses synchronous=NORMAL (see doc.go: the file is
// rebuildable) and takes the write lock at BEGIN, so a second process
// waits at the start of a batch rather than failing half way.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	if readOnly {
		q.Set("mode", "ro")
		q.Add("_pragma", "query_only(1)")
		// Ranking reads a docsize row per match: a bigger cache keeps
		// them in memory for the next search.
		q.Add("_pragma", "cache_size(-8192)")
	} else {
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", "synchronous(NORMAL)")
		// Deleted rows are zeroed in their pages, so an erased message
		// leaves nothing in the file (docs/ERASURE.md).
		q.Add("_pragma", "secure_delete(1)")
		// The writer appends and merges segments (read once); 32 MiB
		// measured no faster and stayed resident.
		q.Add("_pragma", "cache_size(-8192)")
		q.Add("_pragma", "temp_store(MEMORY)")
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}

func (p *Projection) openWriter() error {
	db, err := sql.Open("sqlite", dsn(p.path, false))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return errors.Join(err, db.Close())
	}
	p.wdb, p.conn = db, conn
	if err := p.init(ctx); err != nil {
		return errors.Join(err, p.closeWriter())
	}
	stmts, err := prepareWrites(ctx, conn)
	if err != nil {
		return errors.Join(err, p.closeWriter())
	}
	p.stmts = stmts
	return nil
}

// init switches the file to WAL, empties a file written under another
// projection name, brings the schema to the last migration, then records
// this projection's name. Each step is its own transaction: a crash leaves
// an empty file, or a migrated file without a name (rebuilt on the next
// open), never a file mistaken for Python Hermes' own.
func (p *Projection) init(ctx context.Context) error {
	var mode string
	if err := p.conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return fmt.Errorf("set journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("set journal mode: got %q, want wal", mode)
	}
	if err := p.rebuildIfRenamed(ctx); err != nil {
		return err
	}
	if err := migrateSchema(ctx, p.conn, migrations); err != nil {
		return err
	}
	if _, err := p.conn.ExecContext(ctx,
		"INSERT INTO state_meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
		metaProjection, p.name); err != nil {
		return fmt.Errorf("record projection name: %w", err)
	}
	// FTS5's secure-delete is off (it is stored in the table: files
	// written before had it on). It removed a deleted row's terms from
	// the segments at once, at 11 ms a row under load (24 s for 2,000 of
	// 20,000 messages, against 0.6 s without it); and it left the first
	// term of each leaf page in _idx all the same. The purge after an
	// erasure rebuilds both indexes whole instead (rewriteFTSIndexes),
	// which drops the deleted rows' entries and their _idx keys, and
	// scrubs the pages the old segments leave.
	for _, fts := range ftsTables {
		if _, err := p.conn.ExecContext(ctx, "INSERT INTO "+fts+"("+fts+", rank) VALUES ('secure-delete', 0)"); err != nil {
			return fmt.Errorf("set secure-delete on %s: %w", fts, err)
		}
	}
	return nil
}

// rebuildIfRenamed refuses a file hermes did not write and empties one
// written under another projection name (its schema version with it).
func (p *Projection) rebuildIfRenamed(ctx context.Context) (err error) {
	if _, err := p.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("init schema: %w", err)
	}
	defer func() {
		if err != nil {
			_, rbErr := p.conn.ExecContext(context.Background(), "ROLLBACK")
			err = errors.Join(err, rbErr)
		}
	}()
	stored, objects, err := storedName(ctx, p.conn)
	if err != nil {
		return fmt.Errorf("init schema: %w", err)
	}
	if objects > 0 && stored == "" {
		migrated, err := hasMigrations(ctx, p.conn)
		if err != nil {
			return fmt.Errorf("init schema: %w", err)
		}
		if !migrated {
			return ErrForeignDatabase
		}
	}
	if objects > 0 && stored != p.name {
		if err := dropAll(ctx, p.conn); err != nil {
			return fmt.Errorf("rebuild for %s (was %q): %w", p.name, stored, err)
		}
		if _, err := p.conn.ExecContext(ctx, "PRAGMA user_version = 0"); err != nil {
			return fmt.Errorf("rebuild for %s (was %q): %w", p.name, stored, err)
		}
	}
	if _, err := p.conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("init schema: %w", err)
	}
	return nil
}

// queryer is what the schema helpers need from a *sql.Conn or a *sql.DB.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// storedName returns the projection name recorded in the file ("" when
// none) and how many schema objects the file holds.
func storedName(ctx context.Context, q queryer) (string, int, error) {
	var objects int
	if err := q.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'").Scan(&objects); err != nil {
		return "", 0, err
	}
	var hasMeta int
	if err := q.QueryRowContext(ctx,
		"SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'state_meta'").Scan(&hasMeta); err != nil {
		return "", 0, err
	}
	if hasMeta == 0 {
		return "", objects, nil
	}
	var name sql.NullString
	err := q.QueryRowContext(ctx, "SELECT value FROM state_meta WHERE key = ?", metaProjection).Scan(&name)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", 0, err
	}
	return name.String, objects, nil
}

// dropAll removes every table (virtual tables first, which takes their
// shadow tables with them; then messages, whose rows reference sessions),
// and with them every index and trigger. sqlite_sequence rows go with
// their tables.
func dropAll(ctx context.Context, conn *sql.Conn) error {
	rows, err := conn.QueryContext(ctx,
		"SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
	if err != nil {
		return err
	}
	var virtual, plain []string
	for rows.Next() {
		var name string
		var ddl sql.NullString
		if err := rows.Scan(&name, &ddl); err != nil {
			return errors.Join(err, rows.Close())
		}
		if strings.HasPrefix(strings.ToUpper(ddl.String), "CREATE VIRTUAL TABLE") {
			virtual = append(virtual, name)
		} else {
			plain = append(plain, name)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	// messages references sessions: drop it before sessions.
	ordered := make([]string, 0, len(plain))
	for _, n := range plain {
		if n == "messages" {
			ordered = append(ordered, n)
		}
	}
	for _, n := range plain {
		if n != "messages" {
			ordered = append(ordered, n)
		}
	}
	for _, n := range virtual {
		if _, err := conn.ExecContext(ctx, "DROP TABLE IF EXISTS "+quoteIdent(n)); err != nil {
			return err
		}
	}
	for _, n := range ordered {
		if _, err := conn.ExecContext(ctx, "DROP TABLE IF EXISTS "+quoteIdent(n)); err != nil {
			return err
		}
	}
	return nil
}

// quoteIdent quotes an SQL identifier read from sqlite_schema (identifiers
// cannot be bound as parameters).
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// Name returns [Name] (the projections.Projection contract).
func (p *Projection) Name() string { return p.name }

// Checkpoint returns the global position of the last event applied, 0 for
// none (and after a rebuild).
func (p *Projection) Checkpoint(ctx context.Context) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, fmt.Errorf("checkpoint: %w", ErrClosed)
	}
	cp, err := readCheckpoint(ctx, p.conn)
	if err != nil {
		return 0, fmt.Errorf("checkpoint: %w", err)
	}
	return cp, nil
}

func readCheckpoint(ctx context.Context, q queryer) (uint64, error) {
	return scanCheckpoint(q.QueryRowContext(ctx, "SELECT value FROM state_meta WHERE key = ?", metaCheckpoint))
}

// scanCheckpoint reads the checkpoint from the row of its query.
func scanCheckpoint(row *sql.Row) (uint64, error) {
	var v sql.NullString
	err := row.Scan(&v)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !v.Valid) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	cp, err := strconv.ParseUint(v.String, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stored checkpoint %q: %w", v.String, err)
	}
	return cp, nil
}

// Close checkpoints the WAL (best effort) and releases both pools. Calls
// after the first return nil.
func (p *Projection) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	// A bulk load's open transaction is kept: Open finishes the load
	// (building the FTS indexes at once: the builders stop here).
	errs = append(errs, p.commitBulkTx(context.Background()))
	p.abortBuilders()
	if p.Reader != nil {
		errs = append(errs, p.Reader.Close())
	}
	_, _ = p.conn.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
	errs = append(errs, p.closeWriter())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close transcripts %s: %w", p.path, err)
	}
	return nil
}

func (p *Projection) closeWriter() error {
	var errs []error
	if p.stmts != nil {
		errs = append(errs, p.stmts.close())
	}
	if p.conn != nil {
		errs = append(errs, p.conn.Close())
	}
	if p.wdb != nil {
		errs = append(errs, p.wdb.Close())
	}
	return errors.Join(errs...)
}
