package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

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
	out, err := s.AppendBatch(t.Context(), slices.Values(appends))
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
			defer func(was int, hold time.Duration) { maxBatchTxBytes, maxBatchHold = was, hold }(maxBatchTxBytes, maxBatchHold)
			// A caller descheduled under load must not split the
			// transaction here: only the size bound does.
			maxBatchTxBytes, maxBatchHold = c.txBytes, time.Hour
			s := openTemp(t)
			commits := 0
			notify := s.w.onCommit
			s.w.onCommit = func() { commits++; notify() }
			appends := make([]events.StreamAppend, c.appends)
			for i := range appends {
				appends[i] = events.StreamAppend{Stream: fmt.Sprintf("lane-%d", i), Expected: events.NoStream(),
					Proposed: touch(fmt.Sprintf("e%d-1", i), fmt.Sprintf("e%d-2", i))}
			}
			out, err := s.AppendBatch(t.Context(), slices.Values(appends))
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

// TestAppendBatchSlowCallerLetsAppendsThrough: given a batch whose caller
// stops producing appends after a first chunk, when the transaction has
// been open for maxBatchHold (0 here) and nothing more comes, then the
// chunk is committed and an Append made meanwhile by someone else is served
// before the caller goes on, ahead of the rest of the batch.
func TestAppendBatchSlowCallerLetsAppendsThrough(t *testing.T) {
	defer func(hold, gap time.Duration) { maxBatchHold, maxBatchGap = hold, gap }(maxBatchHold, maxBatchGap)
	maxBatchHold, maxBatchGap = 0, 0
	s := openTemp(t)
	ctx := t.Context()
	seq := func(yield func(events.StreamAppend) bool) {
		for i := range 2 * batchChunk {
			if i == batchChunk {
				// The first chunk is handed over: an append of someone
				// else gets through while this caller is busy.
				done := make(chan error, 1)
				go func() {
					_, err := s.Append(ctx, "other", events.NoStream(), touch("o1"))
					done <- err
				}()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("Append during the batch: %v", err)
					}
				case <-time.After(10 * time.Second):
					t.Error("an Append made while the batch's caller was busy did not get through")
				}
			}
			if !yield(events.StreamAppend{Stream: fmt.Sprintf("lane-%d", i), Expected: events.NoStream(), Proposed: touch(fmt.Sprintf("e%d", i))}) {
				return
			}
		}
	}
	out, err := s.AppendBatch(ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2*batchChunk {
		t.Fatalf("%d results for %d appends", len(out), 2*batchChunk)
	}
	for i, r := range out {
		if r.Err != nil || r.Result.LastVersion() != 1 {
			t.Fatalf("append %d = %+v, want version 1", i, r)
		}
	}
	if other, last := readPosition(t, s, "other"), out[len(out)-1].Result.Positions[0]; other >= last {
		t.Errorf("positions: other %d, last lane %d; want the other append before the batch's end", other, last)
	}
}

// TestAppendBatchCancelled: given a batch whose context is cancelled
// while its caller still produces appends, then AppendBatch says so, and
// every append is either answered with its result and in the log, or not
// in the log at all (answered with an error, or not answered).
func TestAppendBatchCancelled(t *testing.T) {
	s := openTemp(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const n = 3 * batchChunk
	seq := func(yield func(events.StreamAppend) bool) {
		for i := range n {
			if i == 2*batchChunk {
				cancel()
			}
			if !yield(events.StreamAppend{Stream: fmt.Sprintf("lane-%d", i), Expected: events.NoStream(), Proposed: touch(fmt.Sprintf("e%d", i))}) {
				return
			}
		}
	}
	out, err := s.AppendBatch(ctx, seq)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("AppendBatch error = %v, want context.Canceled", err)
	}
	for i := range n {
		stream := fmt.Sprintf("lane-%d", i)
		_, readErr := s.ReadStream(t.Context(), stream, 0, 1, events.Forwards)
		stored := readErr == nil
		if !stored && !errors.Is(readErr, events.ErrStreamNotFound) {
			t.Fatal(readErr)
		}
		answered := i < len(out) && out[i].Err == nil && len(out[i].Result.Versions) > 0
		if answered != stored {
			t.Errorf("%s: answered as appended %v, in the log %v", stream, answered, stored)
		}
	}
}

