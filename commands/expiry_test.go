package commands_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hermes/adapters/eventstore/sqlite"
	"hermes/commands"
	"hermes/domain"
	"hermes/events"
	"hermes/testfixtures"
)

// expiryWorld is a real handler over a real store file, with a manual clock.
type expiryWorld struct {
	store   *sqlite.Store
	clock   *testfixtures.Clock
	handler *commands.Handler
	dir     testfixtures.StoreDirectory
}

func newExpiryWorld(t *testing.T, policy domain.ResetPolicy) *expiryWorld {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clock := testfixtures.NewClock(t0)
	cfg := commands.DefaultConfig()
	cfg.Policies.Default = policy
	var n int
	var mu sync.Mutex
	dir := testfixtures.StoreDirectory{Store: store}
	h := commands.NewHandler(store, cfg,
		commands.WithClock(clock.Now),
		commands.WithEntropy(func() string {
			mu.Lock()
			defer mu.Unlock()
			n++
			return fmt.Sprintf("%08x", n)
		}),
		commands.WithDirectory(dir))
	return &expiryWorld{store: store, clock: clock, handler: h, dir: dir}
}

func idlePolicy(minutes int) domain.ResetPolicy {
	return domain.ResetPolicy{Mode: domain.ResetIdle, IdleMinutes: minutes, Notify: true}
}

