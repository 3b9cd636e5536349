package domain_test

import (
	"strings"
	"testing"
	"time"

	"hermes/domain"
	"hermes/events"
	"hermes/testfixtures"
)

const laneKey = "agent:main:telegram:dm:99"

var (
	t0    = date(2026, 5, 9, 10, 0, 0, 0)
	alice = domain.SessionSource{Platform: "telegram", ChatID: "99", ChatType: "dm", UserID: "42", UserName: "Alice", ChatName: "Alice chat"}
	rules = domain.LaneRules{Policy: domain.ResetPolicy{Mode: domain.ResetIdle, IdleMinutes: 1440}, Location: time.UTC, ResumeFreshness: time.Hour}
	daily = domain.LaneRules{Policy: domain.DefaultResetPolicy(), Location: time.UTC, ResumeFreshness: time.Hour}
)

func created(at time.Time) events.SessionCreated {
	return events.SessionCreated{
		SessionKey: laneKey, SessionID: "20260509_100000_aaaaaaaa",
		Origin: alice.Event(), DisplayName: "Alice chat", Platform: "telegram", ChatType: "dm", At: at,
	}
}

func resolve(now time.Time) func(domain.Lane) ([]events.Event, error) {
	return resolveWith(rules, false, now)
}

func resolveWith(r domain.LaneRules, forceNew bool, now time.Time) func(domain.Lane) ([]events.Event, error) {
	return func(l domain.Lane) ([]events.Event, error) {
		return l.Resolve(domain.ResolveRequest{Source: alice, SessionKey: laneKey, ForceNew: forceNew, Rules: r, Entropy: "bbbbbbbb"}, now)
	}
}

func autoReset(reason string, hadActivity bool, now time.Time) events.SessionAutoReset {
	id, _ := domain.NewSessionID(now, time.UTC, "bbbbbbbb")
	return events.SessionAutoReset{
		SessionKey: laneKey, SessionID: id, PreviousSessionID: "20260509_100000_aaaaaaaa",
		Reason: reason, HadActivity: hadActivity, Origin: alice.Event(), DisplayName: "Alice chat",
		Platform: "telegram", ChatType: "dm", At: now,
	}
}