// TestAppendBatchSequencePanics: the appends are read on a goroutine of
// their own (readAhead), but a panic of the caller's sequence still reaches
// the caller, on its goroutine; nothing of the open transaction is
// committed, and the writer goes on serving appends.
func TestAppendBatchSequencePanics(t *testing.T) {
	// One transaction however slowly the chunks come (a loaded machine
	// must not commit chunk 0 before the panic).
	defer func(hold, gap time.Duration) { maxBatchHold, maxBatchGap = hold, gap }(maxBatchHold, maxBatchGap)
	maxBatchHold, maxBatchGap = time.Hour, time.Hour
	s := openTemp(t)
	const n = 3 * batchChunk
	seq := func(yield func(events.StreamAppend) bool) {
		for i := range n {
			if i == 2*batchChunk+7 {
				panic("sequence broke")
			}
			if !yield(events.StreamAppend{Stream: fmt.Sprintf("lane-%d", i), Expected: events.NoStream(), Proposed: touch(fmt.Sprintf("e%d", i))}) {
				return
			}
		}
	}
	func() {
		defer func() {
			if p := recover(); p != "sequence broke" {
				t.Fatalf("AppendBatch recovered %v, want the sequence's panic", p)
			}
		}()
		_, _ = s.AppendBatch(t.Context(), seq)
		t.Fatal("AppendBatch returned, want the sequence's panic")
	}()
	if head, err := s.Head(t.Context()); err != nil || head != 0 {
		t.Fatalf("head after the panic = %d, %v; want nothing committed", head, err)
	}
	mustAppend(t, s, "lane-after", events.NoStream(), touch("after"))
}

func readPosition(t *testing.T, s *Store, stream string) uint64 {
	t.Helper()
	evs, err := s.ReadStream(t.Context(), stream, 0, 1, events.Forwards)
	if err != nil || len(evs) == 0 {
		t.Fatalf("ReadStream(%s) = %v, %v", stream, evs, err)
	}
	return evs[0].Position
}

// TestAppendBatchCheckpointsAfterAnswering: given a batch of more than one
// chunk, when it is answered, then its commit skipped the automatic
// checkpoint but the writer ran one right after (the pages are in the
// database file before the writer's next job), and the automatic
// checkpoint is on again for the next commits.
func TestAppendBatchCheckpointsAfterAnswering(t *testing.T) {
	s := openTemp(t)
	before := fileSize(t, s.path)
	appends := make([]events.StreamAppend, 3000)
	for i := range appends {
		ids := make([]string, 4)
		for k := range ids {
			ids[k] = fmt.Sprintf("e%d-%d", i, k)
		}
		appends[i] = events.StreamAppend{Stream: fmt.Sprintf("lane-%d", i), Expected: events.NoStream(), Proposed: touch(ids...)}
	}
	if _, err := s.AppendBatch(t.Context(), slices.Values(appends)); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := s.onWriter(t.Context(), "read wal_autocheckpoint", func(w *writer) error {
		return w.conn.QueryRowContext(t.Context(), "PRAGMA wal_autocheckpoint").Scan(&pages)
	}); err != nil {
		t.Fatal(err)
	}
	if pages != autoCheckpointPages {
		t.Errorf("wal_autocheckpoint after the batch = %d, want %d", pages, autoCheckpointPages)
	}
	// With the automatic checkpoint off, only a checkpoint moves pages
	// into the database file.
	if after := fileSize(t, s.path); after <= before {
		t.Errorf("database file %d bytes before the batch, %d after: the batch's pages were not checkpointed", before, after)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