// lane creates the lane of chat on platform and returns its key and session.
func (w *expiryWorld) lane(t *testing.T, platform, chat string) (string, string) {
	t.Helper()
	r, err := w.handler.ResolveSession(context.Background(), commands.ResolveSession{
		Source: domain.SessionSource{Platform: platform, ChatID: chat, ChatType: "dm"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r.Lane.SessionKey, r.Lane.SessionID
}

func (w *expiryWorld) head(t *testing.T) uint64 {
	t.Helper()
	h, err := w.store.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (w *expiryWorld) finalizations(t *testing.T, key string) []events.ExpiryFinalized {
	t.Helper()
	envs, err := w.store.ReadStream(context.Background(), events.LaneStream(key), 1, 10000, events.Forwards)
	if err != nil {
		t.Fatal(err)
	}
	var out []events.ExpiryFinalized
	for _, env := range envs {
		if e, ok := env.Event.(events.ExpiryFinalized); ok {
			out = append(out, e)
		}
	}
	return out
}

// recordingHook records finalize calls and fails for the keys in fail
// (a count of failures left; -1: always).
type recordingHook struct {
	mu    sync.Mutex
	calls []commands.FinalizeRequest
	fail  map[string]int
}

func (h *recordingHook) Finalize(_ context.Context, r commands.FinalizeRequest) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, r)
	if n, ok := h.fail[r.SessionKey]; ok && n != 0 {
		if n > 0 {
			h.fail[r.SessionKey] = n - 1
		}
		return errors.New("plugin exploded")
	}
	return nil
}

func (h *recordingHook) callsFor(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.calls {
		if c.SessionKey == key {
			n++
		}
	}
	return n
}

// logLines collects what the watcher logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) log(level slog.Level, msg string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprint(level, " ", msg, " ", args))
}

func (l *logLines) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

func sorted(xs []string) []string { return slices.Sorted(slices.Values(xs)) }

func TestExpiryWatcher_FinalizesIdleLanesOnce(t *testing.T) {
	ctx := context.Background()
	w := newExpiryWorld(t, idlePolicy(60))
	tg, tgSession := w.lane(t, "telegram", "1")
	dc, _ := w.lane(t, "discord", "2")
	busy, _ := w.lane(t, "telegram", "3")
	if _, err := w.handler.SetActiveProcesses(ctx, commands.SetActiveProcesses{Key: busy, Count: 1}); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(30 * time.Minute)
	fresh, _ := w.lane(t, "slack", "4")

	hook := &recordingHook{}
	logs := &logLines{}
	watcher := commands.NewExpiryWatcher(w.handler, commands.ExpiryConfig{Hook: hook, Log: logs.log})

	// Nothing is idle yet.
	rep, err := watcher.Pass(ctx)
	if err != nil || len(rep.Expired) != 0 {
		t.Fatalf("Pass at +30m = %+v, %v; want nothing expired", rep, err)
	}

	w.clock.Advance(31 * time.Minute) // tg, dc, busy idle 61 min; fresh 31 min
	rep, err = watcher.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sorted([]string{tg, dc}), sorted(rep.Finalized)); diff != "" {
		t.Fatalf("Pass.Finalized (-want +got):\n%s", diff)
	}
	if len(rep.Forced) != 0 || len(rep.Retrying) != 0 {
		t.Fatalf("Pass = %+v, want no forced or retrying lanes", rep)
	}
	want := commands.FinalizeRequest{SessionKey: tg, SessionID: tgSession, Platform: "telegram", Reason: "session_expired"}
	if !slices.Contains(hook.calls, want) {
		t.Fatalf("hook calls = %+v, want one of them %+v", hook.calls, want)
	}
	for _, key := range []string{busy, fresh} {
		if got := w.finalizations(t, key); len(got) != 0 || hook.callsFor(key) != 0 {
			t.Fatalf("lane %s: finalized %v, hook calls %d; want neither", key, got, hook.callsFor(key))
		}
	}
	if got := w.finalizations(t, tg); len(got) != 1 || got[0].Forced || got[0].SessionID != tgSession {
		t.Fatalf("finalizations of %s = %+v, want one unforced", tg, got)
	}
	if !logs.contains("Session expiry: 2 sessions to finalize (discord:1, telegram:1)") {
		t.Fatalf("log = %q, want the Hermes summary line", logs.lines)
	}

	// A second pass, and one much later, append nothing and call no hook
	// again; the lane with live processes stays untouched however long.
	head := w.head(t)
	calls := len(hook.calls)
	for _, d := range []time.Duration{0, 72 * time.Hour} {
		w.clock.Advance(d)
		rep, err = watcher.Pass(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d == 0 && (len(rep.Expired) != 0 || w.head(t) != head || len(hook.calls) != calls) {
			t.Fatalf("second pass = %+v (head %d→%d, hook calls %d→%d); want nothing", rep, head, w.head(t), calls, len(hook.calls))
		}
	}
	if diff := cmp.Diff([]string{fresh}, rep.Finalized); diff != "" {
		t.Fatalf("pass at +3d Finalized (-want +got):\n%s", diff)
	}
	if got := w.finalizations(t, busy); len(got) != 0 {
		t.Fatalf("lane with live processes finalized: %+v", got)
	}
}

func TestExpiryWatcher_FailingHookRetriedThenForced(t *testing.T) {
	ctx := context.Background()
	w := newExpiryWorld(t, idlePolicy(60))
	stuck, stuckSession := w.lane(t, "telegram", "1")
	flaky, _ := w.lane(t, "telegram", "2")
	hook := &recordingHook{fail: map[string]int{stuck: -1, flaky: 1}}
	logs := &logLines{}
	watcher := commands.NewExpiryWatcher(w.handler, commands.ExpiryConfig{Hook: hook, Log: logs.log})
	w.clock.Advance(2 * time.Hour)

	type passWant struct{ finalized, forced, retrying []string }
	for i, want := range []passWant{
		{retrying: []string{stuck, flaky}},
		{finalized: []string{flaky}, retrying: []string{stuck}},
		{forced: []string{stuck}},
		{},
	} {
		rep, err := watcher.Pass(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := passWant{finalized: rep.Finalized, forced: rep.Forced, retrying: rep.Retrying}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(passWant{}), cmp.Transformer("sort", sorted)); diff != "" {
			t.Fatalf("pass %d (-want +got):\n%s", i+1, diff)
		}
		w.clock.Advance(5 * time.Minute)
	}
	if n := hook.callsFor(stuck); n != commands.MaxFinalizeRetries {
		t.Fatalf("hook called %d times for the failing lane, want %d", n, commands.MaxFinalizeRetries)
	}
	got := w.finalizations(t, stuck)
	if len(got) != 1 || !got[0].Forced || got[0].SessionID != stuckSession {
		t.Fatalf("finalizations of the failing lane = %+v, want one forced", got)
	}
	if f := w.finalizations(t, flaky); len(f) != 1 || f[0].Forced {
		t.Fatalf("finalizations of the flaky lane = %+v, want one unforced", f)
	}
	if !logs.contains("Marking as finalized to prevent infinite retry loop.") {
		t.Fatalf("log = %q, want the forced-finalize warning", logs.lines)
	}
}

func TestExpiryWatcher_PrunesEntriesHourly(t *testing.T) {
	ctx := context.Background()
	w := newExpiryWorld(t, domain.ResetPolicy{Mode: domain.ResetNone})
	old, _ := w.lane(t, "telegram", "1")
	suspended, _ := w.lane(t, "telegram", "2")
	if _, err := w.handler.SuspendSession(ctx, commands.SuspendSession{Key: suspended, Reason: events.SuspendStopCommand}); err != nil {
		t.Fatal(err)
	}
	busy, _ := w.lane(t, "telegram", "3")
	if _, err := w.handler.SetActiveProcesses(ctx, commands.SetActiveProcesses{Key: busy, Count: 2}); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Hour)
	later, _ := w.lane(t, "telegram", "4") // updated at t0+1h

	watcher := commands.NewExpiryWatcher(w.handler, commands.ExpiryConfig{SessionStoreMaxAge: 24 * time.Hour})
	step := func(to time.Duration, wantRan bool, want []string) {
		t.Helper()
		w.clock.Set(t0.Add(to))
		rep, err := watcher.Pass(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.EntriesPruned != wantRan || !cmp.Equal(sorted(rep.PrunedEntries), sorted(want), cmpEmpty) {
			t.Fatalf("pass at t0+%v: pruned ran %v, keys %v; want ran %v, keys %v", to, rep.EntriesPruned, rep.PrunedEntries, wantRan, want)
		}
	}
	// The first pass always prunes: the old lane goes; the suspended one
	// and the one with live processes stay however old; later is not old.
	step(24*time.Hour+30*time.Minute, true, []string{old})
	// Later is old by now, but the last prune was 45 minutes ago.
	step(25*time.Hour+15*time.Minute, false, nil)
	// An hour after the last prune.
	step(25*time.Hour+30*time.Minute, true, []string{later})
	step(100*24*time.Hour, true, nil)

	for _, key := range []string{suspended, busy} {
		l, _, err := w.handler.Lane(ctx, key)
		if err != nil || !l.Exists() {
			t.Fatalf("lane %s = %+v, %v; want it kept", key, l, err)
		}
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })

func TestExpiryWatcher_NoEntryPruneWhenDisabled(t *testing.T) {
	ctx := context.Background()
	w := newExpiryWorld(t, domain.ResetPolicy{Mode: domain.ResetNone})
	key, _ := w.lane(t, "telegram", "1")
	watcher := commands.NewExpiryWatcher(w.handler, commands.ExpiryConfig{})
	w.clock.Advance(1000 * 24 * time.Hour)
	rep, err := watcher.Pass(ctx)
	if err != nil || rep.EntriesPruned || len(rep.PrunedEntries) != 0 {
		t.Fatalf("Pass = %+v, %v; want no pruning with session_store_max_age_days 0", rep, err)
	}
	if l, _, _ := w.handler.Lane(ctx, key); !l.Exists() {
		t.Fatalf("lane pruned with pruning disabled")
	}
}

// fakePruner lists fixed sessions as prunable and counts vacuums.
type fakePruner struct {
	mu        sync.Mutex
	prunable  []string
	olderThan []time.Duration
	vacuums   int
}

func (p *fakePruner) PrunableSessions(_ context.Context, olderThan time.Duration, source string, _ time.Time) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.olderThan = append(p.olderThan, olderThan)
	out := p.prunable
	p.prunable = nil // deleted now
	return out, nil
}

