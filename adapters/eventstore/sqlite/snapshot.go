package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"hermes/events"
	"hermes/projections/migrate"
)

var _ events.SnapshotStore = (*Store)(nil)

// MaxSnapshotSize bounds one stored snapshot; a bigger one is refused (the
// stream is then folded from its events, as without snapshots).
const MaxSnapshotSize = 16 << 20

// createSnapshots is step 2: one snapshot per stream, in the log's own file,
// so a backup or a copy of the file carries snapshots that match its log,
// and an erasure deletes a stream's snapshot in the transaction that
// rewrites its events (erase.go).
var createSnapshots = migrate.SQL(`CREATE TABLE snapshots (
    stream         TEXT    PRIMARY KEY,
    schema_version INTEGER NOT NULL,
    version        INTEGER NOT NULL CHECK (version > 0),
    event_id       TEXT    NOT NULL,
    data           BLOB    NOT NULL
) STRICT`)

// erasureTypes are the event types that erase earlier events of their
// stream (events.Erasure): a snapshot covering only versions before one of
// them may hold what it erased.
var erasureTypes = []any{events.TypeLaneErased, events.TypeTranscriptErased, events.TypeErasureCompleted}

// ReadSnapshot implements events.SnapshotStore.
func (s *Store) ReadSnapshot(ctx context.Context, stream string) (events.Snapshot, error) {
	if s.closed() {
		return events.Snapshot{}, fmt.Errorf("read snapshot %s: %w", stream, ErrClosed)
	}
	stmt, err := s.snapshotRead.get(s.readers, "SELECT schema_version, version, event_id, data FROM snapshots WHERE stream = ?")
	if err != nil {
		return events.Snapshot{}, fmt.Errorf("read snapshot %s: %w", stream, err)
	}
	snap := events.Snapshot{Stream: stream}
	var version int64
	err = stmt.QueryRowContext(ctx, stream).Scan(&snap.Schema, &version, &snap.EventID, &snap.Data)
	if errors.Is(err, sql.ErrNoRows) {
		return events.Snapshot{}, fmt.Errorf("read snapshot %s: %w", stream, events.ErrSnapshotNotFound)
	}
	if err != nil {
		return events.Snapshot{}, fmt.Errorf("read snapshot %s: %w", stream, err)
	}
	snap.Version = uint64(version)
	return snap, nil
}

// WriteSnapshot implements events.SnapshotStore. It runs on the writer's
// connection between group commits, in a transaction of its own that
// checks the log: the event at the snapshot's version must be the one it
// names, and no erasure of the stream may follow it (an erasure committed
// while the snapshot was being folded would otherwise come back through it).
func (s *Store) WriteSnapshot(ctx context.Context, snap events.Snapshot) error {
	if snap.Stream == "" || snap.Version == 0 || snap.EventID == "" || snap.Version > maxVersion {
		return fmt.Errorf("write snapshot %q at version %d: %w", snap.Stream, snap.Version, events.ErrInvalidAppend)
	}
	if len(snap.Data) > MaxSnapshotSize {
		return fmt.Errorf("write snapshot %s: %d bytes, more than %d: %w", snap.Stream, len(snap.Data), MaxSnapshotSize, events.ErrInvalidAppend)
	}
	return s.onWriter(ctx, "write snapshot "+snap.Stream, func(w *writer) error { return w.writeSnapshot(ctx, snap) })
}

// DeleteSnapshot implements events.SnapshotStore.
func (s *Store) DeleteSnapshot(ctx context.Context, stream string) error {
	return s.onWriter(ctx, "delete snapshot "+stream, func(w *writer) error {
		_, err := w.conn.ExecContext(ctx, "DELETE FROM snapshots WHERE stream = ?", stream)
		return err
	})
}

// onWriter runs f on the writer's goroutine between batches.
func (s *Store) onWriter(ctx context.Context, what string, f func(w *writer) error) error {
	if s.w == nil {
		return fmt.Errorf("%s: %w", what, ErrReadOnly)
	}
	if err := s.damage.refusal(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	o := op{reply: make(chan error, 1), run: f}
	select {
	case s.w.ops <- o:
	case <-s.closing:
		return fmt.Errorf("%s: %w", what, ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	if err := <-o.reply; err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// maxVersion is the largest version SQLite's INTEGER holds.
const maxVersion = 1<<63 - 1

func (w *writer) writeSnapshot(ctx context.Context, snap events.Snapshot) (err error) {
	// IMMEDIATE: the checks and the write see the same log, and another
	// process's append waits for them rather than slipping in between.
	if _, err := w.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, rerr := w.conn.ExecContext(context.Background(), "ROLLBACK")
			err = errors.Join(err, rerr)
		}
	}()
	var id string
	err = w.conn.QueryRowContext(ctx, "SELECT event_id FROM events WHERE stream = ? AND version = ?", snap.Stream, int64(snap.Version)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && id != snap.EventID) {
		return fmt.Errorf("%w: no event %s at version %d", events.ErrSnapshotStale, snap.EventID, snap.Version)
	}
	if err != nil {
		return err
	}
	var erased bool
	args := append([]any{snap.Stream, int64(snap.Version)}, erasureTypes...)
	err = w.conn.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM events WHERE stream = ? AND version > ? AND type IN (?, ?, ?))", args...).Scan(&erased)
	if err != nil {
		return err
	}
	if erased {
		return fmt.Errorf("%w: an erasure follows version %d", events.ErrSnapshotStale, snap.Version)
	}
	// A snapshot of an older version of the same schema never replaces a
	// newer one (two loads racing); one of another schema always does.
	_, err = w.conn.ExecContext(ctx, `INSERT INTO snapshots (stream, schema_version, version, event_id, data) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (stream) DO UPDATE SET schema_version = excluded.schema_version, version = excluded.version,
			event_id = excluded.event_id, data = excluded.data
		WHERE excluded.version >= snapshots.version OR excluded.schema_version <> snapshots.schema_version`,
		snap.Stream, snap.Schema, int64(snap.Version), snap.EventID, snap.Data)
	if err != nil {
		return err
	}
	_, err = w.conn.ExecContext(ctx, "COMMIT")
	return err
}

// lazyStatement is a statement prepared on its first use: a cold lane load
// looks its snapshot up once, and parsing the query each time would cost
// more than the lookup.
type lazyStatement struct {
	mu   sync.Mutex
	stmt *sql.Stmt
}

func (l *lazyStatement) get(db *sql.DB, query string) (*sql.Stmt, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stmt == nil {
		stmt, err := db.Prepare(query)
		if err != nil {
			return nil, fmt.Errorf("prepare %q: %w", query, err)
		}
		l.stmt = stmt
	}
	return l.stmt, nil
}

func (l *lazyStatement) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stmt == nil {
		return nil
	}
	return l.stmt.Close()
}
