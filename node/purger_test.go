package node

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestPurgerOutlivesItsRequest: a request that stops waiting (its client
// gave up) does not stop the purge; the status shows it running, then
// finished through the head it started at. Requests made while a purge
// runs share the next one, which starts after them.
func TestPurgerOutlivesItsRequest(t *testing.T) {
	release := make(chan struct{})
	var runs atomic.Int32
	var head atomic.Uint64
	head.Store(10)
	p := newPurger(context.Background(), func(ctx context.Context) error {
		runs.Add(1)
		<-release
		return nil
	}, func(context.Context) (uint64, error) { return head.Load(), nil })

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.purge(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("purge with a context already done = %v, want context.Canceled", err)
	}
	waitFor(t, func() bool { return p.state().Purging })
	if st := p.state(); st.Target != 10 || st.PurgedThrough != 0 {
		t.Fatalf("status while the first purge runs = %+v, want target 10, nothing purged yet", st)
	}

	// Two more requests while it runs: one purge after it serves both.
	head.Store(20)
	done := make(chan error, 2)
	for range 2 {
		go func() { done <- p.purge(context.Background()) }()
	}
	waitFor(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.waiting) == 2 })
	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return !p.state().Purging })
	if st, n := p.state(), runs.Load(); n != 2 || st.PurgedThrough != 20 || st.FinishedAt == nil {
		t.Fatalf("after the purges: %d runs, status %+v; want 2 runs, purged through 20", n, st)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30 s")
		}
		time.Sleep(time.Millisecond)
	}
}