func (p *fakePruner) Vacuum(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.vacuums++
	return nil
}

// existsIndex says every session exists.
type existsIndex struct{}

func (existsIndex) SessionExists(context.Context, string) (bool, error)   { return true, nil }
func (existsIndex) TitleOwner(context.Context, string) (string, error)    { return "", nil }
func (existsIndex) LaneOfSession(context.Context, string) (string, error) { return "", nil }
func (existsIndex) SessionTotals(context.Context, string) (commands.SessionTotals, error) {
	return commands.SessionTotals{}, nil
}
func (m *memoryPruneLog) LastAutoPrune(context.Context) (time.Time, error) { return m.last, nil }
func (m *memoryPruneLog) RecordAutoPrune(_ context.Context, r commands.AutoPruneRun) error {
	m.last = r.At
	m.runs = append(m.runs, r)
	return nil
}

// memoryPruneLog stands for a durable AutoPruneLog that outlives watchers.
type memoryPruneLog struct {
	last time.Time
	runs []commands.AutoPruneRun
}

func TestExpiryWatcher_AutoPrunesTranscripts(t *testing.T) {
	ctx := context.Background()
	w := newExpiryWorld(t, domain.ResetPolicy{Mode: domain.ResetNone})
	pruner := &fakePruner{prunable: []string{"20260101_000000_aaaaaaaa", "20260102_000000_bbbbbbbb"}}
	durable := &memoryPruneLog{}
	cfg := commands.ExpiryConfig{
		AutoPrune:            true,
		Retention:            90 * 24 * time.Hour,
		AutoPruneMinInterval: 24 * time.Hour,
		VacuumAfterPrune:     true,
		Pruner:               pruner,
		Transcripts:          w.handler.Transcripts(existsIndex{}),
		AutoPruneLog:         durable,
	}
	watcher := commands.NewExpiryWatcher(w.handler, cfg)

	rep, err := watcher.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := &commands.AutoPruneRun{At: t0, Pruned: 2, Vacuumed: true}
	if diff := cmp.Diff(want, rep.AutoPrune); diff != "" {
		t.Fatalf("first pass AutoPrune (-want +got):\n%s", diff)
	}
	for _, id := range []string{"20260101_000000_aaaaaaaa", "20260102_000000_bbbbbbbb"} {
		envs, err := w.store.ReadStream(ctx, events.TranscriptStream(id), 1, 10, events.Forwards)
		if err != nil || len(envs) != 2 {
			t.Fatalf("transcript %s = %v, %v; want a deletion and its erasure", id, envs, err)
		}
		if e, ok := envs[0].Event.(events.TranscriptDeleted); !ok || e.Reason != events.DeletePruned {
			t.Fatalf("transcript %s event = %+v, want deleted with reason pruned", id, envs[0].Event)
		}
		if e, ok := envs[1].Event.(events.TranscriptErased); !ok || e.Reason != events.ErasureRetention || e.Scope != events.EraseTranscript {
			t.Fatalf("transcript %s event = %+v, want erased for retention", id, envs[1].Event)
		}
	}
	if pruner.olderThan[0] != 90*24*time.Hour {
		t.Fatalf("PrunableSessions olderThan = %v, want the retention", pruner.olderThan)
	}

	// Within the interval nothing runs, not even after a restart that
	// reads the durable log.
	w.clock.Advance(23 * time.Hour)
	if rep, err = watcher.Pass(ctx); err != nil || rep.AutoPrune != nil {
		t.Fatalf("pass at +23h AutoPrune = %+v, %v; want none", rep.AutoPrune, err)
	}
	restarted := commands.NewExpiryWatcher(w.handler, cfg)
	if rep, err = restarted.Pass(ctx); err != nil || rep.AutoPrune != nil {
		t.Fatalf("restarted pass at +23h AutoPrune = %+v, %v; want none", rep.AutoPrune, err)
	}

	// Once the interval is over it runs again; with nothing to prune it
	// does not vacuum, and the run is recorded all the same.
	w.clock.Advance(time.Hour)
	rep, err = restarted.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&commands.AutoPruneRun{At: t0.Add(24 * time.Hour)}, rep.AutoPrune); diff != "" {
		t.Fatalf("pass at +24h AutoPrune (-want +got):\n%s", diff)
	}
	if pruner.vacuums != 1 || len(durable.runs) != 2 {
		t.Fatalf("vacuums %d, recorded runs %d; want 1 and 2", pruner.vacuums, len(durable.runs))
	}

	// Without a durable log, a fresh watcher (a restart) prunes on its
	// first pass: the documented trade-off of keeping it in memory.
	cfg.AutoPruneLog = nil
	w.clock.Advance(time.Hour)
	if rep, _ := commands.NewExpiryWatcher(w.handler, cfg).Pass(ctx); rep.AutoPrune == nil {
		t.Fatalf("in-memory watcher's first pass did not auto-prune")
	}

	// Off: never.
	cfg.AutoPrune = false
	if rep, _ := commands.NewExpiryWatcher(w.handler, cfg).Pass(ctx); rep.AutoPrune != nil {
		t.Fatalf("auto-prune ran with sessions.auto_prune off")
	}
}