func TestLane_Resolve(t *testing.T) {
	dayLater := t0.Add(24 * time.Hour)
	justAfter := dayLater.Add(time.Microsecond)
	soon := t0.Add(time.Minute)
	turnDone := events.TurnCompleted{TurnID: "t1", SessionID: "20260509_100000_aaaaaaaa", InputTokens: 10, OutputTokens: 5, At: t0}
	scenarios := []testfixtures.LaneScenario{
		{
			Name: "a new key creates a session",
			When: resolve(t0),
			Then: []events.Event{func() events.Event {
				e := created(t0)
				e.SessionID = "20260509_100000_bbbbbbbb"
				return e
			}()},
		},
		{
			Name:  "an existing fresh lane is touched",
			Given: []events.Event{created(t0)},
			When:  resolve(soon),
			Then:  []events.Event{events.Touched{At: soon}},
		},
		{
			Name:  "idle exactly at the deadline keeps the session",
			Given: []events.Event{created(t0)},
			When:  resolve(dayLater),
			Then:  []events.Event{events.Touched{At: dayLater}},
		},
		{
			Name:  "idle 1µs after the deadline auto-resets an empty lane without activity",
			Given: []events.Event{created(t0)},
			When:  resolve(justAfter),
			Then:  []events.Event{autoReset("idle", false, justAfter)},
		},
		{
			Name:  "idle reset of a lane with a completed turn records the activity",
			Given: []events.Event{created(t0), turnDone},
			When:  resolve(justAfter),
			Then:  []events.Event{autoReset("idle", true, justAfter)},
		},
		{
			Name:  "an appended message counts as activity",
			Given: []events.Event{created(t0), events.ActivityRecorded{SessionID: "20260509_100000_aaaaaaaa", At: t0}},
			When:  resolve(justAfter),
			Then:  []events.Event{autoReset("idle", true, justAfter)},
		},
		{
			Name:  "a message of an older session is not activity of this one",
			Given: []events.Event{created(t0), events.ActivityRecorded{SessionID: "20260101_000000_cccccccc", At: t0}},
			When:  resolve(justAfter),
			Then:  []events.Event{autoReset("idle", false, justAfter)},
		},
		{
			Name:  "daily boundary crossed resets with daily",
			Given: []events.Event{created(date(2026, 5, 10, 3, 0, 0, 0))},
			When:  resolveWith(daily, false, date(2026, 5, 10, 4, 0, 0, 0)),
			Then: []events.Event{func() events.Event {
				e := autoReset("daily", false, date(2026, 5, 10, 4, 0, 0, 0))
				return e
			}()},
		},
		{
			Name:  "suspended beats resume pending",
			Given: []events.Event{created(t0), events.ResumeMarked{Reason: "restart_timeout", At: t0}, events.Suspended{Reason: "stop_command", At: t0}},
			When:  resolve(soon),
			Then:  []events.Event{autoReset("suspended", false, soon)},
		},
		{
			Name:  "suspended resets even a lane the policy would keep",
			Given: []events.Event{created(t0), events.Suspended{Reason: "stop_command", At: t0}},
			When:  resolve(soon),
			Then:  []events.Event{autoReset("suspended", false, soon)},
		},
		{
			Name:  "resume pending preserves the session past the idle deadline",
			Given: []events.Event{created(t0), events.ResumeMarked{Reason: "restart_interrupted", At: justAfter.Add(-time.Minute)}},
			When:  resolve(justAfter),
			Then:  []events.Event{events.Touched{At: justAfter}},
		},
		{
			Name:  "resume pending exactly at the freshness boundary is fresh",
			Given: []events.Event{created(t0), events.ResumeMarked{Reason: "restart_interrupted", At: soon}},
			When:  resolve(soon.Add(time.Hour)),
			Then:  []events.Event{events.Touched{At: soon.Add(time.Hour)}},
		},
		{
			Name:  "a resume mark older than the freshness window auto-resets",
			Given: []events.Event{created(t0), events.ResumeMarked{Reason: "restart_interrupted", At: soon}},
			When:  resolve(soon.Add(time.Hour + time.Nanosecond)),
			Then:  []events.Event{autoReset("resume_pending_expired", false, soon.Add(time.Hour+time.Nanosecond))},
		},
		{
			Name:  "freshness 0 keeps a resume mark forever",
			Given: []events.Event{created(t0), events.ResumeMarked{Reason: "restart_interrupted", At: soon}},
			When:  resolveWith(domain.LaneRules{Policy: domain.DefaultResetPolicy(), Location: time.UTC}, false, soon.Add(1000*time.Hour)),
			Then:  []events.Event{events.Touched{At: soon.Add(1000 * time.Hour)}},
		},
		{
			Name:  "live background processes prevent an idle reset",
			Given: []events.Event{created(t0), events.ActiveProcessesChanged{Count: 2, At: t0}},
			When:  resolve(justAfter),
			Then:  []events.Event{events.Touched{At: justAfter}},
		},
		{
			Name:  "live background processes do not prevent a suspended reset",
			Given: []events.Event{created(t0), events.ActiveProcessesChanged{Count: 1, At: t0}, events.Suspended{Reason: "stop_command", At: t0}},
			When:  resolve(soon),
			Then:  []events.Event{autoReset("suspended", false, soon)},
		},
		{
			Name:  "mode both at the daily boundary and past idle reports idle",
			Given: []events.Event{created(t0)},
			When:  resolveWith(daily, false, t0.Add(48*time.Hour)),
			Then:  []events.Event{autoReset("idle", false, t0.Add(48*time.Hour))},
		},
		{
			Name:  "per-platform override: a none policy for this platform keeps the lane",
			Given: []events.Event{created(t0)},
			When: resolveWith(domain.LaneRules{
				Policy: domain.ResetPolicies{
					Default:    domain.DefaultResetPolicy(),
					ByPlatform: map[string]domain.ResetPolicy{"telegram": {Mode: domain.ResetNone}},
				}.For("telegram", "dm"),
				Location: time.UTC,
			}, false, t0.Add(48*time.Hour)),
			Then: []events.Event{events.Touched{At: t0.Add(48 * time.Hour)}},
		},
		{
			Name:  "per-type override: an idle 60 policy for dm resets after an hour",
			Given: []events.Event{created(t0)},
			When: resolveWith(domain.LaneRules{
				Policy: domain.ResetPolicies{
					Default: domain.ResetPolicy{Mode: domain.ResetNone},
					ByType:  map[string]domain.ResetPolicy{"dm": {Mode: domain.ResetIdle, IdleMinutes: 60}},
				}.For("telegram", "dm"),
				Location: time.UTC,
			}, false, t0.Add(61*time.Minute)),
			Then: []events.Event{autoReset("idle", false, t0.Add(61*time.Minute))},
		},
		{
			Name:  "mode none never resets",
			Given: []events.Event{created(t0)},
			When:  resolveWith(domain.LaneRules{Policy: domain.ResetPolicy{Mode: domain.ResetNone}, Location: time.UTC}, false, t0.Add(1000*time.Hour)),
			Then:  []events.Event{events.Touched{At: t0.Add(1000 * time.Hour)}},
		},
		{
			Name:  "force_new on an existing lane creates a session linked to the old one",
			Given: []events.Event{created(t0)},
			When:  resolveWith(rules, true, soon),
			Then: []events.Event{events.SessionCreated{
				SessionKey: laneKey, SessionID: "20260509_100100_bbbbbbbb", PreviousSessionID: "20260509_100000_aaaaaaaa",
				ForceNew: true, Origin: alice.Event(), DisplayName: "Alice chat", Platform: "telegram", ChatType: "dm", At: soon,
			}},
		},
		{
			Name:  "a pruned lane starts over with a created session",
			Given: []events.Event{created(t0), events.EntryPruned{SessionID: "20260509_100000_aaaaaaaa", At: soon}},
			When:  resolve(dayLater),
			Then: []events.Event{events.SessionCreated{
				SessionKey: laneKey, SessionID: "20260510_100000_bbbbbbbb", PreviousSessionID: "20260509_100000_aaaaaaaa",
				Origin: alice.Event(), DisplayName: "Alice chat", Platform: "telegram", ChatType: "dm", At: dayLater,
			}},
		},
		{
			Name: "bad entropy is refused",
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.Resolve(domain.ResolveRequest{Source: alice, SessionKey: laneKey, Rules: rules, Entropy: "nothex!!"}, t0)
			},
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name: "a source without platform is refused",
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.Resolve(domain.ResolveRequest{SessionKey: laneKey, Rules: rules, Entropy: "bbbbbbbb"}, t0)
			},
			ThenErr: domain.ErrInvalidArgument,
		},
	}
	for _, s := range scenarios {
		t.Run(s.Name, s.Run)
	}
}

