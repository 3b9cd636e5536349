package transcripts

import (
	"context"
	"fmt"
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