func TestExpiryWatcher_RunOnClockTicks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newExpiryWorld(t, idlePolicy(60))
	key, _ := w.lane(t, "telegram", "1")
	watcher := commands.NewExpiryWatcher(w.handler, commands.ExpiryConfig{})
	ticks := commands.ClockTicks(ctx, w.clock.Now, 5*time.Minute, time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- watcher.Run(ctx, ticks) }()

	w.clock.Advance(61 * time.Minute)
	// The pass runs on another goroutine: wait (bounded) for its append.
	deadline := time.Now().Add(10 * time.Second)
	for len(w.finalizations(t, key)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not finalize the idle lane after the clock moved")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// TestExpiryWatcher_SwitchedBackSessionFinalizedAgain: /resume to a session
// that was finalized before starts a new incarnation of it, which expires
// and is finalized again (the append is not mistaken for a retry).
func TestExpiryWatcher_SwitchedBackSessionFinalizedAgain(t *testing.T) {
	ctx := context.Background()
	w := newExpiryWorld(t, idlePolicy(60))
	key, first := w.lane(t, "telegram", "1")
	watcher := commands.NewExpiryWatcher(w.handler, commands.ExpiryConfig{})
	w.clock.Advance(2 * time.Hour)
	if rep, err := watcher.Pass(ctx); err != nil || len(rep.Finalized) != 1 {
		t.Fatalf("first pass = %+v, %v; want the lane finalized", rep, err)
	}
	if _, err := w.handler.ResetSession(ctx, commands.ResetSession{Key: key}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.handler.SwitchSession(ctx, commands.SwitchSession{Key: key, SessionID: first}); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(2 * time.Hour)
	if rep, err := watcher.Pass(ctx); err != nil || len(rep.Finalized) != 1 {
		t.Fatalf("pass after switching back = %+v, %v; want the lane finalized again", rep, err)
	}
	got := w.finalizations(t, key)
	if len(got) != 2 || got[0].SessionID != first || got[1].SessionID != first {
		t.Fatalf("finalizations = %+v, want two of %s", got, first)
	}
}

// TestExpiryWatcher_MayActStopsThePass: a pass whose MayAct refuses before
// a hook (a leader that lost its lease by its own clock mid-pass) calls no
// hook, finalizes nothing and prunes nothing; the lane is finalized by the
// next pass allowed to act.
func TestExpiryWatcher_MayActStopsThePass(t *testing.T) {
	ctx := context.Background()
	w := newExpiryWorld(t, idlePolicy(60))
	key, _ := w.lane(t, "telegram", "1")
	w.clock.Advance(61 * time.Minute)
	hook := &recordingHook{}
	errLost := errors.New("lease lost")
	var refuse bool
	watcher := commands.NewExpiryWatcher(w.handler, commands.ExpiryConfig{Hook: hook, SessionStoreMaxAge: time.Minute,
		MayAct: func() error {
			if refuse {
				return errLost
			}
			return nil
		}})
	refuse = true
	head := w.head(t)
	rep, err := watcher.Pass(ctx)
	if !errors.Is(err, errLost) {
		t.Fatalf("Pass with MayAct refusing = %v, want its error", err)
	}
	if hook.callsFor(key) != 0 || len(rep.Finalized) != 0 || rep.EntriesPruned || w.head(t) != head {
		t.Fatalf("Pass with MayAct refusing = %+v, %d hook calls, head %d -> %d; want nothing done", rep, hook.callsFor(key), head, w.head(t))
	}
	refuse = false
	rep, err = watcher.Pass(ctx)
	if err != nil || !slices.Equal(rep.Finalized, []string{key}) || hook.callsFor(key) != 1 {
		t.Fatalf("Pass allowed = %+v, %v, %d hook calls; want %s finalized once", rep, err, hook.callsFor(key), key)
	}
}
