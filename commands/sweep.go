package commands

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"hermes/domain"
	"hermes/events"
)

// sweepTarget is one lane of a batch decision: its key and the command id
// of its append ("" for a fresh one).
type sweepTarget struct {
	key       string
	commandID string
}

// sweepOutcome is what a batch decision did to one lane: the events it
// appended (none when the lane needed nothing), or why it failed.
type sweepOutcome struct {
	events []events.Event
	err    error
}

// sweep applies a per-lane decision to every lane of the directory, as one
// batch (decideBatch), and returns the keys it changed. Each lane's append
// carries the command id CommandID/key when commandID is given, so a
// retried sweep is idempotent per lane. A lane that fails does not stop
// the others: the first failure is returned with the keys changed.
func (h *Handler) sweep(ctx context.Context, command, commandID string, decide func(domain.Lane, time.Time) []events.Event) ([]string, error) {
	if h.directory == nil {
		return nil, fmt.Errorf("%s: no lane directory configured", command)
	}
	keys, err := h.directory.SessionKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: list lanes: %w", command, err)
	}
	targets := make([]sweepTarget, len(keys))
	for i, key := range keys {
		targets[i].key = key
		if commandID != "" {
			targets[i].commandID = commandID + "/" + key
		}
	}
	outcomes, err := h.decideBatch(ctx, command, targets, func(_ int, l domain.Lane, now time.Time) []events.Event { return decide(l, now) })
	var changed []string
	var failed error
	for i, o := range outcomes {
		if o.err != nil && failed == nil {
			failed = o.err
		}
		if len(o.events) > 0 {
			changed = append(changed, targets[i].key)
		}
	}
	return changed, errors.Join(err, failed)
}

