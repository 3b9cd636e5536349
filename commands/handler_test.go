package commands_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/commands"
	"hermes/domain"
	"hermes/events"
	"hermes/testfixtures"
)

var (
	t0    = testfixtures.Date(2026, 5, 9, 10, 0, 0, 0)
	alice = domain.SessionSource{Platform: "telegram", ChatID: "99", ChatType: "dm", UserName: "Alice"}
)

const aliceKey = "agent:main:telegram:dm:99"

type fixture struct {
	store   *sqlite.Store
	clock   *testfixtures.Clock
	handler *commands.Handler
	path    string
}

func newFixture(t *testing.T, cfg commands.Config) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.db")
	store, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clock := testfixtures.NewClock(t0)
	var n int
	var mu sync.Mutex
	entropy := func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("%08x", n)
	}
	h := commands.NewHandler(store, cfg,
		commands.WithClock(clock.Now),
		commands.WithEntropy(entropy),
		commands.WithDirectory(testfixtures.StoreDirectory{Store: store}))
	return &fixture{store: store, clock: clock, handler: h, path: path}
}

func idleConfig() commands.Config {
	cfg := commands.DefaultConfig()
	cfg.Policies.Default = domain.ResetPolicy{Mode: domain.ResetIdle, IdleMinutes: 60, Notify: true}
	return cfg
}

func (f *fixture) history(t *testing.T, key string) []events.Envelope {
	t.Helper()
	envs, err := f.store.ReadStream(context.Background(), events.LaneStream(key), 1, 10000, events.Forwards)
	if err != nil {
		t.Fatal(err)
	}
	return envs
}

func countType[E events.Event](envs []events.Envelope) int {
	n := 0
	for _, env := range envs {
		if _, ok := env.Event.(E); ok {
			n++
		}
	}
	return n
}

func TestHandler_ResolveLifecycle(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, idleConfig())
	h := f.handler

	first, err := h.ResolveSession(ctx, commands.ResolveSession{Source: alice})
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created || first.ResetReason != "" || first.Lane.SessionKey != aliceKey || first.Version != 1 || first.Position == 0 {
		t.Fatalf("first resolve = %+v", first)
	}
	f.clock.Advance(time.Minute)
	again, err := h.ResolveSession(ctx, commands.ResolveSession{Source: alice})
	if err != nil {
		t.Fatal(err)
	}
	if again.Created || again.Lane.SessionID != first.Lane.SessionID || again.Version != 2 {
		t.Fatalf("second resolve = %+v", again)
	}

	_, turn, err := h.StartTurn(ctx, commands.StartTurn{Key: aliceKey})
	if err != nil || turn == "" {
		t.Fatalf("StartTurn = %q, %v", turn, err)
	}
	done, err := h.CompleteTurn(ctx, commands.CompleteTurn{Key: aliceKey, Outcome: domain.TurnOutcome{InputTokens: 7, OutputTokens: 3}})
	if err != nil || done.Lane.TotalTokens != 10 || done.Lane.TurnOpen() {
		t.Fatalf("CompleteTurn = %+v, %v", done.Lane, err)
	}

	f.clock.Advance(61 * time.Minute)
	reset, err := h.ResolveSession(ctx, commands.ResolveSession{Source: alice})
	if err != nil {
		t.Fatal(err)
	}
	if !reset.Created || reset.ResetReason != "idle" || !reset.Lane.ResetHadActivity || reset.Lane.PreviousSessionID != first.Lane.SessionID {
		t.Fatalf("resolve after idle = %+v", reset)
	}

	if _, err := h.SuspendSession(ctx, commands.SuspendSession{Key: aliceKey, Reason: events.SuspendStopCommand}); err != nil {
		t.Fatal(err)
	}
	_, marked, err := h.MarkResumePending(ctx, commands.MarkResumePending{Key: aliceKey, Reason: events.ResumeRestartTimeout})
	if err != nil || marked {
		t.Fatalf("MarkResumePending on a suspended lane = %v, %v; want not marked", marked, err)
	}
	f.clock.Advance(time.Second)
	after, err := h.ResolveSession(ctx, commands.ResolveSession{Source: alice})
	if err != nil || after.ResetReason != "suspended" {
		t.Fatalf("resolve after suspend = %+v, %v", after, err)
	}
	if got := countType[events.SessionAutoReset](f.history(t, aliceKey)); got != 2 {
		t.Fatalf("auto resets in history = %d, want 2", got)
	}
}

