package sessions

import (
	"context"
	"fmt"
	"strconv"

	"hermes/events"
	"hermes/projections/storage"
)

// A bulk load (a catch-up from position 0: a rebuild, a new projection
// version) folds the events into lane rows held in memory across batches
// and writes the rows that changed once per bulkCommitEvents events, with
// the checkpoint, in one transaction: a lane touched by thousands of events
// is read once and written once per commit instead of once per batch.
// Between commits the file is as of the last commit, its checkpoint
// included, so an interrupted load (a crash, an error) resumes from there
// with the ordinary path: nothing in the file needs finishing.

// bulkCommitEvents is how many events a bulk load folds per transaction.
// A variable for tests.
var bulkCommitEvents = 256 * 1024

// bulkMaxLanes bounds the lane rows a bulk load keeps in memory: past it,
// the rows are dropped after a commit and read again when next needed.
const bulkMaxLanes = 100_000

// bulkLoad is the state of a bulk load.
type bulkLoad struct {
	on bool
	// st holds every row read or changed since BeginBulk (nil after an
	// error: the rows are read again from the file); pending counts the
	// events folded since the last commit, committed its checkpoint.
	st        *batchState
	pending   int
	committed uint64
}

// BeginBulk starts a bulk load; the runner calls it before it catches up
// from position 0.
func (p *Projection) BeginBulk(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.appliedKnown {
		cp, err := p.Checkpoint(ctx)
		if err != nil {
			return fmt.Errorf("begin bulk load: %w", err)
		}
		p.applied, p.appliedKnown = cp, true
	}
	p.bulk = bulkLoad{on: true, committed: p.applied}
	return nil
}

// EndBulk writes what the bulk load holds and leaves bulk mode. After an
// error of Apply it writes nothing (the file stays at its last commit).
func (p *Projection) EndBulk(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.bulk.on {
		return nil
	}
	err := p.commitBulk(ctx)
	p.bulk = bulkLoad{}
	if err != nil {
		return fmt.Errorf("end bulk load: %w", err)
	}
	return nil
}

// applyBulk is Apply in a bulk load, with p.mu held.
func (p *Projection) applyBulk(ctx context.Context, batch []events.Envelope) (err error) {
	if p.bulk.st == nil {
		p.bulk.st = newBatchState()
	}
	defer func() {
		if err != nil {
			// The held rows may carry part of the batch: drop them, and
			// the events since the last commit with them.
			p.bulk.st, p.bulk.pending, p.applied = nil, 0, p.bulk.committed
		}
	}()
	st := p.bulk.st
	last, err := p.fold(ctx, p.db, st, batch, p.applied)
	if err != nil || last == p.applied {
		return err
	}
	p.applied = last
	p.bulk.pending += len(batch)
	if p.clamps != nil {
		for _, c := range st.clamps {
			p.clamps.ReportClamp(c)
		}
	}
	st.clamps = nil
	if p.bulk.pending < bulkCommitEvents {
		return nil
	}
	return p.commitBulk(ctx)
}

// commitBulk writes the rows changed since the last commit and the
// checkpoint in one transaction.
func (p *Projection) commitBulk(ctx context.Context) error {
	st := p.bulk.st
	if st == nil || p.applied == p.bulk.committed {
		return nil
	}
	err := storage.Classify(p.writeBulk(ctx, st))
	if err != nil {
		p.bulk.st, p.bulk.pending, p.applied = nil, 0, p.bulk.committed
		return err
	}
	p.bulk.pending, p.bulk.committed = 0, p.applied
	if len(st.dirty) > 0 {
		p.dirtyJSON.Store(true)
	}
	if len(st.touched) > 0 {
		p.dirtyCounts.Store(true)
	}
	if len(st.rows) > bulkMaxLanes {
		p.bulk.st = nil
		return nil
	}
	clear(st.dirty)
	clear(st.touchOnly)
	clear(st.touched)
	clear(st.stopCountedDirty)
	return nil
}

func (p *Projection) writeBulk(ctx context.Context, st *batchState) error {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("commit bulk load: %w", err)
	}
	defer tx.Rollback()
	if err := p.limit.Apply(ctx, tx); err != nil {
		return fmt.Errorf("commit bulk load: %w", err)
	}
	if err := writeRows(ctx, tx, st); err != nil {
		return fmt.Errorf("commit bulk load: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = 'checkpoint'`, strconv.FormatUint(p.applied, 10)); err != nil {
		return fmt.Errorf("commit bulk load: write checkpoint: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit bulk load: %w", err)
	}
	return nil
}
