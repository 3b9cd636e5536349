package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"hermes/events"

	"github.com/jackc/pgx/v5"
)

// ReadStream returns up to count events of stream from version from
// (inclusive) in the given direction; backwards from 0 starts at the last
// event. A count of zero or less reads nothing. It fails with
// events.ErrStreamNotFound when the stream has no events.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, count int, dir events.Direction) ([]events.Envelope, error) {
	if s.closed() {
		return nil, fmt.Errorf("read stream %s: %w", stream, ErrClosed)
	}
	if count <= 0 {
		return nil, nil
	}
	envs, err := s.readStream(ctx, stream, from, count, dir)
	if err != nil || len(envs) > 0 {
		return envs, err
	}
	var exists bool
	if err := s.readers.QueryRow(ctx, s.sql.streamExists, stream).Scan(&exists); err != nil {
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
	var rows pgx.Rows
	var err error
	switch {
	case dir == events.Backwards && from == 0:
		rows, err = s.readers.Query(ctx, s.sql.readLast, stream, count)
	case dir == events.Backwards:
		rows, err = s.readers.Query(ctx, s.sql.readBackwards, stream, clampInt64(from), count)
	default:
		rows, err = s.readers.Query(ctx, s.sql.readForwards, stream, clampInt64(from), count)
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

// ReadAll returns up to count events with a position greater than after, in
// position order. A count of zero or less reads nothing. What it returns is
// a prefix of the log that can no longer change: no event at a position
// below its last can commit later (doc.go).
func (s *Store) ReadAll(ctx context.Context, after uint64, count int) ([]events.Envelope, error) {
	if s.closed() {
		return nil, fmt.Errorf("read all: %w", ErrClosed)
	}
	envs, err := s.readAll(ctx, after, count)
	if err != nil {
		return nil, fmt.Errorf("read all after %d: %w", after, err)
	}
	return envs, nil
}

func (s *Store) readAll(ctx context.Context, after uint64, count int) ([]events.Envelope, error) {
	if count <= 0 {
		return nil, nil
	}
	rows, err := s.readers.Query(ctx, s.sql.readAll, clampInt64(after), count)
	if err != nil {
		return nil, err
	}
	return scan(rows, count)
}

// Head returns the position of the last committed event, 0 when the store
// is empty. Every event at a lower position that will ever commit has.
func (s *Store) Head(ctx context.Context) (uint64, error) {
	if s.closed() {
		return 0, fmt.Errorf("head: %w", ErrClosed)
	}
	var head int64
	if err := s.readers.QueryRow(ctx, s.sql.head).Scan(&head); err != nil {
		return 0, fmt.Errorf("head: %w", err)
	}
	return uint64(head), nil
}

func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// eventRow is an event row as the events table holds it.
type eventRow struct {
	position, version, recordedAt int64
	stream, id, typ               string
	data, meta                    []byte
}

// scan reads and closes rows: the whole result before decoding, so that
// the connection goes back to the pool as early as possible.
func scan(rows pgx.Rows, limit int) ([]events.Envelope, error) {
	defer rows.Close()
	var raw []eventRow
	if limit <= 256 {
		raw = make([]eventRow, 0, limit)
	}
	for rows.Next() {
		var st eventRow
		if err := rows.Scan(&st.position, &st.stream, &st.version, &st.id, &st.typ, &st.data, &st.meta, &st.recordedAt); err != nil {
			return nil, err
		}
		raw = append(raw, st)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	return decodeRows(raw)
}

func decodeRows(rows []eventRow) ([]events.Envelope, error) {
	envs := make([]events.Envelope, len(rows))
	for i, st := range rows {
		e, err := events.Decode(st.typ, st.data)
		if err != nil {
			return nil, fmt.Errorf("position %d: %w", st.position, err)
		}
		md, err := events.DecodeMetadata(st.meta)
		if err != nil {
			return nil, fmt.Errorf("position %d: decode metadata: %w", st.position, err)
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
