package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"hermes/events"
)

const columns = "position, stream, version, event_id, type, data, metadata, recorded_at"

// boundLimit is a LIMIT parameter the planner does not read (see
// readStatements).
const boundLimit = "CAST(? AS INTEGER)"

// readStatements are prepared once on the reader pool; database/sql
// re-prepares them on each pooled connection as needed.
//
// Their LIMIT is `CAST(? AS INTEGER)`, not a bare `?`: SQLite looks at the
// value bound to a bare LIMIT parameter when it plans the statement, so
// binding a new value expires the statement and every execution compiled
// it again (sqlite3Reprepare under sqlite3_step, 6–8% of the server's CPU
// on the append path). The cast hides the value from the planner; the
// plans do not depend on it.
type readStatements struct {
	forwards      *sql.Stmt
	backwards     *sql.Stmt
	backwardsLast *sql.Stmt
	exists        *sql.Stmt
	all           *sql.Stmt
	head          *sql.Stmt
}

func (r *readStatements) prepare(db *sql.DB) error {
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&r.forwards, "SELECT " + columns + " FROM events WHERE stream = ? AND version >= ? ORDER BY version LIMIT " + boundLimit},
		{&r.backwards, "SELECT " + columns + " FROM events WHERE stream = ? AND version <= ? ORDER BY version DESC LIMIT " + boundLimit},
		{&r.backwardsLast, "SELECT " + columns + " FROM events WHERE stream = ? ORDER BY version DESC LIMIT " + boundLimit},
		{&r.exists, "SELECT EXISTS (SELECT 1 FROM events WHERE stream = ?)"},
		{&r.all, "SELECT " + columns + " FROM events WHERE position > ? ORDER BY position LIMIT " + boundLimit},
		{&r.head, "SELECT coalesce(max(position), 0) FROM events"},
	} {
		stmt, err := db.Prepare(p.sql)
		if err != nil {
			return errors.Join(fmt.Errorf("prepare %q: %w", p.sql, err), r.close())
		}
		*p.stmt = stmt
	}
	return nil
}

func (r *readStatements) close() error {
	var errs []error
	for _, s := range []*sql.Stmt{r.forwards, r.backwards, r.backwardsLast, r.exists, r.all, r.head} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

// ReadStream returns up to count events of stream from version from
// (inclusive) in the given direction; backwards from 0 starts at the last
// event. A count of zero or less reads nothing. It fails with
// events.ErrStreamNotFound when the stream has no events.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, count int, dir events.Direction) ([]events.Envelope, error) {
	envs, err := s.readStreamOf(ctx, stream, from, count, dir)
	s.damage.note(err)
	return envs, err
}

func (s *Store) readStreamOf(ctx context.Context, stream string, from uint64, count int, dir events.Direction) ([]events.Envelope, error) {
	if s.closed() {
		return nil, fmt.Errorf("read stream %s: %w", stream, ErrClosed)
	}
	if count <= 0 {
		return nil, nil
	}
	if dir == events.Forwards && from > 1 {
		// A reader catching up (a cached lane checking for newer events)
		// usually finds nothing new: reading from the version before from
		// tells in the same query that the stream exists, where an empty
		// answer would need a second query.
		envs, found, err := s.readAfter(ctx, stream, from, count)
		if err != nil || found {
			return envs, err
		}
	}
	envs, err := s.readStream(ctx, stream, from, count, dir)
	if err != nil || len(envs) > 0 {
		return envs, err
	}
	var exists bool
	if err := s.reads.exists.QueryRowContext(ctx, stream).Scan(&exists); err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	if !exists {
		return nil, fmt.Errorf("read stream %s: %w", stream, events.ErrStreamNotFound)
	}
	// Either the range is past the end, or the stream was created between
	// the two queries. Streams only grow, so one more read answers from a
	// single snapshot in which the stream exists.
	return s.readStream(ctx, stream, from, count, dir)
}

func (s *Store) readStream(ctx context.Context, stream string, from uint64, count int, dir events.Direction) ([]events.Envelope, error) {
	var rows *sql.Rows
	var err error
	switch {
	case dir == events.Backwards && from == 0:
		rows, err = s.reads.backwardsLast.QueryContext(ctx, stream, count)
	case dir == events.Backwards:
		rows, err = s.reads.backwards.QueryContext(ctx, stream, int64(from), count)
	default:
		rows, err = s.reads.forwards.QueryContext(ctx, stream, int64(from), count)
	}
	if err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	envs, err := scan(rows, count)
	if err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	return envs, nil
}

