package node

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
)

// TestDutiesOwnContextLoggingAndStop: a duty runs with a context that
// stop ends, logs under its name, and has returned by the time stop
// returns; after stop nothing starts.
func TestDutiesOwnContextLoggingAndStop(t *testing.T) {
	logs := &syncBuffer{}
	d := newDuties(context.Background(), slog.New(slog.NewTextHandler(logs, nil)))
	running := make(chan struct{})
	var ended atomic.Bool
	if !d.start("probe", func(ctx context.Context, log *slog.Logger) {
		log.Info("probe running")
		close(running)
		<-ctx.Done()
		ended.Store(true)
	}) {
		t.Fatal("start on a fresh set = false, want true")
	}
	<-running
	d.stop()
	if !ended.Load() {
		t.Error("stop returned before the duty did")
	}
	if !strings.Contains(logs.String(), `msg="probe running" component=probe`) {
		t.Errorf("the duty's log lines do not carry its name:\n%s", logs.String())
	}
	var late atomic.Bool
	if d.start("late", func(context.Context, *slog.Logger) { late.Store(true) }) {
		t.Error("start after stop = true, want false")
	}
	d.stop() // a second stop returns at once
	if late.Load() {
		t.Error("a duty started after stop ran")
	}
}

// TestDutiesEndWithTheirParent: the duties of a set end when the context
// it was made with ends, before any stop.
func TestDutiesEndWithTheirParent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	d := newDuties(ctx, slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	d.start("probe", func(ctx context.Context, _ *slog.Logger) {
		<-ctx.Done()
		close(done)
	})
	cancel()
	<-done
	d.stop()
}