// decideBatch decides every target lane on its cached (or freshly read)
// state and appends the lanes that change together (events.BatchAppender:
// one transaction and one fsync for thousands of lanes on the SQLite store,
// instead of one durable append per lane). The lanes are decided as the
// store takes them, so the store writes the first while later ones are
// still being decided. Each lane's append still carries its own expected
// version and command id, so each lane's history explains itself and a
// retried batch is idempotent per lane. A lane that moved in the meantime
// is decided again on its own, through execute. decide gets the target's
// index. The outcomes are in the order of targets; a lane that could not be
// read fails alone (its outcome's error) and the others are still decided
// and appended, so a caller that retries failed lanes (the expiry watcher)
// does not redo the rest; the error is for the batch as a whole (a
// cancelled context, a closed store), with the outcomes of the lanes
// answered before.
func (h *Handler) decideBatch(ctx context.Context, command string, targets []sweepTarget, decide func(int, domain.Lane, time.Time) []events.Event) ([]sweepOutcome, error) {
	// A pending lane holds the lane its append makes, packed (about 200
	// bytes), made while the store writes the lanes before it: once the
	// batch is committed, it replaces the cached lane (laneCache.install)
	// without unpacking or folding anything in the answer's path.
	type pending struct {
		target  int
		stream  string
		version uint64
		decided []events.Event
		next    packedLane
	}
	// Sized up front: growing the slice by doubling copied it over and
	// over.
	batch := make([]pending, 0, len(targets))
	outcomes := make([]sweepOutcome, len(targets))
	var cancelled error
	appends := func(yield func(events.StreamAppend) bool) {
		for i, t := range targets {
			if err := ctx.Err(); err != nil {
				cancelled = err
				return
			}
			if t.key == "" {
				outcomes[i].err = fmt.Errorf("%s: %w: empty session key", command, domain.ErrInvalidArgument)
				continue
			}
			stream := events.LaneStream(t.key)
			st, cached := h.cache.get(stream)
			if !cached {
				var err error
				if st, err = h.load(ctx, stream); err != nil {
					outcomes[i].err = fmt.Errorf("%s %s: %w", command, t.key, err)
					continue
				}
			}
			decided := decide(i, st.lane, h.now())
			if len(decided) == 0 && cached && !h.soleWriter {
				// Nothing to do on the cached lane: make sure it is current
				// (another process may have appended), as execute does.
				fresh, err := h.refresh(ctx, stream, st)
				if err != nil {
					outcomes[i].err = fmt.Errorf("%s %s: %w", command, t.key, err)
					continue
				}
				if fresh.version != st.version {
					st, decided = fresh, decide(i, fresh.lane, h.now())
				}
			}
			if len(decided) == 0 {
				continue
			}
			cmd := identify(t.commandID)
			next := st
			for _, e := range decided {
				next.lane = domain.Evolve(next.lane, e)
			}
			next.version += uint64(len(decided))
			batch = append(batch, pending{target: i, stream: stream, version: st.version, decided: decided, next: packLane(next)})
			if !yield(events.StreamAppend{Stream: stream, Expected: events.ExactVersion(st.version),
				Proposed: h.proposals(command, cmd, stream, decided)}) {
				return
			}
		}
	}
	defer func() {
		if r := recover(); r != nil {
			// Some of the batch may be committed: every lane it touched
			// is read again when next used.
			for _, p := range batch {
				h.cache.drop(p.stream)
			}
			panic(r)
		}
	}()
	results, batchErr := h.appendBatch(ctx, appends)
	if batchErr == nil && cancelled != nil {
		batchErr = cancelled
	}
	for i, p := range batch {
		t := targets[p.target]
		stream := p.stream
		var r events.BatchResult
		if i < len(results) {
			r = results[i]
		}
		switch {
		case r.Err == nil && len(r.Result.Versions) == 0:
			// Not answered: the batch as a whole failed before this lane.
			// Its append and the ones after it may have been written all
			// the same: those lanes are read again when next used.
			for _, rest := range batch[i:] {
				h.cache.drop(rest.stream)
			}
			if batchErr == nil {
				batchErr = fmt.Errorf("lane %s not answered", t.key)
			}
			return outcomes, fmt.Errorf("%s: %w", command, batchErr)
		case errors.Is(r.Err, events.ErrWrongExpectedVersion):
			h.cache.drop(stream)
			res, err := h.execute(ctx, t.key, command, t.commandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
				return decide(p.target, l, now), nil
			})
			outcomes[p.target] = sweepOutcome{events: res.Events, err: err}
		case r.Err != nil:
			h.cache.drop(stream)
			outcomes[p.target].err = fmt.Errorf("%s %s: %w", command, t.key, r.Err)
		case r.Result.Duplicate:
			// A retried batch: this lane's decision is already stored.
			h.cache.drop(stream)
			outcomes[p.target].events = p.decided
		case r.Result.LastVersion() != p.version+uint64(len(p.decided)):
			// Not where the lane was decided (a store that answers
			// otherwise): read it again when next needed.
			h.cache.drop(stream)
			outcomes[p.target].events = p.decided
		default:
			h.cache.install(stream, p.version, p.next)
			outcomes[p.target].events = p.decided
		}
	}
	if batchErr != nil {
		return outcomes, fmt.Errorf("%s: %w", command, batchErr)
	}
	return outcomes, nil
}

// appendBatch appends to many streams: in one call when the store is an
// events.BatchAppender, else one Append per stream, in order (each is
// idempotent through its derived event ids, so a retry is safe). The
// results are in the order of appends; the error is for the call as a
// whole, with the results answered before it.
func (h *Handler) appendBatch(ctx context.Context, appends iter.Seq[events.StreamAppend]) ([]events.BatchResult, error) {
	if b, ok := h.store.(events.BatchAppender); ok {
		return b.AppendBatch(ctx, appends)
	}
	var out []events.BatchResult
	for a := range appends {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		res, err := h.store.Append(ctx, a.Stream, a.Expected, a.Proposed)
		out = append(out, events.BatchResult{Result: res, Err: err})
	}
	return out, nil
}
