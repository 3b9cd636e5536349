package sqlite

import (
	"context"
	"fmt"
	"time"

	"hermes/events"
	"hermes/projections/storage"
)

var _ events.RecordStore = (*Store)(nil)

// ReadRecords implements events.RecordStore: the rows as the file holds
// them, undecoded.
func (s *Store) ReadRecords(ctx context.Context, after uint64, count int) ([]events.Record, error) {
	if s.closed() {
		return nil, fmt.Errorf("read records: %w", ErrClosed)
	}
	if count <= 0 {
		return nil, nil
	}
	rows, err := s.reads.all.QueryContext(ctx, int64(after), count)
	if err != nil {
		s.damage.note(err)
		return nil, fmt.Errorf("read records after %d: %w", after, err)
	}
	defer rows.Close()
	var out []events.Record
	for rows.Next() {
		var r events.Record
		var position, version, recordedAt int64
		if err := rows.Scan(&position, &r.Stream, &version, &r.ID, &r.Type, &r.Data, &r.Metadata, &recordedAt); err != nil {
			s.damage.note(err)
			return nil, fmt.Errorf("read records after %d: %w", after, err)
		}
		r.Position, r.Version, r.RecordedAt = uint64(position), uint64(version), time.Unix(0, recordedAt).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		s.damage.note(err)
		return nil, fmt.Errorf("read records after %d: %w", after, err)
	}
	return out, nil
}

// WriteRecords implements events.RecordStore: one transaction on the
// writer's connection, between its batches. Each record's stream version
// is read (once per stream) and checked; the erasures among the records
// rewrite the earlier events of their stream as an append of them does,
// and delete the stream's snapshot.
func (s *Store) WriteRecords(ctx context.Context, records []events.Record) error {
	if len(records) == 0 {
		return nil
	}
	return s.onWriter(ctx, "write records", func(w *writer) error {
		if err := w.writeRecords(ctx, records); err != nil {
			w.damage.note(err)
			return storage.Classify(err)
		}
		return nil
	})
}

func (w *writer) writeRecords(ctx context.Context, records []events.Record) (err error) {
	if err := w.beginTx(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			w.rollbackTx()
		}
	}()
	// The cache follows the writer's own appends; these bypass it.
	clear(w.versions)
	insert, err := w.conn.PrepareContext(ctx, "INSERT INTO events (stream, version, event_id, type, data, metadata, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
	if err != nil {
		return fmt.Errorf("prepare insert: %w", err)
	}
	defer insert.Close()
	current := map[string]uint64{}
	erased := false
	for _, r := range records {
		v, ok := current[r.Stream]
		if !ok {
			var last int64
			if err := w.stmtStreamVersion.QueryRowContext(ctx, r.Stream).Scan(&last); err != nil {
				return fmt.Errorf("read version of %s: %w", r.Stream, err)
			}
			v = uint64(last)
		}
		if r.Version != v+1 || r.Version > maxVersion {
			return fmt.Errorf("record %s@%d: %w", r.Stream, r.Version,
				&events.WrongVersionError{Stream: r.Stream, Expected: events.ExactVersion(r.Version - 1), Actual: v})
		}
		current[r.Stream] = r.Version
		if _, err := insert.ExecContext(ctx, r.Stream, int64(r.Version), r.ID, r.Type, string(r.Data), string(r.Metadata), r.RecordedAt.UnixNano()); err != nil {
			return fmt.Errorf("record %s@%d: %w", r.Stream, r.Version, err)
		}
		if !events.IsErasureType(r.Type) {
			continue
		}
		e, err := events.Decode(r.Type, r.Data)
		if err != nil {
			return fmt.Errorf("record %s@%d: %w", r.Stream, r.Version, err)
		}
		x, ok := e.(events.Erasure)
		if !ok {
			continue
		}
		erased = true
		w.erasedSinceScrub.Store(true)
		if err := w.eraseBefore(r.Stream, r.Version, row{id: r.ID, erasure: x}); err != nil {
			return fmt.Errorf("erase %s before version %d: %w", r.Stream, r.Version, err)
		}
		if _, err := w.conn.ExecContext(ctx, "DELETE FROM snapshots WHERE stream = ?", r.Stream); err != nil {
			return fmt.Errorf("erase %s: delete its snapshot: %w", r.Stream, err)
		}
	}
	if err := w.commitTx(); err != nil {
		return err
	}
	if erased {
		// The tail may hold rows the erasures rewrote.
		w.tail.clear()
	}
	w.onCommit()
	return nil
}
