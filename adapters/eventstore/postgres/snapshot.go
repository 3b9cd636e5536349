package postgres

import (
	"context"
	"errors"
	"fmt"

	"hermes/events"

	"github.com/jackc/pgx/v5"
)

// erasureTypes are the event types that erase earlier events of their
// stream (events.Erasure): a snapshot covering only versions before one of
// them may hold what it erased.
var erasureTypes = []string{events.TypeLaneErased, events.TypeTranscriptErased, events.TypeErasureCompleted}

// maxVersion is the largest version a bigint holds.
const maxVersion = 1<<63 - 1

// ReadSnapshot implements events.SnapshotStore.
func (s *Store) ReadSnapshot(ctx context.Context, stream string) (events.Snapshot, error) {
	if s.closed() {
		return events.Snapshot{}, fmt.Errorf("read snapshot %s: %w", stream, ErrClosed)
	}
	snap := events.Snapshot{Stream: stream}
	var version int64
	err := s.readers.QueryRow(ctx, s.sql.snapshotRead, stream).Scan(&snap.Schema, &version, &snap.EventID, &snap.Data)
	if errors.Is(err, pgx.ErrNoRows) {
		return events.Snapshot{}, fmt.Errorf("read snapshot %s: %w", stream, events.ErrSnapshotNotFound)
	}
	if err != nil {
		return events.Snapshot{}, fmt.Errorf("read snapshot %s: %w", stream, err)
	}
	snap.Version = uint64(version)
	return snap, nil
}

// WriteSnapshot implements events.SnapshotStore. Its transaction takes the
// order lock shared: it waits for the append in flight, and an append
// waits for it, so the check that no erasure follows the snapshot's
// version and the write see the same log (an erasure committed while the
// snapshot was folded is seen, one committed after deletes it).
func (s *Store) WriteSnapshot(ctx context.Context, snap events.Snapshot) error {
	if snap.Stream == "" || snap.Version == 0 || snap.EventID == "" || snap.Version > maxVersion {
		return fmt.Errorf("write snapshot %q at version %d: %w", snap.Stream, snap.Version, events.ErrInvalidAppend)
	}
	if len(snap.Data) > MaxSnapshotSize {
		return fmt.Errorf("write snapshot %s: %d bytes, more than %d: %w", snap.Stream, len(snap.Data), MaxSnapshotSize, events.ErrInvalidAppend)
	}
	if msg := badText(snap.Stream, maxStreamNameSize) + badText(snap.EventID, maxEventIDSize); msg != "" {
		return fmt.Errorf("write snapshot %q: %s: %w", snap.Stream, msg, events.ErrInvalidAppend)
	}
	if err := s.writable(); err != nil {
		return fmt.Errorf("write snapshot %s: %w", snap.Stream, err)
	}
	err := pgx.BeginFunc(ctx, s.readers, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql.lockShared, s.keys.order); err != nil {
			return err
		}
		var id string
		err := tx.QueryRow(ctx, s.sql.snapshotEventID, snap.Stream, int64(snap.Version)).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && id != snap.EventID) {
			return fmt.Errorf("%w: no event %s at version %d", events.ErrSnapshotStale, snap.EventID, snap.Version)
		}
		if err != nil {
			return err
		}
		var erased bool
		if err := tx.QueryRow(ctx, s.sql.snapshotErased, snap.Stream, int64(snap.Version), erasureTypes).Scan(&erased); err != nil {
			return err
		}
		if erased {
			return fmt.Errorf("%w: an erasure follows version %d", events.ErrSnapshotStale, snap.Version)
		}
		_, err = tx.Exec(ctx, s.sql.snapshotWrite, snap.Stream, snap.Schema, int64(snap.Version), snap.EventID, snap.Data)
		return err
	})
	if err != nil {
		return fmt.Errorf("write snapshot %s: %w", snap.Stream, classify(err))
	}
	return nil
}

// DeleteSnapshot implements events.SnapshotStore. The deleted bytes leave
// the table's files at the next purge that follows an erasure; a snapshot
// deleted by an erasure always does.
func (s *Store) DeleteSnapshot(ctx context.Context, stream string) error {
	if err := s.writable(); err != nil {
		return fmt.Errorf("delete snapshot %s: %w", stream, err)
	}
	if _, err := s.readers.Exec(ctx, s.sql.snapshotDelete, stream); err != nil {
		return fmt.Errorf("delete snapshot %s: %w", stream, err)
	}
	return nil
}
