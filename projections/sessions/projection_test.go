package sessions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// step is one event of a stuck-loop scenario: on the gateway stream, or on
// the lane stream of lane.
type step struct {
	lane  string
	event events.Event
	// node: a gateway event of that node's stream gateway-<node> (several
	// nodes on one store); "": the single node's "gateway".
	node string
	// gateway: an event of that gateway process's run stream.
	gateway string
}

// runStep is an event of the default gateway process's run stream.
func runStep(e events.Event) step { return step{event: e, gateway: "default"} }

func runStarted(run string) step {
	return runStep(events.GatewayRunStarted{Gateway: "default", RunID: run, LeaseSeconds: 60, LeaseUntil: t0.Add(time.Minute), At: t0})
}

func runLost(run string, lanes ...string) step {
	return runStep(events.GatewayRunLost{RunID: run, Cause: events.RunLostLeaseExpired, OpenLanes: append([]string{}, lanes...), At: t0})
}

func runStopped(run string, lanes ...string) step {
	return runStep(events.GatewayRunStopped{RunID: run, OpenLanes: append([]string{}, lanes...), At: t0})
}

func gw(e events.Event) step { return step{event: e} }

// of moves a gateway step to node's gateway stream.
func of(node string, s step) step {
	s.node = node
	return s
}

func onLane(key string, e events.Event) step { return step{lane: key, event: e} }

// created is the first event of a lane: rows are keyed by the session key it
// carries, so a lane without one would not be a lane the projection knows.
func created(key string) step {
	return onLane(key, events.SessionCreated{SessionKey: key, SessionID: "20260101_000000_0000000" + key[len(key)-1:], Platform: "telegram", ChatType: "dm", At: t0})
}

var (
	laneA = "agent:main:telegram:dm:a"
	laneB = "agent:main:telegram:dm:b"
)

func started() step { return gw(events.GatewayStarted{PID: 1, At: t0}) }

// drained is a drain that ended with lanes still open: timed out, or (no
// lanes) completed.
func drained(lanes ...string) step {
	return gw(events.DrainFinished{TimedOut: len(lanes) > 0, OpenLanes: append([]string{}, lanes...), At: t0})
}

func crashed(lanes ...string) step {
	return gw(events.RunInterrupted{OpenLanes: append([]string{}, lanes...), At: t0})
}

