package projections

import (
	"context"

	"hermes/events"
)

// Projection is one read model fed by a [Runner].
type Projection interface {
	// Name is the versioned name of the projection ("sessions.v1"). It is
	// stored with the checkpoint; when it changes the projection rebuilds
	// from position 0.
	Name() string

	// Checkpoint returns the global position of the last event applied (0
	// for none). A projection whose stored name differs from Name starts
	// over: it drops its rows and reports 0.
	Checkpoint(ctx context.Context) (uint64, error)

	// Apply folds a batch of envelopes, in position order, and records the
	// position of the last one as the checkpoint, atomically. Envelopes at
	// or below the checkpoint are skipped, so a duplicate delivery changes
	// nothing.
	Apply(ctx context.Context, batch []events.Envelope) error

	// Close releases the projection's resources.
	Close() error
}

// Caught is implemented by projections that want to know when the runner
// has caught up with the log (to write files deferred during catch-up).
type Caught interface {
	CaughtUp(ctx context.Context) error
}

// BulkLoader is implemented by projections that apply a long history from
// position 0 faster in a bulk mode (the transcripts projection builds its
// full-text indexes once at the end). The runner calls BeginBulk before
// such a catch-up and EndBulk when it is done, also after an error, unless
// the context was cancelled: a projection must finish an interrupted bulk
// load by itself when it is opened again.
type BulkLoader interface {
	BeginBulk(ctx context.Context) error
	EndBulk(ctx context.Context) error
}

// Assigner is implemented by projections that number the rows an event
// will insert (the transcripts projection's message ids) as soon as the
// runner receives the event, before the batch holding it is applied: an
// append can then be answered with its message id while the read model
// gathers more events into one transaction.
//
// The runner calls Assign with the events it receives, in log order, and
// after, the position of the event received just before them (the position
// the subscription started after, for the first). A projection assigns
// only when after is the last position it assigned (or applied): a gap (a
// swapped-in read model that has not seen the events in between) leaves
// the events to Apply, which assigns them in order itself. The numbers an
// event gets must not depend on when they are assigned (by Assign or
// Apply, before or after a restart): they are a function of the log.
type Assigner interface {
	Assign(after uint64, received []events.Envelope)
}
