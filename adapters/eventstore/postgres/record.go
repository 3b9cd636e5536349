package postgres

import (
	"context"
	"fmt"
	"time"

	"hermes/events"

	"github.com/jackc/pgx/v5"
)

var _ events.RecordStore = (*Store)(nil)

// recordColumns are the columns WriteRecords gives (position is drawn).
var recordColumns = []string{"stream", "version", "event_id", "type", "data", "metadata", "recorded_at"}

// ReadRecords implements events.RecordStore: the rows as the table holds
// them, undecoded, read as ReadAll reads (a prefix that can no longer
// change).
func (s *Store) ReadRecords(ctx context.Context, after uint64, count int) ([]events.Record, error) {
	if s.closed() {
		return nil, fmt.Errorf("read records: %w", ErrClosed)
	}
	if count <= 0 {
		return nil, nil
	}
	out, err := retryRead(ctx, func() ([]events.Record, error) {
		rows, err := s.readers.Query(ctx, s.sql.readAll, int64(after), count)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []events.Record
		for rows.Next() {
			var r events.Record
			var position, version, recordedAt int64
			var data, meta string
			if err := rows.Scan(&position, &r.Stream, &version, &r.ID, &r.Type, &data, &meta, &recordedAt); err != nil {
				return nil, err
			}
			r.Position, r.Version, r.RecordedAt = uint64(position), uint64(version), time.Unix(0, recordedAt).UTC()
			r.Data, r.Metadata = []byte(data), []byte(meta)
			out = append(out, r)
		}
		return out, rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read records after %d: %w", after, err)
	}
	return out, nil
}

// WriteRecords implements events.RecordStore: one transaction that takes
// the order lock (so its positions follow the rule of doc.go), reads the
// versions of the records' streams, checks each record against them,
// inserts the rows in the order given, applies the erasures among them as
// an append does (the earlier events rewritten, the snapshot deleted, the
// erasure left for Purge) and notifies the store's channel.
func (s *Store) WriteRecords(ctx context.Context, records []events.Record) error {
	if len(records) == 0 {
		return nil
	}
	if err := s.writable(); err != nil {
		return fmt.Errorf("write records: %w", err)
	}
	var streams []string
	seen := map[string]bool{}
	cols := struct {
		stream, id, typ, data, meta []string
		version, at                 []int64
	}{}
	for _, r := range records {
		msg := badText(r.Stream, maxStreamNameSize) + badText(r.ID, maxEventIDSize) + badText(r.Type, maxEventIDSize) +
			badText(string(r.Data), MaxEventSize) + badText(string(r.Metadata), MaxEventSize)
		if msg != "" || r.Version == 0 || r.Version > maxVersion {
			return fmt.Errorf("write record %q@%d: %s: %w", r.Stream, r.Version, msg, events.ErrInvalidAppend)
		}
		if !seen[r.Stream] {
			seen[r.Stream] = true
			streams = append(streams, r.Stream)
		}
		cols.stream, cols.id, cols.typ = append(cols.stream, r.Stream), append(cols.id, r.ID), append(cols.typ, r.Type)
		cols.data, cols.meta = append(cols.data, string(r.Data)), append(cols.meta, string(r.Metadata))
		cols.version, cols.at = append(cols.version, int64(r.Version)), append(cols.at, r.RecordedAt.UnixNano())
	}
	err := pgx.BeginFunc(ctx, s.readers, func(tx pgx.Tx) error {
		if !s.cfg.noOrderLock {
			if _, err := tx.Exec(ctx, s.sql.lock, s.keys.order); err != nil {
				return fmt.Errorf("take the order lock: %w", err)
			}
		}
		current := make(map[string]uint64, len(streams))
		rows, err := tx.Query(ctx, s.sql.streamVersions, streams)
		if err != nil {
			return fmt.Errorf("read stream versions: %w", err)
		}
		for rows.Next() {
			var stream string
			var v int64
			if err := rows.Scan(&stream, &v); err != nil {
				rows.Close()
				return fmt.Errorf("read stream versions: %w", err)
			}
			current[stream] = uint64(v)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read stream versions: %w", err)
		}
		for _, r := range records {
			if v := current[r.Stream]; r.Version != v+1 {
				return fmt.Errorf("record %s@%d: %w", r.Stream, r.Version,
					&events.WrongVersionError{Stream: r.Stream, Expected: events.ExactVersion(r.Version - 1), Actual: v})
			}
			current[r.Stream] = r.Version
		}
		// COPY inserts the rows in the order given, and the identity
		// column numbers them so; it is the fastest way in for a batch.
		copyRows := make([][]any, len(records))
		for i := range records {
			copyRows[i] = []any{cols.stream[i], cols.version[i], cols.id[i], cols.typ[i], cols.data[i], cols.meta[i], cols.at[i]}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{s.schema, "events"}, recordColumns, pgx.CopyFromRows(copyRows)); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		if err := s.eraseRecords(ctx, tx, records); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.sql.notify, s.channel)
		return err
	})
	if err != nil {
		return fmt.Errorf("write records: %w", classify(err))
	}
	s.commits.notify()
	return nil
}

// eraseRecords applies the erasures among records, inside tx, after their
// rows are inserted.
func (s *Store) eraseRecords(ctx context.Context, tx pgx.Tx, records []events.Record) error {
	for _, r := range records {
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
		n, err := eraseBefore(ctx, tx, &s.sql, r.Stream, r.Version, row{id: r.ID, erasure: x})
		if err != nil {
			return fmt.Errorf("erase %s before version %d: %w", r.Stream, r.Version, err)
		}
		tag, err := tx.Exec(ctx, s.sql.eraseSnapshot, r.Stream)
		if err != nil {
			return fmt.Errorf("erase %s: delete its snapshot: %w", r.Stream, err)
		}
		if n == 0 && tag.RowsAffected() == 0 {
			// A copy's records come erased already: no old row version
			// holds what this erasure names.
			continue
		}
		var position int64
		if err := tx.QueryRow(ctx, s.sql.positionOf, r.ID).Scan(&position); err != nil {
			return fmt.Errorf("erase %s: %w", r.Stream, err)
		}
		if _, err := tx.Exec(ctx, s.sql.markUnpurged, position); err != nil {
			return fmt.Errorf("erase %s: %w", r.Stream, err)
		}
	}
	return nil
}
