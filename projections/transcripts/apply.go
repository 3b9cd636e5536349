package transcripts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"hermes/events"
	"hermes/projections"
	"hermes/projections/storage"
)

// Apply folds a batch of envelopes in one transaction and records the
// position of the last one as the checkpoint. Envelopes at or below the
// checkpoint, or at or below the version already applied for their stream,
// are skipped, so a redelivered batch changes nothing. The events of
// stateEvents change rows (lane events create, end and reopen session rows;
// transcript events change messages and sessions); every other event only
// moves the checkpoint. An error leaves the file as it was before the batch.
// In a bulk load (BeginBulk) the transaction spans batches and commits every
// bulkCommitEvents events: an error then takes the file back to the last
// commit, with its checkpoint, and clamps are reported before the commit.
func (p *Projection) Apply(ctx context.Context, batch []events.Envelope) error {
	// A full disk is said so (events.ErrStorageFull): the runner retries
	// the batch, the transaction having rolled back.
	return storage.Classify(p.apply(ctx, batch))
}

func (p *Projection) apply(ctx context.Context, batch []events.Envelope) (err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("apply: %w", ErrClosed)
	}
	if len(batch) == 0 {
		return nil
	}
	// In a bulk load, one transaction spans many batches (see bulkTx).
	if !p.bulkTx {
		if _, err := p.stmts.begin.ExecContext(ctx); err != nil {
			return fmt.Errorf("apply: begin: %w", err)
		}
		p.bulkTx = p.bulk
	}
	committed := false
	defer func() {
		if committed || (p.bulkTx && err == nil) {
			return
		}
		p.bulkTx, p.bulkPending = false, 0
		if _, rbErr := p.stmts.rollback.ExecContext(context.Background()); rbErr != nil {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
	}()
	if err := p.limit.Apply(ctx, p.conn); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	cp, err := scanCheckpoint(p.stmts.getCheckpoint.QueryRowContext(ctx))
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	a := &applier{ctx: ctx, s: p.stmts, versions: make(map[string]uint64), dirty: make(map[string]bool),
		known: make(map[string]bool)}
	last := cp
	for _, env := range batch {
		if env.Position <= last {
			continue
		}
		last = env.Position
		h, ok := stateHandlerOf(env.Event)
		if !ok {
			// Touches, turns, queue and gateway events leave state.db as
			// it is: no version to guard, nothing to write.
			continue
		}
		fresh, err := a.guard(env)
		if err != nil {
			return fmt.Errorf("apply position %d (%s v%d): %w", env.Position, env.Stream, env.Version, err)
		}
		if !fresh {
			continue
		}
		if err := a.apply(env, h); err != nil {
			return fmt.Errorf("apply position %d (%s v%d %s): %w", env.Position, env.Stream, env.Version, env.Type, err)
		}
	}
	if last == cp {
		return nil // everything was at or below the checkpoint: nothing to write
	}
	if err := a.flush(); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if err := a.flushVersions(); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if _, err := p.stmts.setCheckpoint.ExecContext(ctx, strconv.FormatUint(last, 10)); err != nil {
		return fmt.Errorf("apply: write checkpoint: %w", err)
	}
	if p.bulkTx {
		p.bulkPending += len(batch)
	}
	if !p.bulkTx || p.bulkPending >= bulkCommitEvents {
		p.bulkTx, p.bulkPending = false, 0
		if _, err := p.stmts.commit.ExecContext(ctx); err != nil {
			return fmt.Errorf("apply: commit: %w", err)
		}
		committed = true
		if p.bulk {
			if err := p.offerBuilders(ctx); err != nil {
				return fmt.Errorf("apply: %w", err)
			}
		}
	}
	committed = true
	if p.clamps != nil {
		for _, c := range a.clamps {
			p.clamps.ReportClamp(c)
		}
	}
	return nil
}

// ReportClampsTo sends the token and cost values the projection leaves out
// or caps (see domain/clamp.go) to r, after each committed batch. Call it
// before the first Apply.
func (p *Projection) ReportClampsTo(r projections.ClampReporter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clamps = r
}

// applier applies the envelopes of one batch inside its transaction.
type applier struct {
	ctx context.Context
	s   *writeStatements
	// versions holds the stream versions read or applied in this batch;
	// dirty ones are written once, at the end of the batch.
	versions map[string]uint64
	dirty    map[string]bool
	order    []string // dirty streams, in the order first applied
	env      events.Envelope

	// known holds the sessions whose row exists in this transaction.
	known map[string]bool
	// pending holds appended messages not inserted yet: see flush.
	pending []pendingMessage
	// clamps are the values of the batch's events left out or capped.
	clamps []projections.Clamp
}

// clamp notes that field of the envelope being applied was clamped.
func (a *applier) clamp(field, rule string) {
	a.clamps = append(a.clamps, projections.Clamp{Projection: Name, Stream: a.env.Stream,
		Position: a.env.Position, Field: field, Rule: rule})
}

// pendingMessage is a message_appended waiting in the batch.
type pendingMessage struct {
	position  uint64
	sessionID string
	msg       events.Message
	ts        float64
}

// guard reports whether env is new for its stream (its version is above
// the last one applied), and records it. Envelopes without a version (0)
// are not guarded.
func (a *applier) guard(env events.Envelope) (bool, error) {
	if env.Version == 0 {
		return true, nil
	}
	v, ok := a.versions[env.Stream]
	if !ok {
		var stored int64
		err := a.s.getVersion.QueryRowContext(a.ctx, env.Stream).Scan(&stored)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return false, fmt.Errorf("read stream version: %w", err)
		}
		v = uint64(stored)
		a.versions[env.Stream] = v
	}
	if env.Version <= v {
		return false, nil
	}
	if !a.dirty[env.Stream] {
		a.dirty[env.Stream] = true
		a.order = append(a.order, env.Stream)
	}
	a.versions[env.Stream] = env.Version
	return true, nil
}

func (a *applier) flushVersions() error {
	for _, stream := range a.order {
		if _, err := a.s.setVersion.ExecContext(a.ctx, stream, int64(a.versions[stream])); err != nil {
			return fmt.Errorf("write stream version %s: %w", stream, err)
		}
	}
	return nil
}

func (a *applier) exec(stmt *sql.Stmt, args ...any) error {
	_, err := stmt.ExecContext(a.ctx, args...)
	return err
}
