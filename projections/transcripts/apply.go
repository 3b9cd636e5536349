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
	erasing := holdsErasure(batch)
	if erasing {
		p.erasedSinceScrub.Store(true)
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
		p.bulkTx, p.bulkPending, p.bulkVersions, p.bulkKnown = false, 0, nil, nil
		p.liveVersions, p.liveKnown = nil, nil
		p.ids.rolledBack()
		if _, rbErr := p.stmts.rollback.ExecContext(context.Background()); rbErr != nil {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
	}()
	if err := p.limit.Apply(ctx, p.conn); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if erasing {
		// Durable with the deletes: the purge that rewrites the FTS
		// indexes is owed even if the process dies before it (vacuum.go).
		if _, err := p.conn.ExecContext(ctx, markFTSRewrite, metaFTSRewrite); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
	}
	cp, err := scanCheckpoint(p.stmts.getCheckpoint.QueryRowContext(ctx))
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	vs, known := p.held()
	a := &applier{ctx: ctx, s: p.stmts, vs: vs, known: known}
	last := cp
	for _, env := range batch {
		if env.Position <= last {
			continue
		}
		last = env.Position
		a.ids = p.ids.applying(env)
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
		if fresh {
			if err := a.apply(env, h); err != nil {
				return fmt.Errorf("apply position %d (%s v%d %s): %w", env.Position, env.Stream, env.Version, env.Type, err)
			}
		}
		if isImport(env) {
			if err := p.numberAfterImport(a, env); err != nil {
				return fmt.Errorf("apply position %d (%s v%d %s): %w", env.Position, env.Stream, env.Version, env.Type, err)
			}
		}
	}
	if last == cp {
		return nil // everything was at or below the checkpoint: nothing to write
	}
	if err := a.flush(); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if p.bulkTx {
		p.bulkPending += len(batch)
	}
	commit := !p.bulkTx || p.bulkPending >= bulkCommitEvents
	if commit {
		if err := vs.flush(ctx, p.stmts); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
	}
	if _, err := p.stmts.setCheckpoint.ExecContext(ctx, strconv.FormatUint(last, 10)); err != nil {
		return fmt.Errorf("apply: write checkpoint: %w", err)
	}
	if _, err := p.stmts.setNextID.ExecContext(ctx, strconv.FormatInt(p.ids.nextToStore(), 10)); err != nil {
		return fmt.Errorf("apply: write next message id: %w", err)
	}
	if commit {
		p.bulkTx, p.bulkPending = false, 0
		if _, err := p.stmts.commit.ExecContext(ctx); err != nil {
			return fmt.Errorf("apply: commit: %w", err)
		}
		committed = true
		p.ids.committed(last)
		if p.bulk {
			if err := p.copyBuilt(ctx); err != nil {
				return fmt.Errorf("apply: %w", err)
			}
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

// held returns the stream versions and the sessions known to have a row
// that the batch starts from. In a bulk load they are held across batches
// and the versions written once per commit (a bulk load's sessions get
// many messages, over many batches). Live, they are held across committed
// batches, so that a lane or session seen in the last few batches costs
// neither a read of its version nor an INSERT OR IGNORE of its row: the
// projection is the file's only writer, and a rolled-back batch drops
// them (apply). Live they are bounded by maxLiveHeld, bulk by
// maxHeldVersions.
func (p *Projection) held() (*streamVersions, map[string]bool) {
	if p.bulkTx {
		p.liveVersions, p.liveKnown = nil, nil
		if p.bulkVersions == nil {
			p.bulkVersions = newStreamVersions()
		}
		if p.bulkKnown == nil || len(p.bulkKnown) > maxHeldVersions {
			p.bulkKnown = make(map[string]bool)
		}
		return p.bulkVersions, p.bulkKnown
	}
	if p.liveVersions == nil || len(p.liveVersions.versions) > maxLiveHeld {
		p.liveVersions = newStreamVersions()
	}
	if p.liveKnown == nil || len(p.liveKnown) > maxLiveHeld {
		p.liveKnown = make(map[string]bool)
	}
	return p.liveVersions, p.liveKnown
}

// maxLiveHeld bounds the stream versions and known sessions the live path
// holds between batches (about 100 bytes each): the lanes active at once
// on a busy gateway, not every lane of the file.
const maxLiveHeld = 8192

// numberAfterImport goes on numbering from the file once a
// messages_imported is applied (or skipped): it kept Hermes' ids where
// they were free and took new ones for the others, from the rows in the
// file (its handler inserted the messages gathered before it first).
func (p *Projection) numberAfterImport(a *applier, env events.Envelope) error {
	next, err := autoincrementNext(a.ctx, p.conn)
	if err != nil {
		return err
	}
	p.ids.imported(env.Position, next)
	return nil
}

// Assign implements projections.Assigner: it numbers the messages of the
// events the runner received (messageIDs), before their batch is applied.
func (p *Projection) Assign(after uint64, received []events.Envelope) {
	p.ids.assign(after, received)
}

// AssignedMessages returns the ids numbered for the event at position when
// its batch is not committed yet (false otherwise: MessageIDs reads them
// from the file once the read model has the position).
func (p *Projection) AssignedMessages(position uint64) (MessageRange, bool) {
	return p.ids.lookup(position)
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
	vs  *streamVersions
	env events.Envelope
	// ids are the message ids numbered for env (messageIDs).
	ids MessageRange

	// known holds the sessions whose row exists in this transaction (in
	// a bulk load, since it began: the rows of its commits stay).
	known map[string]bool
	// pending holds appended messages not inserted yet: see flush.
	pending []pendingMessage
	// clamps are the values of the batch's events left out or capped.
	clamps []projections.Clamp
	// topicTables: the Telegram topic tables exist (gatewaystate.go).
	topicTables bool
}

// clamp notes that field of the envelope being applied was clamped.
func (a *applier) clamp(field, rule string) {
	a.clamps = append(a.clamps, projections.Clamp{Projection: Name, Stream: a.env.Stream,
		Position: a.env.Position, Field: field, Rule: rule})
}

// pendingMessage is a message_appended waiting in the batch.
type pendingMessage struct {
	position  uint64
	id        int64
	sessionID string
	msg       events.Message
	ts        float64
}

// streamVersions holds the stream versions read or applied in a batch (in
// a bulk load, since its last commit); dirty ones are written once, before
// the commit.
type streamVersions struct {
	versions map[string]uint64
	dirty    map[string]bool
	order    []string // dirty streams, in the order first applied
}

func newStreamVersions() *streamVersions {
	return &streamVersions{versions: make(map[string]uint64), dirty: make(map[string]bool)}
}

// guard reports whether env is new for its stream (its version is above
// the last one applied), and records it. Envelopes without a version (0)
// are not guarded.
func (a *applier) guard(env events.Envelope) (bool, error) {
	if env.Version == 0 {
		return true, nil
	}
	vs := a.vs
	v, ok := vs.versions[env.Stream]
	if !ok {
		var stored int64
		err := a.s.getVersion.QueryRowContext(a.ctx, env.Stream).Scan(&stored)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return false, fmt.Errorf("read stream version: %w", err)
		}
		v = uint64(stored)
		vs.versions[env.Stream] = v
	}
	if env.Version <= v {
		return false, nil
	}
	if !vs.dirty[env.Stream] {
		vs.dirty[env.Stream] = true
		vs.order = append(vs.order, env.Stream)
	}
	vs.versions[env.Stream] = env.Version
	return true, nil
}

// flush writes the dirty versions, many to a statement.
func (vs *streamVersions) flush(ctx context.Context, s *writeStatements) error {
	if err := execMulti(ctx, s, multiStreamVersions, vs.order, func(args []any, stream string) []any {
		return append(args, stream, int64(vs.versions[stream]))
	}); err != nil {
		return err
	}
	clear(vs.dirty)
	vs.order = vs.order[:0]
	if len(vs.versions) > maxHeldVersions {
		clear(vs.versions)
	}
	return nil
}

// maxHeldVersions bounds the stream versions a bulk load holds in memory.
const maxHeldVersions = 200_000

func (a *applier) exec(stmt *sql.Stmt, args ...any) error {
	_, err := stmt.ExecContext(a.ctx, args...)
	return err
}

// holdsErasure reports whether a batch holds an event that erases earlier
// ones (events.Erasure): the rows it deletes may have older copies in the
// free space of pages, which the next Purge scrubs.
func holdsErasure(batch []events.Envelope) bool {
	for _, env := range batch {
		if _, ok := env.Event.(events.Erasure); ok {
			return true
		}
	}
	return false
}
