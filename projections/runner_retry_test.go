package projections_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/events"
	"hermes/projections"
)

// flaky is a projection whose Apply fails for want of space failures
// times, then records the batches.
type flaky struct {
	mu       sync.Mutex
	failures int
	fail     error
	applied  uint64
}

func (f *flaky) Name() string                               { return "flaky.v1" }
func (f *flaky) Checkpoint(context.Context) (uint64, error) { return 0, nil }
func (f *flaky) Close() error                               { return nil }
func (f *flaky) Apply(_ context.Context, batch []events.Envelope) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures > 0 {
		f.failures--
		return f.fail
	}
	f.applied = batch[len(batch)-1].Position
	return nil
}

// TestRunnerRetriesStorageFull: a projection failing for want of space is
// retried with a doubling backoff capped at Max (driven by the test's
// timer), the runner says so meanwhile, and catches up once it writes; any
// other error still stops the runner.
func TestRunnerRetriesStorageFull(t *testing.T) {
	full := fmt.Errorf("apply: %w: commit: database or disk is full", events.ErrStorageFull)
	const ms = time.Millisecond
	for _, tc := range []struct {
		name      string
		failures  int
		fail      error
		wantWaits []time.Duration
		wantStop  bool
	}{
		{"one failure", 1, full, []time.Duration{10 * ms}, false},
		{"capped backoff", 6, full, []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 80 * ms, 80 * ms}, false},
		{"another error stops", 1, errors.New("boom"), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := openEventStore(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res, err := store.Append(ctx, "s", events.AnyVersion(), []events.Proposed{{ID: "e1", Event: events.GatewayStarted{PID: 1}}})
			if err != nil {
				t.Fatal(err)
			}
			p := &flaky{failures: tc.failures, fail: tc.fail}
			r := projections.NewRunner(store, p)
			waits := make(chan time.Duration)
			fire := make(chan time.Time)
			r.SetBackoff(projections.Backoff{Min: 10 * ms, Max: 80 * ms,
				After: func(d time.Duration) <-chan time.Time { waits <- d; return fire }})
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			var got []time.Duration
			for range tc.wantWaits {
				select {
				case d := <-waits:
					got = append(got, d)
				case err := <-done:
					t.Fatalf("Run() = %v while retrying", err)
				case <-time.After(30 * time.Second):
					t.Fatal("no retry")
				}
				if err := r.StorageError(); !errors.Is(err, events.ErrStorageFull) {
					t.Fatalf("StorageError() = %v while retrying", err)
				}
				fire <- time.Now()
			}
			if tc.wantStop {
				if err := <-done; err == nil {
					t.Fatal("Run() = nil after a non-storage error")
				}
				return
			}
			wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
			defer wcancel()
			if err := r.WaitFor(wctx, res.LastPosition()); err != nil {
				t.Fatal(err)
			}
			if r.StorageError() != nil || r.Retries() != uint64(tc.failures) {
				t.Fatalf("after catching up: StorageError %v, Retries %d (want nil, %d)", r.StorageError(), r.Retries(), tc.failures)
			}
			for i := range got {
				if got[i] != tc.wantWaits[i] {
					t.Fatalf("waits = %v, want %v", got, tc.wantWaits)
				}
			}
		})
	}
}

// openEventStore opens an empty event store in t's temporary directory,
// closed when t ends.
func openEventStore(t *testing.T) *sqlite.Store {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}
