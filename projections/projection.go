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
