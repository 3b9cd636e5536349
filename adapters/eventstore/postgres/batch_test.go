package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"hermes/events"
)

func seq(appends ...events.StreamAppend) iter.Seq[events.StreamAppend] {
	return slices.Values(appends)
}

// TestAppendBatch: each append of a batch is checked on its own, in the
// order of the sequence, including against the appends before it in the
// same batch, and answered in that order.
func TestAppendBatch(t *testing.T) {
	s := openTemp(t)
	stored := mustAppend(t, s, "lane-stored", events.NoStream(), touch("s-1", "s-2"))
	res, err := s.AppendBatch(t.Context(), seq(
		events.StreamAppend{Stream: "lane-1", Expected: events.NoStream(), Proposed: touch("a-1")},
		events.StreamAppend{Stream: "lane-1", Expected: events.ExactVersion(1), Proposed: touch("a-2", "a-3")},
		events.StreamAppend{Stream: "lane-1", Expected: events.ExactVersion(1), Proposed: touch("a-4")},
		events.StreamAppend{Stream: "lane-stored", Expected: events.NoStream(), Proposed: touch("s-1", "s-2")},
		events.StreamAppend{Stream: "lane-2", Expected: events.NoStream(), Proposed: touch("s-1")},
		events.StreamAppend{Stream: "lane-1", Expected: events.AnyVersion(), Proposed: touch("a-2", "a-3")},
		events.StreamAppend{Stream: "lane-2", Expected: events.NoStream(), Proposed: touch("b-1", "b-1")},
		events.StreamAppend{Stream: "lane-2", Expected: events.NoStream(), Proposed: touch("b-1")},
	))
	if err != nil || len(res) != 8 {
		t.Fatalf("AppendBatch = %d results, %v", len(res), err)
	}
	check := func(i int, wantVersions []uint64, dup bool, wantErr error) {
		t.Helper()
		r := res[i]
		if !errors.Is(r.Err, wantErr) || (wantErr == nil && r.Err != nil) {
			t.Errorf("append %d error = %v, want %v", i, r.Err, wantErr)
			return
		}
		if wantErr == nil && (!slices.Equal(r.Result.Versions, wantVersions) || r.Result.Duplicate != dup) {
			t.Errorf("append %d = %+v, want versions %v, duplicate %v", i, r.Result, wantVersions, dup)
		}
	}
	check(0, []uint64{1}, false, nil)
	check(1, []uint64{2, 3}, false, nil)
	check(2, nil, false, events.ErrWrongExpectedVersion)
	check(3, []uint64{1, 2}, true, nil)
	if !slices.Equal(res[3].Result.Positions, stored.Positions) {
		t.Errorf("the retry of stored events = positions %v, want the original %v", res[3].Result.Positions, stored.Positions)
	}
	check(4, nil, false, events.ErrInvalidAppend) // an id of another stream
	check(5, []uint64{2, 3}, true, nil)           // a retry of append 1, in the same batch
	if !slices.Equal(res[5].Result.Positions, res[1].Result.Positions) {
		t.Errorf("the retry within the batch = positions %v, want append 1's %v", res[5].Result.Positions, res[1].Result.Positions)
	}
	check(6, nil, false, events.ErrInvalidAppend) // an id repeated within the append
	check(7, []uint64{1}, false, nil)
	all, err := s.ReadAll(t.Context(), 0, 100)
	if err != nil || len(all) != 2+4 {
		t.Fatalf("ReadAll = %d events, %v; want 6", len(all), err)
	}
}

// TestAppendBatchLarge: a batch of many groups (more appends than one
// group holds) answers every append in order, and its events are in the
// log in the order of the sequence.
func TestAppendBatchLarge(t *testing.T) {
	s := openTemp(t)
	const n = 3*batchChunk + 17
	res, err := s.AppendBatch(t.Context(), func(yield func(events.StreamAppend) bool) {
		for i := range n {
			if !yield(events.StreamAppend{Stream: fmt.Sprintf("lane-%d", i), Expected: events.NoStream(), Proposed: touch(fmt.Sprintf("e-%d", i))}) {
				return
			}
		}
	})
	if err != nil || len(res) != n {
		t.Fatalf("AppendBatch = %d results, %v", len(res), err)
	}
	var last uint64
	for i, r := range res {
		if r.Err != nil || r.Result.Positions[0] <= last {
			t.Fatalf("append %d = %+v (after position %d)", i, r, last)
		}
		last = r.Result.Positions[0]
	}
}

// TestAppendBatchCancelled: a context cancelled while the sequence runs
// ends the batch with its error; the appends answered before it have
// their results (and are in the log), the others have none and are not.
func TestAppendBatchCancelled(t *testing.T) {
	s := openTemp(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res, err := s.AppendBatch(ctx, func(yield func(events.StreamAppend) bool) {
		for i := range 2000 {
			if i == 1000 {
				cancel()
			}
			if !yield(events.StreamAppend{Stream: fmt.Sprintf("lane-%d", i), Expected: events.NoStream(), Proposed: touch(fmt.Sprintf("e-%d", i))}) {
				return
			}
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("AppendBatch error = %v, want context.Canceled", err)
	}
	answered := map[uint64]bool{}
	for _, r := range res {
		if r.Err == nil && len(r.Result.Positions) == 1 {
			answered[r.Result.Positions[0]] = true
		}
	}
	all, err := s.ReadAll(t.Context(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		if !answered[e.Position] {
			t.Errorf("event %s at %d is in the log but its append has no result", e.ID, e.Position)
		}
	}
	if len(all) != len(answered) || len(all) == 0 || len(all) >= 2000 {
		t.Errorf("%d events in the log, %d appends answered; want the same, some but not all", len(all), len(answered))
	}
}

// TestGroupCommit: concurrent appenders share transactions, and each gets
// the result of its own append.
func TestGroupCommit(t *testing.T) {
	var transactions atomic.Int64
	s := openTemp(t, func(c *config) { c.beforeCommit = func([]uint64) { transactions.Add(1) } })
	const appenders, each = 16, 20
	var wg sync.WaitGroup
	for g := range appenders {
		wg.Go(func() {
			stream := fmt.Sprintf("lane-%d", g)
			for i := range each {
				res, err := s.Append(context.Background(), stream, events.ExactVersion(uint64(i)), touch(fmt.Sprintf("%d-%d", g, i)))
				if err != nil || res.LastVersion() != uint64(i+1) {
					t.Errorf("append %d of %s = %+v, %v", i, stream, res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := transactions.Load(); n >= appenders*each {
		t.Errorf("%d transactions for %d appends from %d appenders: no commit was shared", n, appenders*each, appenders)
	} else {
		t.Logf("%d appends in %d transactions", appenders*each, n)
	}
}