func TestProjection_StuckLoopCounts(t *testing.T) {
	tests := []struct {
		name      string
		given     []step
		want      map[string]int
		wantStuck []string
	}{
		{
			name:      "a lane cut at three consecutive stops reaches the threshold",
			given:     []step{started(), drained(laneA), started(), drained(laneA), started(), crashed(laneA)},
			want:      map[string]int{laneA: 3},
			wantStuck: []string{laneA},
		},
		{
			name:  "a lane not cut at a stop loses its count (Hermes' two-lane sequence)",
			given: []step{started(), drained(laneA, laneB), started(), drained(laneA)},
			want:  map[string]int{laneA: 2},
		},
		{
			name:  "cut at stops 1, 3 and 4, quiet at 2: not stuck",
			given: []step{started(), drained(laneA), started(), drained(laneB), started(), drained(laneA), started(), crashed(laneA)},
			want:  map[string]int{laneA: 2},
		},
		{
			name:  "a completed drain drops every count",
			given: []step{started(), drained(laneA, laneB), started(), drained()},
			want:  map[string]int{},
		},
		{
			name:  "a crash with no open turn drops every count",
			given: []step{started(), crashed(laneA), started(), crashed()},
			want:  map[string]int{},
		},
		{
			name:  "a crash after the drain finished is the stop the drain counted",
			given: []step{started(), drained(laneA), crashed(), started(), drained(laneA), crashed(laneB), started()},
			want:  map[string]int{laneA: 2},
		},
		{
			name:  "a drain that could not see the open turns leaves the counts",
			given: []step{started(), drained(laneA), started(), gw(events.DrainFinished{TimedOut: true, OpenLanes: []string{}, At: t0})},
			want:  map[string]int{laneA: 1},
		},
		{
			name:  "a crash after a drain that could not see the open turns counts them",
			given: []step{started(), drained(laneA), started(), gw(events.DrainFinished{TimedOut: true, OpenLanes: []string{}, At: t0}), crashed(laneA)},
			want:  map[string]int{laneA: 2},
		},
		{
			name: "a successful turn clears its lane's count, a failed one does not",
			given: []step{started(), drained(laneA, laneB),
				onLane(laneA, events.TurnCompleted{TurnID: "t", At: t0}), onLane(laneB, events.TurnCompleted{TurnID: "t", Failed: true, At: t0})},
			want: map[string]int{laneB: 1},
		},
		{
			name:  "a suspension, a reset or a switch clears the lane's count",
			given: []step{created(laneA), created(laneB), started(), drained(laneA, laneB), onLane(laneA, events.Suspended{Reason: events.SuspendStuckLoop, At: t0}), onLane(laneB, events.SessionReset{SessionID: "x", At: t0})},
			want:  map[string]int{},
		},
		{
			name:  "several nodes: a clean stop of one node leaves the counts another node recorded",
			given: []step{of("n1", started()), of("n2", started()), of("n1", drained(laneA)), of("n2", drained())},
			want:  map[string]int{laneA: 1},
		},
		{
			name: "several nodes: each node counts its own consecutive stops",
			given: []step{of("n1", started()), of("n1", drained(laneA)), of("n2", started()), of("n2", drained(laneB)),
				of("n1", started()), of("n1", crashed(laneA)), of("n2", started()), of("n2", drained()), of("n1", started()), of("n1", drained(laneA))},
			want:      map[string]int{laneA: 3},
			wantStuck: []string{laneA},
		},
		{
			name:  "several nodes: one node's counted drain does not hide another node's crash",
			given: []step{of("n1", started()), of("n2", started()), of("n1", drained(laneA)), of("n2", crashed(laneB))},
			want:  map[string]int{laneA: 1, laneB: 1},
		},
		{
			name: "several nodes: a run adopted by another node counts once, whoever records the crash first",
			given: []step{of("n1", started()), of("n1", gw(events.RunAdopted{By: "n2", OpenLanes: []string{laneA}, At: t0})),
				of("n1", crashed(laneA)), of("n1", started()), of("n1", crashed(laneA)), of("n1", gw(events.RunAdopted{By: "n2", OpenLanes: []string{laneA}, At: t0}))},
			want: map[string]int{laneA: 2},
		},
		{
			name: "several nodes: a count belongs to the node that last cut the lane",
			given: []step{of("n1", started()), of("n2", started()), of("n1", drained(laneA)), of("n2", drained(laneA)),
				of("n1", started()), of("n1", drained())},
			want: map[string]int{laneA: 2},
		},
		{
			name: "a gateway process: cut at three consecutive run ends (two losses and a stop) reaches the threshold",
			given: []step{runStarted("r1"), runLost("r1", laneA), runStarted("r2"), runLost("r2", laneA),
				runStarted("r3"), runStopped("r3", laneA)},
			want:      map[string]int{laneA: 3},
			wantStuck: []string{laneA},
		},
		{
			name:  "a gateway process: a stop with no turn open drops the counts it recorded, not hermes' own",
			given: []step{started(), drained(laneB), runStarted("r1"), runLost("r1", laneA), runStarted("r2"), runStopped("r2")},
			want:  map[string]int{laneB: 1},
		},
		{
			name:  "a gateway process: hermes' own completed drain leaves the gateway's counts",
			given: []step{runStarted("r1"), runLost("r1", laneA), started(), drained()},
			want:  map[string]int{laneA: 1},
		},
		{
			name:  "a gateway process: a run lost twice counts once",
			given: []step{runStarted("r1"), runLost("r1", laneA), runLost("r1", laneA)},
			want:  map[string]int{laneA: 1},
		},
		{
			name:      "a lane listed twice counts once",
			given:     []step{started(), drained(laneA, laneA), started(), crashed(laneA, laneA)},
			want:      map[string]int{laneA: 2},
			wantStuck: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t)
			countsPath := filepath.Join(w.dir, ".restart_failure_counts")
			p := w.open(t, "lanes.db", sessions.Exports{RestartFailureCounts: countsPath})
			for i, s := range tt.given {
				stream := events.GatewayStreamOf(s.node)
				if s.lane != "" {
					stream = events.LaneStream(s.lane)
				}
				if s.gateway != "" {
					stream = events.GatewayRunStream(s.gateway)
				}
				if _, err := w.store.Append(ctx, stream, events.AnyVersion(), []events.Proposed{{ID: fmt.Sprintf("e%d", i), Event: s.event}}); err != nil {
					t.Fatal(err)
				}
			}
			// One event per batch: the counts must not depend on batching.
			all, err := w.store.ReadAll(ctx, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for i := range all {
				if err := p.Apply(ctx, all[i:i+1]); err != nil {
					t.Fatal(err)
				}
			}
			got, err := p.RestartFailures(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("restart failures (-want +got):\n%s", diff)
			}
			stuck, err := p.StuckLanes(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantStuck, stuck); diff != "" {
				t.Errorf("StuckLanes(3) (-want +got):\n%s", diff)
			}
			fresh := w.open(t, "fresh.db", sessions.Exports{})
			if err := fresh.Apply(ctx, all); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(dump(t, fresh), dump(t, p)); diff != "" {
				t.Errorf("one batch differs from one event per batch (-one batch +per event):\n%s", diff)
			}
		})
	}
}

