package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// checkpointAttempts bounds the retries of CheckpointTruncate while a reader
// (of this or another process) holds an older snapshot: 50 × 20 ms.
const checkpointAttempts = 50

// RowQueryer is what CheckpointTruncate needs of a connection or pool.
type RowQueryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// CheckpointTruncate checkpoints the WAL of the database q is on and
// truncates it to zero bytes, so no page image of an overwritten row
// stays in the -wal file (erasure, docs/ERASURE.md). It retries while a
// reader keeps an older snapshot.
func CheckpointTruncate(ctx context.Context, q RowQueryer) error {
	for attempt := 1; ; attempt++ {
		var busy, frames, done int64
		err := q.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done)
		if err == nil && busy == 0 {
			return nil
		}
		if attempt == checkpointAttempts {
			if err == nil {
				err = errors.New("readers kept an older snapshot")
			}
			return fmt.Errorf("wal checkpoint: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wal checkpoint: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
