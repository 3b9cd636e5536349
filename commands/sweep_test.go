package commands_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/commands"
	"hermes/domain"
	"hermes/events"
	"hermes/testfixtures"
)

// appendOnly hides the store's events.BatchAppender, so the sweep takes its
// one-Append-per-stream fallback (a KurrentDB store's path).
type appendOnly struct{ commands.EventLog }

// TestSweep_BatchAndFallback: the restart sweep marks the same lanes, with
// one event per lane under the lane's own command id, whether the store
// appends the batch at once or stream by stream; a lane another process
// changed after this handler cached it is decided again on its own; a
// retried sweep (same command id) appends nothing new.
func TestSweep_BatchAndFallback(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch bool
	}{{"batch appender", true}, {"per-stream fallback", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, idleConfig())
			var log commands.EventLog = f.store
			if !tc.batch {
				log = appendOnly{f.store}
			}
			h := commands.NewHandler(log, idleConfig(), commands.WithClock(f.clock.Now),
				commands.WithDirectory(testfixtures.StoreDirectory{Store: f.store}))
			src := func(chat string) domain.SessionSource {
				return domain.SessionSource{Platform: "telegram", ChatID: chat, ChatType: "dm"}
			}
			const lanes = 40
			for i := range lanes {
				if _, err := h.ResolveSession(ctx, commands.ResolveSession{Source: src(fmt.Sprint(i))}); err != nil {
					t.Fatal(err)
				}
			}
			// Another process suspends lane 7 behind this handler's cache:
			// the batch append of lane 7 conflicts, and lane 7 (now
			// suspended) must not be marked.
			other := commands.NewHandler(f.store, idleConfig(), commands.WithClock(f.clock.Now))
			key7 := "agent:main:telegram:dm:7"
			if _, err := other.SuspendSession(ctx, commands.SuspendSession{Key: key7, Reason: events.SuspendStopCommand}); err != nil {
				t.Fatal(err)
			}
			f.clock.Advance(time.Minute)
			marked, err := h.SuspendRecentlyActive(ctx, commands.SuspendRecentlyActive{MaxAge: time.Hour, CommandID: "boot-1"})
			if err != nil {
				t.Fatal(err)
			}
			if len(marked) != lanes-1 {
				t.Fatalf("marked %d lanes, want %d: %v", len(marked), lanes-1, marked)
			}
			for _, k := range marked {
				if k == key7 {
					t.Fatalf("marked the suspended lane %s", key7)
				}
				envs := f.history(t, k)
				last := envs[len(envs)-1]
				if _, ok := last.Event.(events.ResumeMarked); !ok || last.Metadata.CommandID != "boot-1/"+k || last.Metadata.Command != "suspend_recently_active" {
					t.Fatalf("lane %s ends with %s %+v, want its own resume mark", k, last.Type, last.Metadata)
				}
				// The id is derived from the lane's command id and stream
				// (pinned: a retry by a later build must derive the same).
				if k == "agent:main:telegram:dm:3" && last.ID != "6acb1781-9ffe-5d15-bafb-c2e1f5806b42" {
					t.Fatalf("lane %s: resume mark id %s, want the one derived from boot-1/%s", k, last.ID, k)
				}
			}
			head, _ := f.store.Head(ctx)
			again, err := h.SuspendRecentlyActive(ctx, commands.SuspendRecentlyActive{MaxAge: time.Hour, CommandID: "boot-1"})
			if err != nil {
				t.Fatal(err)
			}
			if head2, _ := f.store.Head(ctx); head2 != head || len(again) != 0 {
				t.Fatalf("retried sweep marked %v and moved the head %d -> %d", again, head, head2)
			}
		})
	}
}

// countingLog counts the single-stream appends and the batch appends a
// handler makes.
type countingLog struct {
	*sqlite.Store
	appends, batches, batched int
}

func (c *countingLog) Append(ctx context.Context, stream string, x events.ExpectedVersion, p []events.Proposed) (events.AppendResult, error) {
	c.appends++
	return c.Store.Append(ctx, stream, x, p)
}

func (c *countingLog) AppendBatch(ctx context.Context, a iter.Seq[events.StreamAppend]) ([]events.BatchResult, error) {
	c.batches++
	return c.Store.AppendBatch(ctx, func(yield func(events.StreamAppend) bool) {
		for sa := range a {
			c.batched++
			if !yield(sa) {
				return
			}
		}
	})
}

// TestExpiryWatcher_FinalizesInOneBatch: the expiry watcher records the
// finalization of every expired lane of a pass with one batch append (one
// transaction on the SQLite store), each lane under its own command id,
// like the restart sweep and the entry prune.
func TestExpiryWatcher_FinalizesInOneBatch(t *testing.T) {
	ctx := context.Background()
	w := newExpiryWorld(t, idlePolicy(60))
	const lanes = 5
	for i := range lanes {
		w.lane(t, "telegram", fmt.Sprint(i))
	}
	w.clock.Advance(61 * time.Minute)
	log := &countingLog{Store: w.store}
	cfg := commands.DefaultConfig()
	cfg.Policies.Default = idlePolicy(60)
	h := commands.NewHandler(log, cfg, commands.WithClock(w.clock.Now), commands.WithDirectory(w.dir))
	rep, err := commands.NewExpiryWatcher(h, commands.ExpiryConfig{Hook: &recordingHook{}}).Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Finalized) != lanes {
		t.Fatalf("Pass finalized %v, want %d lanes", rep.Finalized, lanes)
	}
	if log.appends != 0 || log.batches != 1 || log.batched != lanes {
		t.Fatalf("pass made %d appends and %d batches of %d streams, want one batch of %d", log.appends, log.batches, log.batched, lanes)
	}
	for _, k := range rep.Finalized {
		if got := w.finalizations(t, k); len(got) != 1 {
			t.Fatalf("finalizations of %s = %+v, want one", k, got)
		}
	}
}

