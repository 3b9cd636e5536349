package sqlite

import (
	"errors"
	"fmt"
	"testing"

	"hermes/events"
)

// TestAppendBatch: each stream of a batch is checked against its own
// expected version; a conflict, a malformed append or a retry answers for
// that stream alone, the others are appended, and every result is in the
// order of the appends, with more appends than one group commit takes.
func TestAppendBatch(t *testing.T) {
	s := openTemp(t)
	mustAppend(t, s, "lane-conflict", events.NoStream(), touch("c1"))
	mustAppend(t, s, "lane-retry", events.NoStream(), touch("r1"))
	const n = maxBatchRequests + 10
	appends := make([]events.StreamAppend, 0, n+3)
	for i := range n {
		appends = append(appends, events.StreamAppend{Stream: fmt.Sprintf("lane-%d", i), Expected: events.NoStream(), Proposed: touch(fmt.Sprintf("e%d", i))})
	}
	appends = append(appends,
		events.StreamAppend{Stream: "lane-conflict", Expected: events.NoStream(), Proposed: touch("c2")},
		events.StreamAppend{Stream: "lane-empty", Expected: events.NoStream()},
		events.StreamAppend{Stream: "lane-retry", Expected: events.NoStream(), Proposed: touch("r1")},
	)
	out, err := s.AppendBatch(t.Context(), appends)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(appends) {
		t.Fatalf("%d results for %d appends", len(out), len(appends))
	}
	for i := range n {
		if out[i].Err != nil || out[i].Result.LastVersion() != 1 {
			t.Fatalf("append %d = %+v, want version 1", i, out[i])
		}
	}
	for _, c := range []struct {
		i    int
		want error
	}{{n, events.ErrWrongExpectedVersion}, {n + 1, events.ErrInvalidAppend}} {
		if !errors.Is(out[c.i].Err, c.want) {
			t.Errorf("append %s = %v, want %v", appends[c.i].Stream, out[c.i].Err, c.want)
		}
	}
	if r := out[n+2]; r.Err != nil || !r.Result.Duplicate || r.Result.LastVersion() != 1 {
		t.Errorf("retried append = %+v, want the duplicate at version 1", r)
	}
	if head, _ := s.Head(t.Context()); head != n+2 {
		t.Errorf("head = %d, want %d", head, n+2)
	}
}

// TestAppendBatchOneTransaction: a batch of more appends than one group
// commit takes is committed in one transaction (one commit, so one fsync),
// not in maxBatchRequests-sized slices; a batch past maxBatchTxBytes is
// split between transactions, never inside an append.
func TestAppendBatchOneTransaction(t *testing.T) {
	for _, c := range []struct {
		name        string
		appends     int
		txBytes     int
		wantCommits int
	}{
		{"more appends than a group commit", 2*maxBatchRequests + 1, maxBatchTxBytes, 1},
		{"more bytes than one transaction", 4, 1, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func(was int) { maxBatchTxBytes = was }(maxBatchTxBytes)
			maxBatchTxBytes = c.txBytes
			s := openTemp(t)
			commits := 0
			notify := s.w.onCommit
			s.w.onCommit = func() { commits++; notify() }
			appends := make([]events.StreamAppend, c.appends)
			for i := range appends {
				appends[i] = events.StreamAppend{Stream: fmt.Sprintf("lane-%d", i), Expected: events.NoStream(),
					Proposed: touch(fmt.Sprintf("e%d-1", i), fmt.Sprintf("e%d-2", i))}
			}
			out, err := s.AppendBatch(t.Context(), appends)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range out {
				if r.Err != nil || r.Result.LastVersion() != 2 {
					t.Fatalf("append %d = %+v, want versions 1-2", i, r)
				}
			}
			if commits != c.wantCommits {
				t.Errorf("AppendBatch of %d appends committed %d times, want %d", c.appends, commits, c.wantCommits)
			}
		})
	}
}