// readAfter reads up to count events of stream from version from (> 1),
// with the event at from-1 as proof that the stream exists: found is false
// when that event is missing (no stream, or one shorter than from-1), and
// the caller reads the usual way.
func (s *Store) readAfter(ctx context.Context, stream string, from uint64, count int) ([]events.Envelope, bool, error) {
	limit := count
	if limit < math.MaxInt {
		limit++
	}
	rows, err := s.reads.forwards.QueryContext(ctx, stream, int64(from-1), limit)
	if err != nil {
		return nil, false, fmt.Errorf("read stream %s: %w", stream, err)
	}
	envs, found, err := scanAfter(rows, limit, from-1)
	if err != nil {
		return nil, false, fmt.Errorf("read stream %s: %w", stream, err)
	}
	return envs, found, nil
}

// ReadAll returns up to count events with a position greater than after, in
// position order. A count of zero or less reads nothing.
func (s *Store) ReadAll(ctx context.Context, after uint64, count int) ([]events.Envelope, error) {
	if s.closed() {
		return nil, fmt.Errorf("read all: %w", ErrClosed)
	}
	envs, err := s.readAll(ctx, after, count)
	if err != nil {
		s.damage.note(err)
		return nil, fmt.Errorf("read all after %d: %w", after, err)
	}
	return envs, nil
}

func (s *Store) readAll(ctx context.Context, after uint64, count int) ([]events.Envelope, error) {
	if count <= 0 {
		return nil, nil
	}
	rows, err := s.reads.all.QueryContext(ctx, int64(after), count)
	if err != nil {
		return nil, err
	}
	return scan(rows, count)
}

// Head returns the position of the last committed event, 0 when the store
// is empty.
func (s *Store) Head(ctx context.Context) (uint64, error) {
	if s.closed() {
		return 0, fmt.Errorf("head: %w", ErrClosed)
	}
	var head int64
	if err := s.reads.head.QueryRowContext(ctx).Scan(&head); err != nil {
		s.damage.note(err)
		return 0, fmt.Errorf("head: %w", err)
	}
	return uint64(head), nil
}

// scan reads and closes rows. It reads the whole result before decoding so
// that the read transaction ends as early as possible.
func scan(rows *sql.Rows, limit int) ([]events.Envelope, error) {
	envs, _, err := scanAfter(rows, limit, 0)
	return envs, err
}

// scanAfter is scan, leaving out (undecoded) a first row at version skip
// (when skip > 0) and saying whether there was one.
func scanAfter(rows *sql.Rows, limit int, skip uint64) ([]events.Envelope, bool, error) {
	defer rows.Close()
	var raw []eventRow
	if limit <= 64 {
		raw = make([]eventRow, 0, limit)
	}
	for rows.Next() {
		var st eventRow
		if err := rows.Scan(&st.position, &st.stream, &st.version, &st.id, &st.typ, &st.data, &st.meta, &st.recordedAt); err != nil {
			return nil, false, err
		}
		raw = append(raw, st)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	if err := rows.Close(); err != nil {
		return nil, false, err
	}
	found := skip > 0 && len(raw) > 0 && uint64(raw[0].version) == skip
	if found {
		raw = raw[1:]
	}
	envs, err := decodeRows(raw)
	if err != nil {
		return nil, false, err
	}
	return envs, found, nil
}

// eventRow is an event row as the events table holds it.
type eventRow struct {
	position, version, recordedAt int64
	stream, id, typ               string
	data, meta                    []byte
}

// decodeRows decodes rows read from the file or taken from the committed
// tail: the same code for both, so a subscriber cannot tell them apart.
func decodeRows(rows []eventRow) ([]events.Envelope, error) {
	envs := make([]events.Envelope, len(rows))
	for i, st := range rows {
		e, err := events.Decode(st.typ, st.data)
		if err != nil {
			if errors.Is(err, events.ErrUnknownType) && utf8.ValidString(st.typ) {
				// A type a newer build wrote: not damage.
				return nil, fmt.Errorf("position %d: %w", st.position, err)
			}
			return nil, fmt.Errorf("%w: position %d: %w", ErrDamaged, st.position, err)
		}
		md, err := events.DecodeMetadata(st.meta)
		if err != nil {
			return nil, fmt.Errorf("%w: position %d: decode metadata: %w", ErrDamaged, st.position, err)
		}
		envs[i] = events.Envelope{
			Stream:     st.stream,
			Version:    uint64(st.version),
			Position:   uint64(st.position),
			ID:         st.id,
			Type:       st.typ,
			RecordedAt: time.Unix(0, st.recordedAt).UTC(),
			Metadata:   md,
			Event:      e,
		}
	}
	return envs, nil
}