// unreadableLane fails every read of one stream.
type unreadableLane struct {
	commands.EventLog
	stream string
}

func (u unreadableLane) ReadStream(ctx context.Context, stream string, from uint64, count int, dir events.Direction) ([]events.Envelope, error) {
	if stream == u.stream {
		return nil, fmt.Errorf("read %s: disk says no", stream)
	}
	return u.EventLog.ReadStream(ctx, stream, from, count, dir)
}

func (u unreadableLane) AppendBatch(ctx context.Context, a iter.Seq[events.StreamAppend]) ([]events.BatchResult, error) {
	return u.EventLog.(events.BatchAppender).AppendBatch(ctx, a)
}

// TestSweep_OneUnreadableLaneFailsAlone: given a lane whose history cannot
// be read, when the restart sweep runs on a handler that has not cached any
// lane, then every other lane is still marked (in the same batch) and the
// sweep says which lane failed: one bad lane does not cost the others (the
// expiry watcher would otherwise run every lane's hook again next pass).
func TestSweep_OneUnreadableLaneFailsAlone(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, idleConfig())
	setup := commands.NewHandler(f.store, idleConfig(), commands.WithClock(f.clock.Now))
	const lanes = 6
	for i := range lanes {
		src := domain.SessionSource{Platform: "telegram", ChatID: fmt.Sprint(i), ChatType: "dm"}
		if _, err := setup.ResolveSession(ctx, commands.ResolveSession{Source: src}); err != nil {
			t.Fatal(err)
		}
	}
	bad := "agent:main:telegram:dm:3"
	log := unreadableLane{EventLog: f.store, stream: events.LaneStream(bad)}
	h := commands.NewHandler(log, idleConfig(), commands.WithClock(f.clock.Now),
		commands.WithDirectory(testfixtures.StoreDirectory{Store: f.store}))
	f.clock.Advance(time.Minute)

	marked, err := h.SuspendRecentlyActive(ctx, commands.SuspendRecentlyActive{MaxAge: time.Hour, CommandID: "boot-2"})

	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("sweep error = %v, want one naming %s", err, bad)
	}
	if len(marked) != lanes-1 || slices.Contains(marked, bad) {
		t.Fatalf("marked %v, want the %d readable lanes", marked, lanes-1)
	}
	for _, k := range marked {
		envs := f.history(t, k)
		if _, ok := envs[len(envs)-1].Event.(events.ResumeMarked); !ok {
			t.Fatalf("lane %s ends with %s, want its resume mark", k, envs[len(envs)-1].Type)
		}
	}
}

// lostBatchAnswers writes every batch and then answers each lane with an
// error, as a store whose answer is lost after the commit would.
type lostBatchAnswers struct{ *sqlite.Store }

func (l lostBatchAnswers) AppendBatch(ctx context.Context, a iter.Seq[events.StreamAppend]) ([]events.BatchResult, error) {
	out, err := l.Store.AppendBatch(ctx, a)
	for i := range out {
		out[i] = events.BatchResult{Err: errors.New("answer lost after the commit")}
	}
	return out, err
}

// TestSweep_FailedBatchDropsItsLanes: given a handler that is its store's
// only writer and has the lanes cached, when a restart sweep's batch is
// written but answered with errors, then the next command on a lane reads
// it again: clearing the mark the sweep wrote clears it, where the lane
// cached before the sweep would have had nothing to clear.
func TestSweep_FailedBatchDropsItsLanes(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, idleConfig())
	h := commands.NewHandler(lostBatchAnswers{f.store}, idleConfig(), commands.WithClock(f.clock.Now),
		commands.WithDirectory(testfixtures.StoreDirectory{Store: f.store}), commands.WithSoleWriter())
	if _, err := h.ResolveSession(ctx, commands.ResolveSession{Source: alice}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.SuspendRecentlyActive(ctx, commands.SuspendRecentlyActive{MaxAge: time.Hour}); err == nil {
		t.Fatal("the sweep answered no error")
	}
	if n := countType[events.ResumeMarked](f.history(t, aliceKey)); n != 1 {
		t.Fatalf("the log holds %d resume marks, want the sweep's one", n)
	}
	_, cleared, err := h.ClearResumePending(ctx, commands.ClearResumePending{Key: aliceKey})
	if err != nil || !cleared {
		t.Fatalf("ClearResumePending = cleared %v, %v; want the sweep's mark cleared (the handler decided on the lane before the sweep)", cleared, err)
	}
}
