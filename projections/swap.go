package projections

import (
	"context"
	"sync"

	"hermes/events"
)

// Holder holds the open handles of a read model that can be replaced while
// it serves (a rebuild on a live home builds new files, then swaps them in).
// A reader acquires the current handles and releases them when done; a swap
// waits for the readers of the old handles to finish, keeps new readers out
// for its short duration, and installs the new handles. An in-flight read
// so always finishes on the handles it started with, and no reader ever
// sees a handle that was closed under it.
type Holder[T any] struct {
	mu sync.RWMutex
	v  T
}

// NewHolder returns a holder of v.
func NewHolder[T any](v T) *Holder[T] { return &Holder[T]{v: v} }

// Acquire returns the current value and the release the caller must call
// once done with it; until then the value is not replaced. A goroutine must
// release before it acquires again: a swap waiting in between would keep
// the second acquisition out for good.
func (h *Holder[T]) Acquire() (T, func()) {
	h.mu.RLock()
	return h.v, h.mu.RUnlock
}

// Exclusive waits until every acquirer has released, keeps new ones out, and
// returns the current value and the function that installs next and lets
// the acquirers in again (install the old value to change nothing).
func (h *Holder[T]) Exclusive() (T, func(next T)) {
	h.mu.Lock()
	return h.v, func(next T) {
		h.v = next
		h.mu.Unlock()
	}
}

// Swappable is a Projection whose read model can be replaced while a
// [Runner] feeds it: the runner's batches go to the current read model, and
// Exclusive pauses them (it waits for the batch being applied) until the
// swap installs the new one. It passes on the optional interfaces Caught,
// BulkLoader and Assigner when the read model has them.
type Swappable[P Projection] struct {
	h Holder[P]
	// name is fixed: the runner asks for it under its own lock, which must
	// not wait for a swap; a swap installs a projection of the same name.
	name string
}

var (
	_ Projection = (*Swappable[Projection])(nil)
	_ Caught     = (*Swappable[Projection])(nil)
	_ BulkLoader = (*Swappable[Projection])(nil)
	_ Assigner   = (*Swappable[Projection])(nil)
)

// NewSwappable returns a swappable projection feeding p.
func NewSwappable[P Projection](p P) *Swappable[P] {
	return &Swappable[P]{h: Holder[P]{v: p}, name: p.Name()}
}

// Use calls fn with the current read model; it is not swapped meanwhile.
func (s *Swappable[P]) Use(fn func(P) error) error {
	p, release := s.h.Acquire()
	defer release()
	return fn(p)
}

// Exclusive is Holder.Exclusive: it pauses the runner's batches until the
// returned function installs a read model, which must have the same name.
func (s *Swappable[P]) Exclusive() (P, func(next P)) { return s.h.Exclusive() }

// Name implements Projection: the name of the projection it was made with.
func (s *Swappable[P]) Name() string { return s.name }

// Checkpoint implements Projection.
func (s *Swappable[P]) Checkpoint(ctx context.Context) (uint64, error) {
	p, release := s.h.Acquire()
	defer release()
	return p.Checkpoint(ctx)
}

// Apply implements Projection.
func (s *Swappable[P]) Apply(ctx context.Context, batch []events.Envelope) error {
	p, release := s.h.Acquire()
	defer release()
	return p.Apply(ctx, batch)
}

// Close implements Projection: it closes the current read model.
func (s *Swappable[P]) Close() error {
	p, release := s.h.Acquire()
	defer release()
	return p.Close()
}

// CaughtUp implements Caught.
func (s *Swappable[P]) CaughtUp(ctx context.Context) error {
	p, release := s.h.Acquire()
	defer release()
	if c, ok := any(p).(Caught); ok {
		return c.CaughtUp(ctx)
	}
	return nil
}

// Assign implements Assigner. A read model swapped in later has not seen
// what this one assigned: its first Assign finds a gap and leaves those
// events to its Apply.
func (s *Swappable[P]) Assign(after uint64, received []events.Envelope) {
	p, release := s.h.Acquire()
	defer release()
	if a, ok := any(p).(Assigner); ok {
		a.Assign(after, received)
	}
}

// BeginBulk implements BulkLoader.
func (s *Swappable[P]) BeginBulk(ctx context.Context) error {
	p, release := s.h.Acquire()
	defer release()
	if b, ok := any(p).(BulkLoader); ok {
		return b.BeginBulk(ctx)
	}
	return nil
}

// EndBulk implements BulkLoader.
func (s *Swappable[P]) EndBulk(ctx context.Context) error {
	p, release := s.h.Acquire()
	defer release()
	if b, ok := any(p).(BulkLoader); ok {
		return b.EndBulk(ctx)
	}
	return nil
}
