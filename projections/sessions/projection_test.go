package sessions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"hermes/adapters/eventstore/sqlite"
	"hermes/commands"
	"hermes/domain"
	"hermes/events"
	"hermes/projections"
	"hermes/projections/sessions"
	"hermes/testfixtures"
)

var t0 = testfixtures.Date(2026, 5, 9, 10, 0, 0, 0)

type world struct {
	dir     string
	store   *sqlite.Store
	clock   *testfixtures.Clock
	handler *commands.Handler
}

func newWorld(t *testing.T) *world {
	t.Helper()
	dir := t.TempDir()
	store, err := sqlite.Open(filepath.Join(dir, "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clock := testfixtures.NewClock(t0)
	cfg := commands.DefaultConfig()
	cfg.Policies.Default = domain.ResetPolicy{Mode: domain.ResetIdle, IdleMinutes: 60}
	h := commands.NewHandler(store, cfg, commands.WithClock(clock.Now), commands.WithDirectory(testfixtures.StoreDirectory{Store: store}))
	return &world{dir: dir, store: store, clock: clock, handler: h}
}

func (w *world) open(t *testing.T, name string, exports sessions.Exports) *sessions.Projection {
	t.Helper()
	p, err := sessions.Open(filepath.Join(w.dir, name), exports)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func src(chat string) domain.SessionSource {
	return domain.SessionSource{Platform: "telegram", ChatID: chat, ChatType: "dm", ChatName: "chat " + chat, UserID: "u" + chat}
}

func dump(t *testing.T, p *sessions.Projection) string {
	t.Helper()
	var b bytes.Buffer
	if err := p.Dump(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestProjection_FollowsTheHandler(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	p := w.open(t, "lanes.db", sessions.Exports{
		SessionsJSON:         filepath.Join(w.dir, "sessions", "sessions.json"),
		RestartFailureCounts: filepath.Join(w.dir, ".restart_failure_counts"),
	})
	runner := projections.NewRunner(w.store, p)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runner.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	r1, err := w.handler.ResolveSession(ctx, commands.ResolveSession{Source: src("1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.handler.StartTurn(ctx, commands.StartTurn{Key: r1.Lane.SessionKey, TurnID: "t1"}); err != nil {
		t.Fatal(err)
	}
	last, err := w.handler.CompleteTurn(ctx, commands.CompleteTurn{Key: r1.Lane.SessionKey, Outcome: domain.TurnOutcome{InputTokens: 5, OutputTokens: 6}})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.WaitFor(ctx, last.Position); err != nil {
		t.Fatal(err)
	}
	got, err := p.Lane(ctx, r1.Lane.SessionKey)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(last.Lane, got.Lane); diff != "" || got.Version != last.Version {
		t.Fatalf("read model lane differs from the decided lane (v%d vs v%d):\n%s", got.Version, last.Version, diff)
	}
	byID, err := p.BySessionID(ctx, r1.Lane.SessionID)
	if err != nil || byID.Lane.SessionKey != r1.Lane.SessionKey {
		t.Fatalf("BySessionID = %+v, %v", byID, err)
	}

	// A second lane, later: List orders by activity and filters by it.
	w.clock.Advance(30 * time.Minute)
	r2, err := w.handler.ResolveSession(ctx, commands.ResolveSession{Source: src("2")})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.WaitFor(ctx, r2.Position); err != nil {
		t.Fatal(err)
	}
	all, _ := p.List(ctx, time.Time{})
	if len(all) != 2 || all[0].Lane.SessionKey != r2.Lane.SessionKey {
		t.Fatalf("List = %v, want lane 2 first", keys(all))
	}
	recent, _ := p.List(ctx, w.clock.Now().Add(-10*time.Minute))
	if len(recent) != 1 || recent[0].Lane.SessionKey != r2.Lane.SessionKey {
		t.Fatalf("List(active 10 min) = %v, want lane 2 only", keys(recent))
	}

	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(w.dir, "sessions", "sessions.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(raw), "{\n  \"_README\": \"Gateway routing index ONLY:") {
		t.Fatalf("sessions.json does not start with the _README sentinel:\n%.200s", raw)
	}
	var parsed map[string]json.RawMessage
	if err := json.Unmarshal(raw, &parsed); err != nil {
		t.Fatalf("sessions.json is not JSON: %v", err)
	}
	var e1 map[string]any
	if err := json.Unmarshal(parsed[r1.Lane.SessionKey], &e1); err != nil {
		t.Fatal(err)
	}
	if e1["session_id"] != r1.Lane.SessionID || e1["total_tokens"] != float64(11) || e1["created_at"] != "2026-05-09T10:00:00" {
		t.Fatalf("sessions.json entry = %v", e1)
	}
	if info, _ := os.Stat(filepath.Join(w.dir, "sessions", "sessions.json")); info.Mode().Perm() != 0o600 {
		t.Fatalf("sessions.json mode = %v, want 0600", info.Mode().Perm())
	}
}

func keys(rows []sessions.Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Lane.SessionKey)
	}
	return out
}

func TestProjection_StuckLoopCounters(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	countsPath := filepath.Join(w.dir, ".restart_failure_counts")
	p := w.open(t, "lanes.db", sessions.Exports{RestartFailureCounts: countsPath})
	runner := projections.NewRunner(w.store, p)

	a, _ := w.handler.ResolveSession(ctx, commands.ResolveSession{Source: src("a")})
	b, _ := w.handler.ResolveSession(ctx, commands.ResolveSession{Source: src("b")})
	crash := func(lanes ...string) {
		t.Helper()
		_, err := w.store.Append(ctx, events.GatewayStream, events.AnyVersion(), []events.Proposed{{
			ID: fmt.Sprintf("crash-%d", w.clock.Now().UnixNano()), Event: events.RunInterrupted{OpenLanes: lanes, At: w.clock.Advance(time.Second)},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	crash(a.Lane.SessionKey, b.Lane.SessionKey)
	crash(a.Lane.SessionKey)
	if _, err := w.handler.CompleteTurn(ctx, commands.CompleteTurn{Key: b.Lane.SessionKey, Outcome: domain.TurnOutcome{}}); err != nil {
		t.Fatal(err)
	}
	crash(a.Lane.SessionKey, b.Lane.SessionKey)
	if err := runner.CatchUp(ctx, nil); err != nil {
		t.Fatal(err)
	}
	counts, _ := p.RestartFailures(ctx)
	want := map[string]int{a.Lane.SessionKey: 3, b.Lane.SessionKey: 1}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Fatalf("restart failures (-want +got):\n%s", diff)
	}
	stuck, _ := p.StuckLanes(ctx)
	if len(stuck) != 1 || stuck[0] != a.Lane.SessionKey {
		t.Fatalf("StuckLanes = %v, want [%s]", stuck, a.Lane.SessionKey)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(countsPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"agent:main:telegram:dm:a":3,"agent:main:telegram:dm:b":1}` {
		t.Fatalf(".restart_failure_counts = %s", raw)
	}
	// The escalation's suspension clears the count.
	if _, err := w.handler.SuspendSession(ctx, commands.SuspendSession{Key: a.Lane.SessionKey, Reason: events.SuspendStuckLoop}); err != nil {
		t.Fatal(err)
	}
	if err := runner.CatchUp(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if counts, _ := p.RestartFailures(ctx); counts[a.Lane.SessionKey] != 0 {
		t.Fatalf("count after stuck-loop suspension = %d, want 0", counts[a.Lane.SessionKey])
	}
}

func TestProjection_ResumesFromCheckpointAndRebuildsOnNameChange(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	path := filepath.Join(w.dir, "lanes.db")
	for i := range 5 {
		if _, err := w.handler.ResolveSession(ctx, commands.ResolveSession{Source: src(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := sessions.Open(path, sessions.Exports{})
	if err != nil {
		t.Fatal(err)
	}
	if err := projections.NewRunner(w.store, p).CatchUp(ctx, nil); err != nil {
		t.Fatal(err)
	}
	p.Close()
	head, _ := w.store.Head(ctx)

	w.clock.Advance(time.Minute)
	if _, err := w.handler.ResolveSession(ctx, commands.ResolveSession{Source: src("9")}); err != nil {
		t.Fatal(err)
	}
	p = w.open(t, "lanes.db", sessions.Exports{})
	cp, _ := p.Checkpoint(ctx)
	if cp != head {
		t.Fatalf("checkpoint after reopen = %d, want %d", cp, head)
	}
	var applied []uint64
	if err := projections.NewRunner(w.store, p).CatchUp(ctx, func(done, _ uint64) { applied = append(applied, done) }); err != nil {
		t.Fatal(err)
	}
	if len(applied) != 1 || applied[0] != head+1 {
		t.Fatalf("resumed catch-up applied up to %v, want one batch ending at %d", applied, head+1)
	}
	if n, _ := p.Count(ctx); n != 6 {
		t.Fatalf("Count = %d, want 6", n)
	}
}

// TestProjection_IncrementalEqualsRebuild: for random histories, projecting
// incrementally in random batch sizes, with the projection closed and
// reopened at random points and batches redelivered, ends identical to a
// from-scratch rebuild.
func TestProjection_IncrementalEqualsRebuild(t *testing.T) {
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		w := newWorld(t)
		chats := []string{"1", "2", "3"}
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for range steps {
			w.clock.Advance(time.Duration(rapid.Int64Range(0, int64(2*time.Hour)).Draw(rt, "advance")))
			chat := rapid.SampledFrom(chats).Draw(rt, "chat")
			key := "agent:main:telegram:dm:" + chat
			var err error
			switch rapid.IntRange(0, 7).Draw(rt, "op") {
			case 0, 1:
				_, err = w.handler.ResolveSession(ctx, commands.ResolveSession{Source: src(chat)})
			case 2:
				_, _, err = w.handler.StartTurn(ctx, commands.StartTurn{Key: key})
			case 3:
				_, err = w.handler.CompleteTurn(ctx, commands.CompleteTurn{Key: key, Outcome: domain.TurnOutcome{InputTokens: 3, Failed: rapid.Bool().Draw(rt, "failed")}})
			case 4:
				_, err = w.handler.SuspendSession(ctx, commands.SuspendSession{Key: key, Reason: events.SuspendStopCommand})
			case 5:
				_, _, err = w.handler.MarkResumePending(ctx, commands.MarkResumePending{Key: key, Reason: events.ResumeShutdownTimeout})
			case 6:
				_, err = w.handler.PruneOldEntries(ctx, commands.PruneOldEntries{MaxAge: 3 * time.Hour})
			case 7:
				_, err = w.store.Append(ctx, events.GatewayStream, events.AnyVersion(), []events.Proposed{{
					ID: fmt.Sprintf("g-%d", w.clock.Now().UnixNano()), Event: events.RunInterrupted{OpenLanes: []string{key}, At: w.clock.Now()},
				}})
			}
			if err != nil && !isRefusal(err) {
				rt.Fatalf("step: %v", err)
			}
		}
		all, err := w.store.ReadAll(ctx, 0, 100000)
		if err != nil {
			rt.Fatal(err)
		}

		fresh := w.open(t, fmt.Sprintf("fresh-%d.db", time.Now().UnixNano()), sessions.Exports{})
		if err := fresh.Apply(ctx, all); err != nil {
			rt.Fatal(err)
		}

		path := filepath.Join(w.dir, fmt.Sprintf("inc-%d.db", time.Now().UnixNano()))
		inc, err := sessions.Open(path, sessions.Exports{})
		if err != nil {
			rt.Fatal(err)
		}
		for i := 0; i < len(all); {
			n := rapid.IntRange(1, 7).Draw(rt, "batch")
			end := min(i+n, len(all))
			from := i
			if rapid.IntRange(0, 3).Draw(rt, "redeliver") == 0 {
				from = max(0, i-rapid.IntRange(1, 5).Draw(rt, "back"))
			}
			if err := inc.Apply(ctx, all[from:end]); err != nil {
				rt.Fatal(err)
			}
			i = end
			if rapid.IntRange(0, 4).Draw(rt, "restart") == 0 {
				inc.Close()
				if inc, err = sessions.Open(path, sessions.Exports{}); err != nil {
					rt.Fatal(err)
				}
			}
		}
		defer inc.Close()
		if diff := cmp.Diff(dump(t, fresh), dump(t, inc)); diff != "" {
			rt.Fatalf("incremental projection differs from the rebuild (-rebuild +incremental):\n%s", diff)
		}
	})
}

func isRefusal(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "not found") || strings.Contains(err.Error(), "suspended"))
}
