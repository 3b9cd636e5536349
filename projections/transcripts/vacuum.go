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
// already zeroed in their cells (secure_delete, FTS5 secure-delete). When
// an erasure was applied since the last scrub (or this is the process's
// first purge), Purge zeroes the free space of every page
// (storage.ScrubFreeSpace): a b-tree rebalance leaves old copies of moved
// cells there, which secure_delete never sees (sessions rows grow with
// their title, prompt and tokens; FTS5 index blocks are rewritten:
// TestPurge_LeavesNoCopyInFreeSpace). The pages are read on a reader
// connection, batches going on meanwhile; only the rewrite of the pages
// found holds the writer. Then it checkpoints the WAL into the file and
// truncates it, so no older page image survives there either. It waits
// while a reader holds an older snapshot.
func (p *Projection) Purge(ctx context.Context) error {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return fmt.Errorf("purge transcripts: %w", ErrClosed)
	}
	var dirty []int64
	erased, unknown := p.erasedSinceScrub.Swap(false), p.notScrubbedSinceOpen.Load()
	if erased || unknown {
		var err error
		if _, dirty, err = storage.FindDirtyPages(ctx, p.Reader.db); err != nil {
			if erased {
				p.erasedSinceScrub.Store(true)
			}
			return fmt.Errorf("purge transcripts %s: %w", p.path, err)
		}
	}
	if err := p.zeroAndCheckpoint(ctx, dirty); err != nil {
		if erased {
			p.erasedSinceScrub.Store(true)
		}
		return fmt.Errorf("purge transcripts %s: %w", p.path, err)
	}
	if unknown {
		p.notScrubbedSinceOpen.Store(false)
	}
	return nil
}

// MarkPurged tells the projection that the clean stop of the last process
// that wrote the file purged it (cmd's purged_at_stop): the first purge of
// this process scrubs the free space only if an erasure was applied in
// between.
func (p *Projection) MarkPurged() { p.notScrubbedSinceOpen.Store(false) }

func (p *Projection) zeroAndCheckpoint(ctx context.Context, dirty []int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if _, err := storage.ZeroFreeSpace(ctx, p.conn, dirty); err != nil {
		return err
	}
	return storage.CheckpointTruncate(ctx, p.conn)
}
