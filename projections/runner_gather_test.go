package projections_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"hermes/events"
	"hermes/projections"
)

// gatherRecorder is a projection that records what it is given to number
// (Assign) and the batches it applies.
type gatherRecorder struct {
	mu       sync.Mutex
	assigned []uint64
	batches  [][]uint64
}

func (r *gatherRecorder) Name() string                               { return "gatherRecorder.v1" }
func (r *gatherRecorder) Checkpoint(context.Context) (uint64, error) { return 0, nil }
func (r *gatherRecorder) Close() error                               { return nil }
func (r *gatherRecorder) Assign(_ uint64, received []events.Envelope) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, env := range received {
		r.assigned = append(r.assigned, env.Position)
	}
}
func (r *gatherRecorder) Apply(_ context.Context, batch []events.Envelope) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ps []uint64
	for _, env := range batch {
		ps = append(ps, env.Position)
	}
	r.batches = append(r.batches, ps)
	return nil
}

func (r *gatherRecorder) seen() (assigned []uint64, batches [][]uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.assigned...), append([][]uint64(nil), r.batches...)
}

// TestRunnerGathersUntilSomeoneWaits: events nobody waits for are
// numbered as they arrive (WaitAssigned returns) but gathered into one
// batch, applied as soon as a read waits for them (WaitFor, WaitFresh);
// a barrier event received and not applied is said so until then.
func TestRunnerGathersUntilSomeoneWaits(t *testing.T) {
	for _, wait := range []struct {
		name string
		fn   func(*projections.Runner, context.Context, uint64) error
	}{
		{"WaitFor", (*projections.Runner).WaitFor},
		{"WaitFresh", (*projections.Runner).WaitFresh},
	} {
		t.Run(wait.name, func(t *testing.T) {
			// Given a runner whose gather window never ends by itself
			store := openEventStore(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := &gatherRecorder{}
			r := projections.NewRunner(store, p)
			r.SetGather(time.Hour)
			r.SetBarrier(func(e events.Event) bool { _, ok := e.(events.GatewayStopped); return ok })
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run() = %v", err)
				}
			}()
			wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
			defer wcancel()

			// When three events are appended one by one, each waited for
			// only until it is numbered
			var last uint64
			for i, e := range []events.Event{events.GatewayStarted{PID: 1}, events.GatewayStopped{Clean: true}, events.GatewayStarted{PID: 2}} {
				res, err := store.Append(ctx, "gateway", events.AnyVersion(), []events.Proposed{{ID: string(rune('a' + i)), Event: e}})
				if err != nil {
					t.Fatal(err)
				}
				last = res.LastPosition()
				if err := r.WaitAssigned(wctx, last); err != nil {
					t.Fatalf("WaitAssigned(%d) = %v", last, err)
				}
			}

			// Then all three were numbered, none applied, the barrier is
			// pending
			assigned, batches := p.seen()
			if len(assigned) != 3 || assigned[2] != last {
				t.Fatalf("assigned %v, want the three positions up to %d", assigned, last)
			}
			if len(batches) != 0 || r.Applied() != 0 {
				t.Fatalf("applied %v (Applied %d) while nobody waits, want nothing yet", batches, r.Applied())
			}
			if !r.Assigned(last) || r.Assigned(last+1) {
				t.Fatalf("Assigned(%d), Assigned(%d) = %v, %v; want true, false", last, last+1, r.Assigned(last), r.Assigned(last+1))
			}
			if pos, pending := r.PendingBarrier(); !pending || pos != assigned[1] {
				t.Fatalf("PendingBarrier() = %d, %v; want the barrier at %d pending", pos, pending, assigned[1])
			}

			// When a read waits for the last one
			if err := wait.fn(r, wctx, last); err != nil {
				t.Fatalf("%s(%d) = %v", wait.name, last, err)
			}

			// Then the three were applied in one batch
			_, batches = p.seen()
			if len(batches) != 1 || len(batches[0]) != 3 {
				t.Fatalf("batches %v, want one batch of the three events", batches)
			}
			if pos, pending := r.PendingBarrier(); pending {
				t.Fatalf("PendingBarrier() = %d, true after the barrier was applied", pos)
			}
		})
	}
}

// TestRunnerWithoutGatherAppliesAtOnce: with no gather window each event
// is applied without anyone waiting for it.
func TestRunnerWithoutGatherAppliesAtOnce(t *testing.T) {
	store := openEventStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &gatherRecorder{}
	r := projections.NewRunner(store, p)
	r.SetGather(0)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	res, err := store.Append(ctx, "gateway", events.AnyVersion(), []events.Proposed{{ID: "a", Event: events.GatewayStarted{PID: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for r.Applied() < res.LastPosition() {
		if time.Now().After(deadline) {
			t.Fatal("the event was not applied without a waiter")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run() = %v", err)
	}
}

// appliedSignal is a gatherRecorder that also says each batch it applies.
type appliedSignal struct {
	gatherRecorder
	applied chan []uint64
}

func (r *appliedSignal) Apply(ctx context.Context, batch []events.Envelope) error {
	if err := r.gatherRecorder.Apply(ctx, batch); err != nil {
		return err
	}
	var ps []uint64
	for _, env := range batch {
		ps = append(ps, env.Position)
	}
	r.applied <- ps
	return nil
}

// TestRunnerGathersLongerWhileNobodyReads: the quiet window holds while no
// read waits; a read that waits brings back the other window for the next
// QuietBatches batches, then the quiet one holds again.
func TestRunnerGathersLongerWhileNobodyReads(t *testing.T) {
	// Given a runner that applies at once while reads come, and gathers
	// until a read waits while none do
	store := openEventStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &appliedSignal{applied: make(chan []uint64, projections.QuietBatches+8)}
	r := projections.NewRunner(store, p)
	r.SetGather(0)
	r.SetQuietGather(time.Hour)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	}()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	appendOne := func(i int) uint64 {
		t.Helper()
		res, err := store.Append(ctx, "gateway", events.AnyVersion(), []events.Proposed{{ID: string(rune('a' + i)), Event: events.GatewayStarted{PID: i}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.WaitAssigned(wctx, res.LastPosition()); err != nil {
			t.Fatalf("WaitAssigned(%d) = %v", res.LastPosition(), err)
		}
		return res.LastPosition()
	}
	applied := func(pos uint64) {
		t.Helper()
		select {
		case got := <-p.applied:
			if got[len(got)-1] != pos {
				t.Fatalf("applied %v, want a batch up to %d", got, pos)
			}
		case <-wctx.Done():
			t.Fatalf("position %d not applied: %v", pos, wctx.Err())
		}
	}

	// When nobody reads, an event waits in the quiet window
	first := appendOne(0)
	if _, batches := p.seen(); len(batches) != 0 {
		t.Fatalf("applied %v before anyone read, want nothing yet", batches)
	}
	// until a read waits for it
	if err := r.WaitFor(wctx, first); err != nil {
		t.Fatalf("WaitFor(%d) = %v", first, err)
	}
	applied(first)

	// Then the next QuietBatches events are applied one by one without
	// anyone waiting for them
	for i := 1; i <= projections.QuietBatches; i++ {
		applied(appendOne(i))
	}

	// And after them the quiet window holds again
	last := appendOne(projections.QuietBatches + 1)
	if _, batches := p.seen(); len(batches) != projections.QuietBatches+1 {
		t.Fatalf("%d batches applied, want %d: the event after them waits for a read", len(batches), projections.QuietBatches+1)
	}
	if err := r.WaitFor(wctx, last); err != nil {
		t.Fatalf("WaitFor(%d) = %v", last, err)
	}
	applied(last)
}