func TestHandler_RefusalsAppendNothing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, idleConfig())
	h := f.handler
	if _, err := h.ResolveSession(ctx, commands.ResolveSession{Source: alice}); err != nil {
		t.Fatal(err)
	}
	head, _ := f.store.Head(ctx)
	neg := int64(-1)
	cases := []struct {
		name string
		run  func() error
		want error
	}{
		{"resolve without platform", func() error {
			_, err := h.ResolveSession(ctx, commands.ResolveSession{Source: domain.SessionSource{ChatID: "1"}})
			return err
		}, domain.ErrInvalidArgument},
		{"touch a missing lane", func() error {
			_, err := h.UpdateSession(ctx, commands.UpdateSession{Key: "agent:main:x:dm:1"})
			return err
		}, domain.ErrLaneNotFound},
		{"negative tokens", func() error {
			_, err := h.UpdateSession(ctx, commands.UpdateSession{Key: aliceKey, LastPromptTokens: &neg})
			return err
		}, domain.ErrInvalidArgument},
		{"switch to ../", func() error {
			_, err := h.SwitchSession(ctx, commands.SwitchSession{Key: aliceKey, SessionID: "../x"})
			return err
		}, domain.ErrInvalidSessionID},
		{"resume reason over the bound", func() error {
			_, _, err := h.MarkResumePending(ctx, commands.MarkResumePending{Key: aliceKey, Reason: strings.Repeat("x", domain.MaxResumeReasonBytes+1)})
			return err
		}, domain.ErrInvalidArgument},
		{"empty key", func() error {
			_, err := h.SuspendSession(ctx, commands.SuspendSession{Reason: events.SuspendStopCommand})
			return err
		}, domain.ErrInvalidArgument},
	}
	for _, c := range cases {
		if err := c.run(); !errors.Is(err, c.want) {
			t.Errorf("%s: error = %v, want %v", c.name, err, c.want)
		}
	}
	if after, _ := f.store.Head(ctx); after != head {
		t.Fatalf("refused commands moved the log from %d to %d", head, after)
	}
}

func TestHandler_RetriedCommandIsIdempotent(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, idleConfig())
	h := f.handler
	first, err := h.ResolveSession(ctx, commands.ResolveSession{Source: alice, CommandID: "req-1"})
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Minute)
	retry, err := h.ResolveSession(ctx, commands.ResolveSession{Source: alice, CommandID: "req-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !retry.Created || retry.Lane.SessionID != first.Lane.SessionID || retry.Position != first.Position {
		t.Fatalf("retried resolve = %+v, want the original outcome %+v", retry, first)
	}
	if n := len(f.history(t, aliceKey)); n != 1 {
		t.Fatalf("stream has %d events after a retried command, want 1", n)
	}
}

func TestHandler_ConcurrentResolveCreatesOneSession(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, idleConfig())
	const n = 64
	var wg sync.WaitGroup
	start := make(chan struct{})
	ids := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := f.handler.ResolveSession(ctx, commands.ResolveSession{Source: alice})
			errs[i] = err
			ids[i] = r.Lane.SessionID
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("resolve %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("resolve %d got session %s, resolve 0 got %s: the lane forked", i, ids[i], ids[0])
		}
	}
	hist := f.history(t, aliceKey)
	if got := countType[events.SessionCreated](hist); got != 1 {
		t.Fatalf("session created events = %d, want 1", got)
	}
	if len(hist) != n {
		t.Fatalf("lane has %d events, want %d (1 created + %d touched)", len(hist), n, n-1)
	}
}