func TestProjection_StuckLoopThresholdAndExport(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	countsPath := filepath.Join(w.dir, ".restart_failure_counts")
	p := w.open(t, "lanes.db", sessions.Exports{RestartFailureCounts: countsPath})
	runner := projections.NewRunner(w.store, p)
	for i, s := range []step{started(), drained(laneA, laneB), started(), crashed(laneA, laneB), started(), drained(laneA)} {
		if _, err := w.store.Append(ctx, events.GatewayStream, events.AnyVersion(), []events.Proposed{{ID: fmt.Sprintf("e%d", i), Event: s.event}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := runner.CatchUp(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for threshold, want := range map[int][]string{1: {laneA}, 3: {laneA}, 4: nil} {
		if stuck, _ := p.StuckLanes(ctx, threshold); !slices.Equal(stuck, want) {
			t.Errorf("StuckLanes(%d) = %v, want %v", threshold, stuck, want)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(countsPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"agent:main:telegram:dm:a":3}` {
		t.Fatalf(".restart_failure_counts = %s, want Hermes' compact map of the counted lanes", raw)
	}
	// A clean stop drops the last count, and the file goes away.
	if _, err := w.store.Append(ctx, events.GatewayStream, events.AnyVersion(), []events.Proposed{{ID: "clean", Event: drained().event}}); err != nil {
		t.Fatal(err)
	}
	if err := runner.CatchUp(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(countsPath); !os.IsNotExist(err) {
		t.Fatalf(".restart_failure_counts after a clean stop: %v, want no file", err)
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
		all := randomHistory(ctx, rt, w)

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

// randomHistory drives the handler with random commands and gateway events
// and returns the log.
func randomHistory(ctx context.Context, rt *rapid.T, w *world) []events.Envelope {
	chats := []string{"1", "2", "3"}
	steps := rapid.IntRange(1, 40).Draw(rt, "steps")
	for range steps {
		w.clock.Advance(time.Duration(rapid.Int64Range(0, int64(2*time.Hour)).Draw(rt, "advance")))
		chat := rapid.SampledFrom(chats).Draw(rt, "chat")
		key := "agent:main:telegram:dm:" + chat
		var err error
		switch rapid.IntRange(0, 8).Draw(rt, "op") {
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
		case 8:
			var tokens *int64
			if n := rapid.Int64Range(-1, 5000).Draw(rt, "last_prompt_tokens"); n >= 0 {
				tokens = &n
			}
			_, err = w.handler.UpdateSession(ctx, commands.UpdateSession{Key: key, LastPromptTokens: tokens})
		case 7:
			var e events.Event
			cut := rapid.SliceOfNDistinct(rapid.SampledFrom(chats), 0, 3, rapid.ID[string]).Draw(rt, "cut")
			lanes := []string{}
			for _, c := range cut {
				lanes = append(lanes, "agent:main:telegram:dm:"+c)
			}
			switch rapid.IntRange(0, 2).Draw(rt, "gateway") {
			case 0:
				e = events.GatewayStarted{At: w.clock.Now()}
			case 1:
				e = events.DrainFinished{TimedOut: rapid.Bool().Draw(rt, "timed_out"), OpenLanes: lanes, At: w.clock.Now()}
			case 2:
				e = events.RunInterrupted{OpenLanes: lanes, At: w.clock.Now()}
			}
			_, err = w.store.Append(ctx, events.GatewayStream, events.AnyVersion(), []events.Proposed{{
				ID: fmt.Sprintf("g-%d", w.clock.Now().UnixNano()), Event: e,
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
	return all
}

func isRefusal(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "not found") || strings.Contains(err.Error(), "suspended") ||
		errors.Is(err, domain.ErrTurnBusy))
}

// TestProjection_GatewayRuns: the runs of a gateway process, folded from
// its run stream: a heartbeat moves the lease, an end records the state,
// the cut lanes and the cause; the running ones are listed apart.
func TestProjection_GatewayRuns(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	p := w.open(t, "lanes.db", sessions.Exports{})
	stream := events.GatewayRunStream("default")
	for i, e := range []events.Event{
		events.GatewayRunStarted{Gateway: "default", RunID: "r1", PID: 10, Host: "h", LeaseSeconds: 60, LeaseUntil: t0.Add(time.Minute), At: t0},
		events.LeaseRenewed{Holder: "r1", Until: t0.Add(2 * time.Minute), At: t0.Add(time.Minute)},
		events.GatewayRunLost{RunID: "r1", Cause: events.RunLostRestarted, LeaseUntil: t0.Add(2 * time.Minute), OpenLanes: []string{laneA}, At: t0.Add(90 * time.Second)},
		events.GatewayRunStarted{Gateway: "default", RunID: "r2", PID: 11, Host: "h", LeaseSeconds: 60, LeaseUntil: t0.Add(150 * time.Second), At: t0.Add(90 * time.Second)},
	} {
		if _, err := w.store.Append(ctx, stream, events.AnyVersion(), []events.Proposed{{ID: fmt.Sprintf("r%d", i), Event: e}}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := w.store.ReadAll(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(ctx, all); err != nil {
		t.Fatal(err)
	}
	runs, err := p.GatewayRuns(ctx, "default", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.GatewayRun{
		{Gateway: "default", RunID: "r2", PID: 11, Host: "h", StartedAt: t0.Add(90 * time.Second), LeaseSeconds: 60, LeaseUntil: t0.Add(150 * time.Second), State: domain.RunRunning, Position: 4},
		{Gateway: "default", RunID: "r1", PID: 10, Host: "h", StartedAt: t0, LeaseSeconds: 60, LeaseUntil: t0.Add(2 * time.Minute), State: domain.RunLost, Position: 1,
			EndedAt: t0.Add(90 * time.Second), Cause: events.RunLostRestarted, Cut: []string{laneA}},
	}
	if diff := cmp.Diff(want, runs); diff != "" {
		t.Errorf("GatewayRuns (-want +got):\n%s", diff)
	}
	running, err := p.RunningGatewayRuns(ctx)
	if err != nil || len(running) != 1 || running[0].RunID != "r2" {
		t.Errorf("RunningGatewayRuns = %+v, %v; want r2", running, err)
	}
	if used, _ := p.GatewayRunUsed(ctx, "default", "r1"); !used {
		t.Errorf("GatewayRunUsed(r1) = false, want true")
	}
	if n, _ := p.RestartFailureCount(ctx, laneA); n != 1 {
		t.Errorf("RestartFailureCount(laneA) = %d, want 1", n)
	}
}