func TestLane_AutoResetState(t *testing.T) {
	justAfter := t0.Add(24*time.Hour + time.Microsecond)
	history := []events.Event{
		created(t0),
		events.TurnCompleted{TurnID: "t1", SessionID: "20260509_100000_aaaaaaaa", InputTokens: 10, OutputTokens: 5, CostStatus: "estimated", At: t0},
		events.ActiveProcessesChanged{Count: 0, At: t0},
		autoReset("idle", true, justAfter),
	}
	l := domain.Replay(history)
	if l.SessionID != "20260510_100000_bbbbbbbb" || !l.WasAutoReset || l.AutoResetReason != "idle" || !l.ResetHadActivity {
		t.Fatalf("after auto-reset: %+v", l)
	}
	if l.TotalTokens != 0 || l.InputTokens != 0 || l.HadActivity || l.CostStatus != "unknown" {
		t.Fatalf("counters not zeroed after auto-reset: %+v", l)
	}
	if l.PreviousSessionID != "20260509_100000_aaaaaaaa" {
		t.Fatalf("PreviousSessionID = %q, want the replaced session", l.PreviousSessionID)
	}
	if !l.CreatedAt.Equal(justAfter) || !l.UpdatedAt.Equal(justAfter) {
		t.Fatalf("timestamps = %v/%v, want %v", l.CreatedAt, l.UpdatedAt, justAfter)
	}
}