func TestHandler_SweepingCommands(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, idleConfig())
	h := f.handler
	src := func(chat string) domain.SessionSource {
		return domain.SessionSource{Platform: "telegram", ChatID: chat, ChatType: "dm"}
	}
	for _, chat := range []string{"1", "2", "3"} {
		if _, err := h.ResolveSession(ctx, commands.ResolveSession{Source: src(chat)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.SuspendSession(ctx, commands.SuspendSession{Key: "agent:main:telegram:dm:2", Reason: events.SuspendStopCommand}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(10 * time.Minute)
	if _, err := h.ResolveSession(ctx, commands.ResolveSession{Source: src("3")}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Minute)

	marked, err := h.SuspendRecentlyActive(ctx, commands.SuspendRecentlyActive{MaxAge: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(marked) != "[agent:main:telegram:dm:3]" {
		t.Fatalf("SuspendRecentlyActive marked %v, want only lane 3", marked)
	}
	again, _ := h.SuspendRecentlyActive(ctx, commands.SuspendRecentlyActive{MaxAge: time.Hour})
	if fmt.Sprint(again) != "[agent:main:telegram:dm:1]" {
		t.Fatalf("second SuspendRecentlyActive marked %v, want only lane 1 (3 is pending, 2 suspended)", again)
	}

	f.clock.Advance(48 * time.Hour)
	pruned, err := h.PruneOldEntries(ctx, commands.PruneOldEntries{MaxAge: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pruned) != "[agent:main:telegram:dm:1 agent:main:telegram:dm:3]" {
		t.Fatalf("PruneOldEntries = %v, want lanes 1 and 3 (2 is suspended)", pruned)
	}
	r, err := h.ResolveSession(ctx, commands.ResolveSession{Source: src("1")})
	if err != nil || !r.Created || r.ResetReason != "" {
		t.Fatalf("resolve of a pruned lane = %+v, %v; want a created session", r, err)
	}
}

// TestHandler_TwoProcessesResolveOneKey starts two real processes that
// resolve the same new key on one store file at once: the lane must not
// fork.
func TestHandler_TwoProcessesResolveOneKey(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	path := filepath.Join(t.TempDir(), "events.db")
	store, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	store.Close()

	const perProcess = 16
	var cmds []*exec.Cmd
	var outs []*bufio.Scanner
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperResolveProcess$")
		cmd.Env = append(os.Environ(), "HERMES_HELPER_STORE="+path, "HERMES_HELPER_N="+strconv.Itoa(perProcess))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		outs = append(outs, bufio.NewScanner(stdout))
	}
	sessionIDs := map[string]int{}
	for i, cmd := range cmds {
		for outs[i].Scan() {
			if line := outs[i].Text(); domain.ValidateSessionID(line) == nil && len(line) == len("20260509_100000_aaaaaaaa") {
				sessionIDs[line]++
			}
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
	}
	if len(sessionIDs) != 1 {
		t.Fatalf("the processes saw sessions %v, want exactly one", sessionIDs)
	}
	store, err = sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	hist, err := store.ReadStream(context.Background(), events.LaneStream(aliceKey), 1, 1000, events.Forwards)
	if err != nil {
		t.Fatal(err)
	}
	if got := countType[events.SessionCreated](hist); got != 1 || len(hist) != 2*perProcess {
		t.Fatalf("lane has %d created of %d events, want 1 of %d", got, len(hist), 2*perProcess)
	}
}

// TestHelperResolveProcess is the child of TestHandler_TwoProcessesResolveOneKey.
func TestHelperResolveProcess(t *testing.T) {
	path := os.Getenv("HERMES_HELPER_STORE")
	if path == "" {
		t.Skip("helper process only")
	}
	n, _ := strconv.Atoi(os.Getenv("HERMES_HELPER_N"))
	store, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	h := commands.NewHandler(store, idleConfig(), commands.WithClock(func() time.Time { return t0 }))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := h.ResolveSession(context.Background(), commands.ResolveSession{Source: alice})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			fmt.Println(r.Lane.SessionID)
			mu.Unlock()
		}()
	}
	wg.Wait()
}

// TestHandler_LanesPastTheCacheBoundResolveTheSame: given a handler that
// keeps only two lanes in memory, when six lanes are resolved twice, then
// the second pass finds each lane's session (read again from the log for
// the lanes dropped from memory) and creates none.
func TestHandler_LanesPastTheCacheBoundResolveTheSame(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	store, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h := commands.NewHandler(store, idleConfig(), commands.WithClock(testfixtures.NewClock(t0).Now), commands.WithCachedLanes(2))
	ctx := context.Background()
	first := map[string]string{}
	for pass := range 2 {
		for i := range 6 {
			src := domain.SessionSource{Platform: "telegram", ChatID: strconv.Itoa(100 + i), ChatType: "dm"}
			res, err := h.ResolveSession(ctx, commands.ResolveSession{Source: src})
			if err != nil {
				t.Fatal(err)
			}
			if pass == 0 {
				first[src.ChatID] = res.Lane.SessionID
				continue
			}
			if res.Lane.SessionID != first[src.ChatID] || res.Created {
				t.Errorf("chat %s: second resolve gave session %q (created %v), want %q", src.ChatID, res.Lane.SessionID, res.Created, first[src.ChatID])
			}
		}
	}
}

// soleWriterLog counts the stream reads of the store under it, and can fail
// appends after they are written (a commit whose answer is lost).
type soleWriterLog struct {
	*sqlite.Store
	reads           int
	failAfterCommit bool
}

func (c *soleWriterLog) ReadStream(ctx context.Context, stream string, from uint64, count int, dir events.Direction) ([]events.Envelope, error) {
	c.reads++
	return c.Store.ReadStream(ctx, stream, from, count, dir)
}

func (c *soleWriterLog) Append(ctx context.Context, stream string, expected events.ExpectedVersion, proposed []events.Proposed) (events.AppendResult, error) {
	res, err := c.Store.Append(ctx, stream, expected, proposed)
	if err == nil && c.failAfterCommit {
		return events.AppendResult{}, errors.New("connection lost after the commit")
	}
	return res, err
}

// TestHandler_SoleWriterTrustsItsCache: given a handler that is its
// store's only writer, when a command decides to append nothing, then it
// answers from the cached lane without reading the stream (a handler
// sharing its store reads it to see whether another writer moved the
// lane); and when an append fails after it was written, then the next
// command reads the lane again rather than deciding on the lane before it.
func TestHandler_SoleWriterTrustsItsCache(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		opts      []commands.Option
		wantReads bool
	}{
		{"sole writer", []commands.Option{commands.WithSoleWriter()}, false},
		{"shared store", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, idleConfig())
			log := &soleWriterLog{Store: f.store}
			h := commands.NewHandler(log, idleConfig(), append(tc.opts, commands.WithClock(f.clock.Now))...)
			res, err := h.ResolveSession(ctx, commands.ResolveSession{Source: alice})
			if err != nil {
				t.Fatal(err)
			}
			sid := res.Lane.SessionID
			if _, err := h.RecordActivity(ctx, commands.RecordActivity{Key: aliceKey, SessionID: sid}); err != nil {
				t.Fatal(err)
			}
			log.reads = 0
			again, err := h.RecordActivity(ctx, commands.RecordActivity{Key: aliceKey, SessionID: sid})
			if err != nil || len(again.Events) != 0 {
				t.Fatalf("second RecordActivity = %d events, %v; want none", len(again.Events), err)
			}
			if got := log.reads > 0; got != tc.wantReads {
				t.Errorf("stream read on a command that appends nothing: %v (%d reads), want %v", got, log.reads, tc.wantReads)
			}

			// A reset is written but its answer lost: the cache must not
			// keep the old session.
			log.failAfterCommit = true
			if _, err := h.ResetSession(ctx, commands.ResetSession{Key: aliceKey}); err == nil {
				t.Fatal("ResetSession answered no error")
			}
			log.failAfterCommit = false
			history := f.history(t, aliceKey)
			reset, ok := history[len(history)-1].Event.(events.SessionReset)
			if !ok {
				t.Fatalf("last event %T, want the reset", history[len(history)-1].Event)
			}
			rec, err := h.RecordActivity(ctx, commands.RecordActivity{Key: aliceKey, SessionID: reset.SessionID})
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.Events) != 1 {
				t.Fatalf("activity on the new session %s recorded %d events, want 1 (the handler decided on the lane before the reset)", reset.SessionID, len(rec.Events))
			}
		})
	}
}
