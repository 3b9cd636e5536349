package commands_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/commands"
	"hermes/domain"
	"hermes/events"
	"hermes/testfixtures"
)

// noticeLane is a store file and a handler over it that can be closed and
// reopened, as a restart does.
type noticeLane struct {
	t     *testing.T
	path  string
	clock *testfixtures.Clock
	store *sqlite.Store
	h     *commands.Handler
	n     int
}

func newNoticeLane(t *testing.T) *noticeLane {
	t.Helper()
	nl := &noticeLane{t: t, path: filepath.Join(t.TempDir(), "events.db"), clock: testfixtures.NewClock(testfixtures.Date(2026, 5, 9, 10, 0, 0, 0))}
	nl.open()
	t.Cleanup(func() { nl.store.Close() })
	return nl
}

// open (re)opens the store and builds a fresh handler with an empty cache,
// so every lane is replayed from the store.
func (nl *noticeLane) open() {
	nl.t.Helper()
	store, err := sqlite.Open(nl.path)
	if err != nil {
		nl.t.Fatal(err)
	}
	nl.store = store
	cfg := commands.DefaultConfig() // notify, 24h idle, 04:00 daily, api_server and webhook excluded
	nl.h = commands.NewHandler(store, cfg, commands.WithClock(nl.clock.Now), commands.WithEntropy(func() string {
		nl.n++
		return fmt.Sprintf("%08x", nl.n)
	}))
}

// restart closes the store and opens it again with a new handler.
func (nl *noticeLane) restart() {
	nl.t.Helper()
	if err := nl.store.Close(); err != nil {
		nl.t.Fatal(err)
	}
	nl.open()
}

func (nl *noticeLane) resolve(src domain.SessionSource) commands.Resolved {
	nl.t.Helper()
	res, err := nl.h.ResolveSession(context.Background(), commands.ResolveSession{Source: src})
	if err != nil {
		nl.t.Fatal(err)
	}
	return res
}

// notice reads the lane from the store and returns its pending notice.
func (nl *noticeLane) notice(key string) (domain.ResetNotice, bool) {
	nl.t.Helper()
	lane, _, err := nl.h.Lane(context.Background(), key)
	if err != nil {
		nl.t.Fatal(err)
	}
	return nl.h.PendingResetNotice(lane)
}

func (nl *noticeLane) completeTurn(key string) {
	nl.t.Helper()
	if _, err := nl.h.CompleteTurn(context.Background(), commands.CompleteTurn{Key: key, Outcome: domain.TurnOutcome{InputTokens: 10, OutputTokens: 5}}); err != nil {
		nl.t.Fatal(err)
	}
}

func TestNotice_FiresAfterIdleResetOfAnActiveLane(t *testing.T) {
	nl := newNoticeLane(t)
	src := domain.SessionSource{Platform: "telegram", ChatID: "99", ChatType: "dm", UserName: "Alice"}
	key := nl.resolve(src).Lane.SessionKey
	nl.completeTurn(key)
	nl.clock.Advance(25 * time.Hour)
	if r := nl.resolve(src); r.ResetReason != "idle" {
		t.Fatalf("resolve after 25h: reset reason %q, want idle", r.ResetReason)
	}
	n, ok := nl.notice(key)
	want := "◐ Session automatically reset (inactive for 24h). Conversation history cleared.\nUse /resume to browse and restore a previous session.\nAdjust reset timing in config.yaml under session_reset."
	if !ok || n.Notice != want || n.Reason != "idle" {
		t.Fatalf("pending notice = %+v, %t; want the idle notice %q", n, ok, want)
	}
}

func TestNotice_NoneAfterIdleResetOfAnEmptyLane(t *testing.T) {
	nl := newNoticeLane(t)
	src := domain.SessionSource{Platform: "telegram", ChatID: "99", ChatType: "dm", UserName: "Alice"}
	key := nl.resolve(src).Lane.SessionKey
	nl.clock.Advance(25 * time.Hour)
	nl.resolve(src)
	n, ok := nl.notice(key)
	if !ok || n.Notice != "" || n.Note != domain.ResetContextNote("idle") {
		t.Fatalf("pending notice = %+v, %t; want the context note and no user notice", n, ok)
	}
}

func TestNotice_NoneForExcludedPlatforms(t *testing.T) {
	for _, platform := range []string{"webhook", "api_server"} {
		t.Run(platform, func(t *testing.T) {
			nl := newNoticeLane(t)
			src := domain.SessionSource{Platform: platform, ChatID: "c1", ChatType: "dm"}
			key := nl.resolve(src).Lane.SessionKey
			nl.completeTurn(key)
			nl.clock.Advance(25 * time.Hour)
			nl.resolve(src)
			if n, ok := nl.notice(key); !ok || n.Notice != "" {
				t.Fatalf("pending notice on %s = %+v, %t; want a note and no user notice", platform, n, ok)
			}
		})
	}
}

func TestNotice_AlwaysForASuspendedReset(t *testing.T) {
	nl := newNoticeLane(t)
	// An excluded platform and an empty session: still notified.
	src := domain.SessionSource{Platform: "webhook", ChatID: "c1", ChatType: "dm"}
	key := nl.resolve(src).Lane.SessionKey
	if _, err := nl.h.SuspendSession(context.Background(), commands.SuspendSession{Key: key, Reason: events.SuspendStopCommand}); err != nil {
		t.Fatal(err)
	}
	nl.clock.Advance(time.Second)
	if r := nl.resolve(src); r.ResetReason != "suspended" {
		t.Fatalf("reset reason %q, want suspended", r.ResetReason)
	}
	n, ok := nl.notice(key)
	if !ok || n.Notice != domain.ResetNoticeText("suspended", domain.DefaultResetPolicy()) {
		t.Fatalf("pending notice = %+v, %t; want the suspended notice", n, ok)
	}
}

