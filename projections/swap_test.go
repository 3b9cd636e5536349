package projections_test

import (
	"context"
	"sync"
	"testing"

	"hermes/events"
	"hermes/projections"
)

// swapTarget is a projection that records the last position applied and
// whether the runner's optional calls reached it.
type swapTarget struct {
	name string

	mu                   sync.Mutex
	applied              uint64
	caught, began, ended bool
	closed               bool
}

func (r *swapTarget) Name() string { return r.name }
func (r *swapTarget) Checkpoint(context.Context) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied, nil
}
func (r *swapTarget) Apply(_ context.Context, batch []events.Envelope) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied = batch[len(batch)-1].Position
	return nil
}
func (r *swapTarget) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}
func (r *swapTarget) CaughtUp(context.Context) error  { r.caught = true; return nil }
func (r *swapTarget) BeginBulk(context.Context) error { r.began = true; return nil }
func (r *swapTarget) EndBulk(context.Context) error   { r.ended = true; return nil }

func batchAt(pos uint64) []events.Envelope { return []events.Envelope{{Position: pos}} }

// TestHolderSwapWaitsForReaders: a swap waits for the reader of the old
// value, and whoever acquires after it gets the new one.
func TestHolderSwapWaitsForReaders(t *testing.T) {
	h := projections.NewHolder("old")
	v, release := h.Acquire()
	if v != "old" {
		t.Fatalf("Acquire() = %q, want old", v)
	}
	swapped := make(chan string)
	go func() {
		old, install := h.Exclusive()
		install("new")
		swapped <- old
	}()
	select {
	case <-swapped:
		t.Fatal("Exclusive returned while a reader held the old value")
	default:
	}
	release()
	if old := <-swapped; old != "old" {
		t.Errorf("Exclusive() = %q, want old", old)
	}
	v, release = h.Acquire()
	defer release()
	if v != "new" {
		t.Errorf("Acquire() after the swap = %q, want new", v)
	}
}

// TestSwappableRoutesBatchesToTheInstalledProjection: batches applied
// before a swap reach the old projection, those started during it wait and
// reach the new one, and the optional interfaces are passed on.
func TestSwappableRoutesBatchesToTheInstalledProjection(t *testing.T) {
	ctx := context.Background()
	old, next := &swapTarget{name: "r.v1"}, &swapTarget{name: "r.v1"}
	s := projections.NewSwappable[projections.Projection](old)
	if err := s.Apply(ctx, batchAt(1)); err != nil {
		t.Fatal(err)
	}
	cur, install := s.Exclusive()
	if cur != old {
		t.Fatal("Exclusive() did not return the projection in use")
	}
	applied := make(chan error)
	go func() { applied <- s.Apply(ctx, batchAt(2)) }()
	select {
	case <-applied:
		t.Fatal("Apply went through while the projection was held for a swap")
	default:
	}
	install(next)
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	if old.applied != 1 || next.applied != 2 {
		t.Errorf("applied old %d, new %d; want 1 and 2", old.applied, next.applied)
	}
	if pos, _ := s.Checkpoint(ctx); pos != 2 {
		t.Errorf("Checkpoint() = %d, want 2 (the new projection's)", pos)
	}
	for _, call := range []func(context.Context) error{s.CaughtUp, s.BeginBulk, s.EndBulk} {
		if err := call(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if !next.caught || !next.began || !next.ended || !next.closed || old.caught || old.closed {
		t.Errorf("optional calls reached old %+v, new %+v; want only the new one", old, next)
	}
}