func TestLane_Transitions(t *testing.T) {
	soon := t0.Add(time.Minute)
	sid := "20260509_100000_aaaaaaaa"
	pt := int64(0)
	pt500 := int64(500)
	neg := int64(-1)
	scenarios := []testfixtures.LaneScenario{
		{
			Name:  "reset starts a fresh session and links the old one",
			Given: []events.Event{created(t0)},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.Reset("", rules, "bbbbbbbb", soon) },
			Then:  []events.Event{events.SessionReset{SessionID: "20260509_100100_bbbbbbbb", PreviousSessionID: sid, At: soon}},
		},
		{
			Name:    "reset of a missing lane is refused",
			When:    func(l domain.Lane) ([]events.Event, error) { return l.Reset("", rules, "bbbbbbbb", soon) },
			ThenErr: domain.ErrLaneNotFound,
		},
		{
			Name:  "switch points the lane at another session",
			Given: []events.Event{created(t0)},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.Switch("20260101_000000_cccccccc", soon) },
			Then:  []events.Event{events.SessionSwitched{SessionID: "20260101_000000_cccccccc", PreviousSessionID: sid, At: soon}},
		},
		{
			Name:  "switch to the current session changes nothing",
			Given: []events.Event{created(t0)},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.Switch(sid, soon) },
		},
		{
			Name:    "switch to an unsafe id is refused",
			Given:   []events.Event{created(t0)},
			When:    func(l domain.Lane) ([]events.Event, error) { return l.Switch("../../etc/passwd", soon) },
			ThenErr: domain.ErrInvalidSessionID,
		},
		{
			Name:    "switch on a missing lane is refused",
			When:    func(l domain.Lane) ([]events.Event, error) { return l.Switch("20260101_000000_cccccccc", soon) },
			ThenErr: domain.ErrLaneNotFound,
		},
		{
			Name:  "suspend",
			Given: []events.Event{created(t0)},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.Suspend(events.SuspendStopCommand, soon) },
			Then:  []events.Event{events.Suspended{Reason: "stop_command", At: soon}},
		},
		{
			Name:  "suspend a suspended lane changes nothing",
			Given: []events.Event{created(t0), events.Suspended{Reason: "stop_command", At: t0}},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.Suspend(events.SuspendStuckLoop, soon) },
		},
		{
			Name:    "suspend a missing lane is refused",
			When:    func(l domain.Lane) ([]events.Event, error) { return l.Suspend(events.SuspendStopCommand, soon) },
			ThenErr: domain.ErrLaneNotFound,
		},
		{
			Name:  "mark resume pending",
			Given: []events.Event{created(t0)},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.MarkResumePending("shutdown_timeout", soon) },
			Then:  []events.Event{events.ResumeMarked{Reason: "shutdown_timeout", At: soon}},
		},
		{
			Name:    "mark resume pending is refused on a suspended lane",
			Given:   []events.Event{created(t0), events.Suspended{Reason: "stop_command", At: t0}},
			When:    func(l domain.Lane) ([]events.Event, error) { return l.MarkResumePending("restart_timeout", soon) },
			ThenErr: domain.ErrSuspended,
		},
		{
			Name:  "mark resume pending stores any reason, as Hermes does",
			Given: []events.Event{created(t0)},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.MarkResumePending("manual_resume_request", soon) },
			Then:  []events.Event{events.ResumeMarked{Reason: "manual_resume_request", At: soon}},
		},
		{
			Name:  "mark resume pending takes a reason of exactly the bound",
			Given: []events.Event{created(t0)},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.MarkResumePending(strings.Repeat("é", domain.MaxResumeReasonBytes/2), soon)
			},
			Then: []events.Event{events.ResumeMarked{Reason: strings.Repeat("é", domain.MaxResumeReasonBytes/2), At: soon}},
		},
		{
			Name:    "mark resume pending with an empty reason is refused",
			Given:   []events.Event{created(t0)},
			When:    func(l domain.Lane) ([]events.Event, error) { return l.MarkResumePending("", soon) },
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name:  "mark resume pending with a reason over the bound is refused",
			Given: []events.Event{created(t0)},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.MarkResumePending(strings.Repeat("x", domain.MaxResumeReasonBytes+1), soon)
			},
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name:    "mark resume pending with a reason that is not UTF-8 is refused",
			Given:   []events.Event{created(t0)},
			When:    func(l domain.Lane) ([]events.Event, error) { return l.MarkResumePending("bad\xff", soon) },
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name:    "mark resume pending with a NUL in the reason is refused",
			Given:   []events.Event{created(t0)},
			When:    func(l domain.Lane) ([]events.Event, error) { return l.MarkResumePending("a\x00b", soon) },
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name:    "a turn is not interrupted for a reason a restart does not give",
			Given:   []events.Event{created(t0), events.TurnStarted{TurnID: "t1", SessionID: "20260509_100000_aaaaaaaa", At: t0}},
			When:    func(l domain.Lane) ([]events.Event, error) { return l.InterruptTurn("manual_resume_request", soon) },
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name:  "clear resume pending",
			Given: []events.Event{created(t0), events.ResumeMarked{Reason: "restart_timeout", At: t0}},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.ClearResumePending(soon) },
			Then:  []events.Event{events.ResumeCleared{Cause: "explicit", At: soon}},
		},
		{
			Name:  "clear resume pending when none is pending changes nothing",
			Given: []events.Event{created(t0)},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.ClearResumePending(soon) },
		},
		{
			Name:  "touch with last prompt tokens 0 records it",
			Given: []events.Event{created(t0)},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.Touch(&pt, soon) },
			Then:  []events.Event{events.Touched{LastPromptTokens: &pt, At: soon}},
		},
		{
			Name:    "touch with negative tokens is refused",
			Given:   []events.Event{created(t0)},
			When:    func(l domain.Lane) ([]events.Event, error) { return l.Touch(&neg, soon) },
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name:    "touch a missing lane is refused",
			When:    func(l domain.Lane) ([]events.Event, error) { return l.Touch(nil, soon) },
			ThenErr: domain.ErrLaneNotFound,
		},
		{
			Name:  "start a turn",
			Given: []events.Event{created(t0)},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.StartTurn("t1", soon) },
			Then:  []events.Event{events.TurnStarted{TurnID: "t1", SessionID: sid, At: soon}},
		},
		{
			Name:    "starting another turn while one is open is refused: the lane is busy",
			Given:   []events.Event{created(t0), events.TurnStarted{TurnID: "t1", SessionID: sid, At: t0}},
			When:    func(l domain.Lane) ([]events.Event, error) { return l.StartTurn("t2", soon) },
			ThenErr: domain.ErrTurnBusy,
		},
		{
			Name:  "starting the open turn again changes nothing",
			Given: []events.Event{created(t0), events.TurnStarted{TurnID: "t1", SessionID: sid, At: t0}},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.StartTurn("t1", soon) },
		},
		{
			Name: "a turn starts once the open one was interrupted",
			Given: []events.Event{created(t0), events.TurnStarted{TurnID: "t1", SessionID: sid, At: t0},
				events.TurnInterrupted{TurnID: "t1", Reason: "restart_interrupted", At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) { return l.StartTurn("t2", soon) },
			Then: []events.Event{events.TurnStarted{TurnID: "t2", SessionID: sid, At: soon}},
		},
		{
			Name: "completing a turn that was interrupted (adopted) is refused",
			Given: []events.Event{created(t0), events.TurnStarted{TurnID: "t1", SessionID: sid, At: t0},
				events.TurnInterrupted{TurnID: "t1", Reason: "restart_interrupted", At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.CompleteTurn(domain.TurnOutcome{TurnID: "t1", OutputTokens: 5}, soon)
			},
			ThenErr: domain.ErrTurnNotOpen,
		},
		{
			Name: "completing a turn that is not the open one is refused",
			Given: []events.Event{created(t0), events.TurnStarted{TurnID: "t1", SessionID: sid, At: t0},
				events.TurnInterrupted{TurnID: "t1", Reason: "restart_interrupted", At: t0}, events.TurnStarted{TurnID: "t2", SessionID: sid, At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.CompleteTurn(domain.TurnOutcome{TurnID: "t1"}, soon)
			},
			ThenErr: domain.ErrTurnNotOpen,
		},
		{
			Name:  "a completion without a turn id is not fenced",
			Given: []events.Event{created(t0)},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.CompleteTurn(domain.TurnOutcome{}, soon) },
			Then:  []events.Event{events.TurnCompleted{SessionID: sid, At: soon}},
		},
		{
			Name:  "the first turn after /new consumes the fresh-reset flag",
			Given: []events.Event{created(t0), events.SessionReset{SessionID: "20260509_100100_cccccccc", PreviousSessionID: sid, At: t0}},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.StartTurn("t1", soon) },
			Then: []events.Event{
				events.TurnStarted{TurnID: "t1", SessionID: "20260509_100100_cccccccc", At: soon},
				events.FreshResetConsumed{SessionID: "20260509_100100_cccccccc", Cause: events.FreshResetConsumedByTurn, At: soon},
			},
		},
		{
			Name: "the second turn after /new finds the flag consumed",
			Given: []events.Event{created(t0), events.SessionReset{SessionID: "20260509_100100_cccccccc", PreviousSessionID: sid, At: t0},
				events.TurnStarted{TurnID: "t1", SessionID: "20260509_100100_cccccccc", At: t0},
				events.FreshResetConsumed{SessionID: "20260509_100100_cccccccc", Cause: events.FreshResetConsumedByTurn, At: t0},
				events.TurnCompleted{TurnID: "t1", SessionID: "20260509_100100_cccccccc", At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) { return l.StartTurn("t2", soon) },
			Then: []events.Event{events.TurnStarted{TurnID: "t2", SessionID: "20260509_100100_cccccccc", At: soon}},
		},
		{
			Name:  "starting the open turn again changes nothing",
			Given: []events.Event{created(t0), events.TurnStarted{TurnID: "t1", SessionID: sid, At: t0}},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.StartTurn("t1", soon) },
		},
		{
			Name:  "a successful turn clears a resume mark",
			Given: []events.Event{created(t0), events.ResumeMarked{Reason: "restart_interrupted", At: t0}, events.TurnStarted{TurnID: "t1", SessionID: sid, At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.CompleteTurn(domain.TurnOutcome{InputTokens: 100, OutputTokens: 20, EstimatedCostUSD: 0.01, LastPromptTokens: &pt500}, soon)
			},
			Then: []events.Event{
				events.TurnCompleted{TurnID: "t1", SessionID: sid, InputTokens: 100, OutputTokens: 20, EstimatedCostUSD: 0.01, LastPromptTokens: &pt500, At: soon},
				events.ResumeCleared{Cause: "turn_completed", At: soon},
			},
		},
		{
			Name:  "a failed turn keeps the resume mark",
			Given: []events.Event{created(t0), events.ResumeMarked{Reason: "restart_interrupted", At: t0}, events.TurnStarted{TurnID: "t1", SessionID: sid, At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.CompleteTurn(domain.TurnOutcome{TurnID: "t1", Failed: true}, soon)
			},
			Then: []events.Event{events.TurnCompleted{TurnID: "t1", SessionID: sid, Failed: true, At: soon}},
		},
		{
			Name:  "negative token deltas are refused",
			Given: []events.Event{created(t0)},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.CompleteTurn(domain.TurnOutcome{OutputTokens: -3}, soon)
			},
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name:  "a cost of 1e308 is refused (the poison pill of issue [V])",
			Given: []events.Event{created(t0)},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.CompleteTurn(domain.TurnOutcome{EstimatedCostUSD: 1e308}, soon)
			},
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name:  "a cost that would take the lane's total past MaxCostUSD is refused",
			Given: []events.Event{created(t0), events.TurnCompleted{SessionID: sid, EstimatedCostUSD: 6e8, At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.CompleteTurn(domain.TurnOutcome{EstimatedCostUSD: 6e8}, soon)
			},
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name:  "tokens that would take a total past MaxTokens are refused (no wrap to -2)",
			Given: []events.Event{created(t0), events.TurnCompleted{SessionID: sid, InputTokens: domain.MaxTokens, At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.CompleteTurn(domain.TurnOutcome{InputTokens: 1}, soon)
			},
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name:  "output tokens that would take total_tokens past MaxTokens are refused",
			Given: []events.Event{created(t0), events.TurnCompleted{SessionID: sid, InputTokens: domain.MaxTokens, At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.CompleteTurn(domain.TurnOutcome{OutputTokens: 1}, soon)
			},
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name:  "a turn that reaches the bounds exactly is recorded",
			Given: []events.Event{created(t0), events.TurnCompleted{SessionID: sid, InputTokens: domain.MaxTokens - 1, EstimatedCostUSD: domain.MaxCostUSD - 1, At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.CompleteTurn(domain.TurnOutcome{InputTokens: 1, EstimatedCostUSD: 1}, soon)
			},
			Then: []events.Event{events.TurnCompleted{SessionID: sid, InputTokens: 1, EstimatedCostUSD: 1, At: soon}},
		},
		{
			Name:  "active processes change",
			Given: []events.Event{created(t0)},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.SetActiveProcesses(2, soon) },
			Then:  []events.Event{events.ActiveProcessesChanged{Count: 2, At: soon}},
		},
		{
			Name:  "the same active-process count changes nothing",
			Given: []events.Event{created(t0), events.ActiveProcessesChanged{Count: 2, At: t0}},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.SetActiveProcesses(2, soon) },
		},
		{
			Name:    "a negative active-process count is refused",
			Given:   []events.Event{created(t0)},
			When:    func(l domain.Lane) ([]events.Event, error) { return l.SetActiveProcesses(-1, soon) },
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name:  "the first message of a session records activity",
			Given: []events.Event{created(t0)},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.RecordActivity(sid, soon) },
			Then:  []events.Event{events.ActivityRecorded{SessionID: sid, At: soon}},
		},
		{
			Name:  "later messages record nothing",
			Given: []events.Event{created(t0), events.ActivityRecorded{SessionID: sid, At: t0}},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.RecordActivity(sid, soon) },
		},
	}
	for _, s := range scenarios {
		t.Run(s.Name, s.Run)
	}
}

