package projections_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/events"
	"hermes/projections"
	"hermes/projections/sessions"
	"hermes/projections/transcripts"
	"hermes/testfixtures"
)

func openBoth(dir string) ([]projections.Projection, error) {
	lanes, err := sessions.Open(filepath.Join(dir, "lanes.db"), sessions.Exports{})
	if err != nil {
		return nil, err
	}
	state, err := transcripts.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		lanes.Close()
		return nil, err
	}
	return []projections.Projection{lanes, state}, nil
}

// recorder is a projection that records the runner's calls.
type recorder struct {
	calls   []string
	cp      uint64
	failing bool // BeginBulk fails
}

func (r *recorder) Name() string {
	if r.failing {
		return "failing.v1"
	}
	return "recorder.v1"
}
func (r *recorder) Checkpoint(context.Context) (uint64, error) { return r.cp, nil }
func (r *recorder) Close() error                               { return nil }
func (r *recorder) BeginBulk(context.Context) error {
	r.calls = append(r.calls, "begin")
	if r.failing {
		return errors.New("no bulk today")
	}
	return nil
}
func (r *recorder) EndBulk(context.Context) error { r.calls = append(r.calls, "end"); return nil }
func (r *recorder) Apply(_ context.Context, b []events.Envelope) error {
	if len(r.calls) == 0 || r.calls[len(r.calls)-1] != "apply" {
		r.calls = append(r.calls, "apply")
	}
	r.cp = b[len(b)-1].Position
	return nil
}

// TestBulkLoadOnlyFromZero: the runner puts a BulkLoader in bulk mode for
// a catch-up from position 0 of at least BulkMinEvents events, around the
// batches, and not otherwise.
func TestBulkLoadOnlyFromZero(t *testing.T) {
	ctx := context.Background()
	store := openEventStore(t)
	o := testfixtures.HistoryOptions{Events: 300, Lanes: 10, Seed: 1, Start: testfixtures.Date(2026, 1, 1, 0, 0, 0, 0)}
	if err := testfixtures.LoadHistory(ctx, store, o, 4); err != nil {
		t.Fatal(err)
	}
	defer func(old uint64) { projections.BulkMinEvents = old }(projections.BulkMinEvents)
	for _, tc := range []struct {
		name string
		min  uint64
		cp   uint64
		want string
	}{
		{"from zero, long history", 100, 0, "begin apply end"},
		{"from zero, short history", 1000, 0, "apply"},
		{"from a checkpoint", 100, 5, "apply"},
	} {
		projections.BulkMinEvents = tc.min
		r := &recorder{cp: tc.cp}
		if err := projections.NewRunner(store, r).CatchUp(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(r.calls); got != "["+tc.want+"]" {
			t.Errorf("%s: calls = %s, want [%s]", tc.name, got, tc.want)
		}
	}
}

// TestSharedCatchUpSurvivesAFailingProjection: two projections fed by one
// reader; one fails before it reads anything. CatchUp returns its error
// (it does not wait forever on the reader) and the other catches up.
func TestSharedCatchUpSurvivesAFailingProjection(t *testing.T) {
	ctx := context.Background()
	store := openEventStore(t)
	o := testfixtures.HistoryOptions{Events: 5 * projections.MaxBatch, Lanes: 10, Seed: 2, Start: testfixtures.Date(2026, 1, 1, 0, 0, 0, 0)}
	if err := testfixtures.LoadHistory(ctx, store, o, 4); err != nil {
		t.Fatal(err)
	}
	defer func(old uint64) { projections.BulkMinEvents = old }(projections.BulkMinEvents)
	projections.BulkMinEvents = 1
	bad, good := &recorder{failing: true}, &recorder{}
	done := make(chan error, 1)
	go func() { done <- projections.NewRunner(store, bad, good).CatchUp(ctx, nil) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no bulk today") {
			t.Errorf("CatchUp = %v, want the failing projection's error", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("CatchUp still waiting after a minute")
	}
	head, _ := store.Head(ctx)
	if good.cp != head {
		t.Errorf("the other projection reached %d, want %d", good.cp, head)
	}
}

// TestBulkRebuildVerifies: a rebuild in bulk mode gives read models equal,
// dump line by dump line, to ones built one batch at a time.
func TestBulkRebuildVerifies(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := sqlite.Open(filepath.Join(dir, "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	o := testfixtures.HistoryOptions{Events: 3000, Lanes: 40, Seed: 3, Start: testfixtures.Date(2026, 1, 1, 0, 0, 0, 0), CJKShare: 0.3}
	if err := testfixtures.LoadHistory(ctx, store, o, 4); err != nil {
		t.Fatal(err)
	}
	defer func(old uint64) { projections.BulkMinEvents = old }(projections.BulkMinEvents)
	projections.BulkMinEvents = 1 << 62 // the live models: no bulk mode
	if err := os.MkdirAll(filepath.Join(dir, "live"), 0o700); err != nil {
		t.Fatal(err)
	}
	live, err := openBoth(filepath.Join(dir, "live"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, p := range live {
			p.Close()
		}
	}()
	if err := projections.NewRunner(store, live...).CatchUp(ctx, nil); err != nil {
		t.Fatal(err)
	}
	projections.BulkMinEvents = 1 // the rebuild: bulk mode
	diff, err := projections.Verify(ctx, store, openBoth, live, filepath.Join(dir, "scratch"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff != nil {
		t.Errorf("bulk rebuild differs from the live models: %s", diff)
	}
}
