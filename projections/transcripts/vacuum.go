package transcripts

import (
	"context"
	"fmt"

	"hermes/projections/storage"
)

// Vacuum compacts state.db after an automatic prune deleted sessions:
// the WAL is checkpointed and truncated first, so the file really shrinks.
func (p *Projection) Vacuum(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("vacuum: %w", ErrClosed)
	}
	if _, err := p.conn.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return fmt.Errorf("vacuum: wal checkpoint: %w", err)
	}
	if _, err := p.conn.ExecContext(ctx, "VACUUM"); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}

// Purge removes erased rows from every file of state.db: deleted rows are
// already zeroed in their pages (secure_delete, FTS5 secure-delete); Purge
// checkpoints the WAL into the file and truncates it, so no older page
// image survives there either. It waits while a reader holds an older
// snapshot.
func (p *Projection) Purge(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("purge transcripts: %w", ErrClosed)
	}
	if err := storage.CheckpointTruncate(ctx, p.conn); err != nil {
		return fmt.Errorf("purge transcripts %s: %w", p.path, err)
	}
	return nil
}