func TestNotice_NeverForExplicitNew(t *testing.T) {
	nl := newNoticeLane(t)
	src := domain.SessionSource{Platform: "telegram", ChatID: "99", ChatType: "dm"}
	key := nl.resolve(src).Lane.SessionKey
	nl.completeTurn(key)
	if _, err := nl.h.ResetSession(context.Background(), commands.ResetSession{Key: key}); err != nil {
		t.Fatal(err)
	}
	if n, ok := nl.notice(key); ok {
		t.Fatalf("pending notice after /new = %+v, want none", n)
	}
}

// TestNotice_OnlyOnceAcrossRestart: the notice stays pending across a
// restart until it is acknowledged (not lost), and once acknowledged it is
// never pending again, also after a restart that replays the lane from the
// store (not repeated). A second acknowledgement appends nothing.
func TestNotice_OnlyOnceAcrossRestart(t *testing.T) {
	ctx := context.Background()
	nl := newNoticeLane(t)
	src := domain.SessionSource{Platform: "telegram", ChatID: "99", ChatType: "dm", UserName: "Alice"}
	key := nl.resolve(src).Lane.SessionKey
	nl.completeTurn(key)
	nl.clock.Advance(25 * time.Hour)
	nl.resolve(src)

	// A crash before delivery loses nothing.
	nl.restart()
	before, ok := nl.notice(key)
	if !ok || before.Notice == "" {
		t.Fatalf("after a restart the undelivered notice = %+v, %t; want it still pending", before, ok)
	}

	res, err := nl.h.AcknowledgeNotice(ctx, commands.AcknowledgeNotice{Key: key, CommandID: "ack-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Events) != 1 {
		t.Fatalf("AcknowledgeNotice appended %v, want one NoticeDelivered", res.Events)
	}
	if e, ok := res.Events[0].(events.NoticeDelivered); !ok || e.SessionID != before.SessionID || e.Reason != "idle" {
		t.Fatalf("AcknowledgeNotice appended %#v, want NoticeDelivered{%s, idle}", res.Events[0], before.SessionID)
	}
	if res.Lane.WasAutoReset || res.Lane.AutoResetReason != "" {
		t.Fatalf("after ack the entry has was_auto_reset %t, auto_reset_reason %q", res.Lane.WasAutoReset, res.Lane.AutoResetReason)
	}

	// A retried request (same command id) and a second acknowledgement
	// append nothing.
	if _, err := nl.h.AcknowledgeNotice(ctx, commands.AcknowledgeNotice{Key: key, CommandID: "ack-1"}); err != nil {
		t.Fatal(err)
	}
	again, err := nl.h.AcknowledgeNotice(ctx, commands.AcknowledgeNotice{Key: key})
	if err != nil || len(again.Events) != 0 {
		t.Fatalf("second AcknowledgeNotice = %v, %v; want no events", again.Events, err)
	}

	nl.restart()
	if n, ok := nl.notice(key); ok {
		t.Fatalf("after ack and a restart the notice is pending again: %+v", n)
	}
	history, err := nl.store.ReadStream(ctx, events.LaneStream(key), 1, 1000, events.Forwards)
	if err != nil {
		t.Fatal(err)
	}
	var lane domain.Lane
	delivered := 0
	for _, env := range history {
		lane = domain.Evolve(lane, env.Event)
		if _, ok := env.Event.(events.NoticeDelivered); ok {
			delivered++
		}
	}
	if delivered != 1 {
		t.Fatalf("the log holds %d NoticeDelivered, want 1", delivered)
	}
	if _, ok := lane.PendingResetNotice(domain.DefaultResetPolicy()); ok {
		t.Fatalf("replaying the stored log leaves a pending notice")
	}
}

func TestNotice_AcknowledgeForAnOlderSessionKeepsTheNewer(t *testing.T) {
	ctx := context.Background()
	nl := newNoticeLane(t)
	src := domain.SessionSource{Platform: "telegram", ChatID: "99", ChatType: "dm"}
	key := nl.resolve(src).Lane.SessionKey
	nl.completeTurn(key)
	nl.clock.Advance(25 * time.Hour)
	first := nl.resolve(src).Lane.SessionID
	// The notice of first is read; before the ack a /stop and a new
	// message replace the session again.
	if _, err := nl.h.SuspendSession(ctx, commands.SuspendSession{Key: key, Reason: events.SuspendStopCommand}); err != nil {
		t.Fatal(err)
	}
	nl.clock.Advance(time.Second)
	second := nl.resolve(src).Lane.SessionID
	res, err := nl.h.AcknowledgeNotice(ctx, commands.AcknowledgeNotice{Key: key, SessionID: first})
	if err != nil || len(res.Events) != 0 {
		t.Fatalf("AcknowledgeSessionNotice(%s) = %v, %v; want nothing appended", first, res.Events, err)
	}
	n, ok := nl.notice(key)
	if !ok || n.SessionID != second || n.Reason != "suspended" {
		t.Fatalf("pending notice = %+v, %t; want the suspended notice of %s", n, ok, second)
	}
}

func TestNotice_AcknowledgeMissingLane(t *testing.T) {
	nl := newNoticeLane(t)
	_, err := nl.h.AcknowledgeNotice(context.Background(), commands.AcknowledgeNotice{Key: "agent:main:telegram:dm:nobody"})
	if !errors.Is(err, domain.ErrLaneNotFound) {
		t.Fatalf("AcknowledgeNotice on a missing lane = %v, want ErrLaneNotFound", err)
	}
}