func TestLane_SwitchClearsFlags(t *testing.T) {
	l := domain.Replay([]events.Event{
		created(t0),
		events.ResumeMarked{Reason: "restart_timeout", At: t0},
		events.Suspended{Reason: "stop_command", At: t0},
		events.SessionSwitched{SessionID: "20260101_000000_cccccccc", PreviousSessionID: "20260509_100000_aaaaaaaa", At: t0.Add(time.Minute)},
	})
	if l.Suspended || l.ResumePending || l.SessionID != "20260101_000000_cccccccc" || l.Origin != alice {
		t.Fatalf("after switch: %+v", l)
	}
}

func TestLane_ResetIsFresh(t *testing.T) {
	l := domain.Replay([]events.Event{
		created(t0),
		events.Suspended{Reason: "stop_command", At: t0},
		events.SessionReset{SessionID: "20260509_100100_bbbbbbbb", PreviousSessionID: "20260509_100000_aaaaaaaa", DisplayName: "renamed", At: t0.Add(time.Minute)},
	})
	if !l.IsFreshReset || l.WasAutoReset || l.Suspended || l.DisplayName != "renamed" || l.Platform != "telegram" {
		t.Fatalf("after reset: %+v", l)
	}
}

func TestLane_Recovery(t *testing.T) {
	sid := "20260509_100000_aaaaaaaa"
	now := t0.Add(2 * time.Minute)
	scenarios := []testfixtures.LaneScenario{
		{
			Name:  "a lane updated exactly max age ago is marked interrupted",
			Given: []events.Event{created(t0)},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.MarkInterruptedIfRecent(2*time.Minute, now), nil
			},
			Then: []events.Event{events.ResumeMarked{Reason: "restart_interrupted", At: now}},
		},
		{
			Name:  "a lane updated before max age is left alone",
			Given: []events.Event{created(t0)},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.MarkInterruptedIfRecent(2*time.Minute-time.Nanosecond, now), nil
			},
		},
		{
			Name:  "a pending lane is never marked twice",
			Given: []events.Event{created(t0), events.ResumeMarked{Reason: "shutdown_timeout", At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.MarkInterruptedIfRecent(time.Hour, now), nil
			},
		},
		{
			Name:  "a suspended lane is never marked",
			Given: []events.Event{created(t0), events.Suspended{Reason: "stop_command", At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.MarkInterruptedIfRecent(time.Hour, now), nil
			},
		},
		{
			Name:  "an open turn interrupted by a crash is closed and marked for resume",
			Given: []events.Event{created(t0), events.TurnStarted{TurnID: "t1", SessionID: sid, At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.InterruptTurn(events.ResumeRestartInterrupted, now)
			},
			Then: []events.Event{
				events.TurnInterrupted{TurnID: "t1", Reason: "restart_interrupted", At: now},
				events.ResumeMarked{Reason: "restart_interrupted", At: now},
			},
		},
		{
			Name:  "an interrupted turn of a suspended lane is closed but not marked",
			Given: []events.Event{created(t0), events.TurnStarted{TurnID: "t1", SessionID: sid, At: t0}, events.Suspended{Reason: "stop_command", At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.InterruptTurn(events.ResumeShutdownTimeout, now)
			},
			Then: []events.Event{events.TurnInterrupted{TurnID: "t1", Reason: "shutdown_timeout", At: now}},
		},
		{
			Name:  "a lane with no open turn has nothing to interrupt",
			Given: []events.Event{created(t0), events.TurnStarted{TurnID: "t1", SessionID: sid, At: t0}, events.TurnCompleted{TurnID: "t1", SessionID: sid, At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.InterruptTurn(events.ResumeRestartTimeout, now)
			},
		},
		{
			Name:    "an unknown interrupt reason is refused",
			Given:   []events.Event{created(t0), events.TurnStarted{TurnID: "t1", SessionID: sid, At: t0}},
			When:    func(l domain.Lane) ([]events.Event, error) { return l.InterruptTurn("power_cut", now) },
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name:  "an expired lane is finalized",
			Given: []events.Event{created(t0)},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.FinalizeExpiry(rules, false, t0.Add(25*time.Hour)), nil
			},
			Then: []events.Event{events.ExpiryFinalized{SessionID: sid, At: t0.Add(25 * time.Hour)}},
		},
		{
			Name:  "a finalized lane is not finalized again",
			Given: []events.Event{created(t0), events.ExpiryFinalized{SessionID: sid, At: t0.Add(25 * time.Hour)}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.FinalizeExpiry(rules, false, t0.Add(26*time.Hour)), nil
			},
		},
		{
			Name:  "a lane with live processes does not expire",
			Given: []events.Event{created(t0), events.ActiveProcessesChanged{Count: 1, At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.FinalizeExpiry(rules, false, t0.Add(25*time.Hour)), nil
			},
		},
		{
			Name:  "a fresh lane does not expire",
			Given: []events.Event{created(t0)},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.FinalizeExpiry(rules, false, t0.Add(time.Hour)), nil
			},
		},
		{
			Name:  "an old lane is pruned",
			Given: []events.Event{created(t0)},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.Prune(90*24*time.Hour, t0.Add(90*24*time.Hour+time.Nanosecond)), nil
			},
			Then: []events.Event{events.EntryPruned{SessionID: sid, At: t0.Add(90*24*time.Hour + time.Nanosecond)}},
		},
		{
			Name:  "a lane exactly at the cutoff is kept",
			Given: []events.Event{created(t0)},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.Prune(90*24*time.Hour, t0.Add(90*24*time.Hour)), nil
			},
		},
		{
			Name:  "a suspended lane is never pruned",
			Given: []events.Event{created(t0), events.Suspended{Reason: "stop_command", At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.Prune(24*time.Hour, t0.Add(1000*time.Hour)), nil
			},
		},
		{
			Name:  "a lane with live processes is never pruned",
			Given: []events.Event{created(t0), events.ActiveProcessesChanged{Count: 3, At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.Prune(24*time.Hour, t0.Add(1000*time.Hour)), nil
			},
		},
		{
			Name:  "pruning disabled with max age 0",
			Given: []events.Event{created(t0)},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.Prune(0, t0.Add(1000*time.Hour)), nil
			},
		},
		{
			Name:  "a resume-pending lane can be pruned",
			Given: []events.Event{created(t0), events.ResumeMarked{Reason: "shutdown_timeout", At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.Prune(24*time.Hour, t0.Add(25*time.Hour)), nil
			},
			Then: []events.Event{events.EntryPruned{SessionID: sid, At: t0.Add(25 * time.Hour)}},
		},
	}
	for _, s := range scenarios {
		t.Run(s.Name, s.Run)
	}
}

func TestResolutionOf(t *testing.T) {
	if r := domain.ResolutionOf([]events.Event{events.Touched{At: t0}}); r.Created || r.ResetReason != "" {
		t.Fatalf("ResolutionOf(touched) = %+v", r)
	}
	if r := domain.ResolutionOf([]events.Event{created(t0)}); !r.Created || r.ResetReason != "" {
		t.Fatalf("ResolutionOf(created) = %+v", r)
	}
	if r := domain.ResolutionOf([]events.Event{autoReset("daily", false, t0)}); !r.Created || r.ResetReason != "daily" {
		t.Fatalf("ResolutionOf(auto reset) = %+v", r)
	}
}
