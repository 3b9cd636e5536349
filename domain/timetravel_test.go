package domain_test

import (
	"testing"
	"time"

	"hermes/domain"
	"hermes/events"
	"hermes/testfixtures"
)

// TestStateAt_ExplainsAPastReset uses time travel the way an operator asks
// "why did my session reset?": find the auto-reset in the history, look at
// the lane just before it, and check that the policy explains it.
func TestStateAt_ExplainsAPastReset(t *testing.T) {
	clock := testfixtures.NewClock(t0)
	var history []events.Event
	apply := func(decided []events.Event, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		history = append(history, decided...)
	}
	lane := func() domain.Lane { return domain.Replay(history) }
	req := domain.ResolveRequest{Source: alice, SessionKey: laneKey, Rules: rules, Entropy: "aaaaaaaa"}

	apply(lane().Resolve(req, clock.Now()))
	apply(lane().StartTurn("t1", clock.Advance(time.Minute)))
	apply(lane().CompleteTurn(domain.TurnOutcome{InputTokens: 50, OutputTokens: 10}, clock.Advance(time.Minute)))
	lastActive := clock.Now()
	clock.Advance(24*time.Hour + time.Second)
	req.Entropy = "bbbbbbbb"
	apply(lane().Resolve(req, clock.Now()))

	envs := testfixtures.Envelopes(events.LaneStream(laneKey), history)
	var resetAt uint64
	for _, env := range envs {
		if _, ok := env.Event.(events.SessionAutoReset); ok {
			resetAt = env.Version
		}
	}
	if resetAt == 0 {
		t.Fatalf("no auto-reset in history %v", history)
	}
	before := domain.StateAtVersion(envs, resetAt-1)
	after := domain.StateAtVersion(envs, resetAt)
	if !before.UpdatedAt.Equal(lastActive) || before.TotalTokens != 60 {
		t.Fatalf("lane before the reset = %+v, want updated at %v with 60 tokens", before, lastActive)
	}
	resetTime := envs[resetAt-1].Event.OccurredAt()
	if got := rules.Policy.ResetReason(before.UpdatedAt, resetTime, time.UTC); got != "idle" {
		t.Fatalf("policy at the reset says %q, want idle", got)
	}
	if !after.WasAutoReset || after.AutoResetReason != "idle" || !after.ResetHadActivity || after.PreviousSessionID != before.SessionID {
		t.Fatalf("lane after the reset = %+v", after)
	}

	// The same question by time: an instant just before the reset shows the
	// old session; the reset instant shows the new one.
	old, v := domain.StateAtTime(envs, resetTime.Add(-time.Nanosecond))
	if old.SessionID != before.SessionID || v != resetAt-1 {
		t.Fatalf("StateAtTime(before reset) = %s at v%d, want %s at v%d", old.SessionID, v, before.SessionID, resetAt-1)
	}
	cur, _ := domain.StateAtTime(envs, resetTime)
	if cur.SessionID != after.SessionID {
		t.Fatalf("StateAtTime(reset) = %s, want %s", cur.SessionID, after.SessionID)
	}
	if empty, v := domain.StateAtTime(envs, t0.Add(-time.Second)); empty.Exists() || v != 0 {
		t.Fatalf("StateAtTime(before history) = %+v v%d, want the empty lane", empty, v)
	}
}
