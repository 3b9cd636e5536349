package domain_test

import (
	"testing"
	"time"

	"hermes/domain"
	"hermes/events"
	"hermes/testfixtures"
)

func TestLane_EntryChanges(t *testing.T) {
	sid := "20260509_100000_aaaaaaaa"
	cont := "20260509_103000_cccccccc"
	soon := t0.Add(time.Minute)
	dayLater := t0.Add(25 * time.Hour)
	reset := events.SessionReset{SessionID: cont, PreviousSessionID: sid, At: t0}
	scenarios := []testfixtures.LaneScenario{
		{
			Name:  "a compression split moves the lane to its continuation",
			Given: []events.Event{created(t0)},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.Compress(cont, sid, true, soon) },
			Then:  []events.Event{events.SessionCompressed{SessionID: cont, PreviousSessionID: sid, At: soon}},
		},
		{
			Name:  "a split applied again changes nothing",
			Given: []events.Event{created(t0), events.SessionCompressed{SessionID: cont, PreviousSessionID: sid, At: t0}},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.Compress(cont, sid, true, soon) },
		},
		{
			Name:  "a split decided on a session the lane left is refused",
			Given: []events.Event{created(t0), reset},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.Compress("20260509_110000_dddddddd", sid, true, soon)
			},
			ThenErr: domain.ErrSessionMoved,
		},
		{
			Name:    "a split to a session that does not descend from the lane's is refused",
			Given:   []events.Event{created(t0)},
			When:    func(l domain.Lane) ([]events.Event, error) { return l.Compress(cont, sid, false, soon) },
			ThenErr: domain.ErrNotContinuation,
		},
		{
			Name:    "a split to an unsafe id is refused",
			Given:   []events.Event{created(t0)},
			When:    func(l domain.Lane) ([]events.Event, error) { return l.Compress("../x", sid, true, soon) },
			ThenErr: domain.ErrInvalidSessionID,
		},
		{
			Name:    "a split of a missing lane is refused",
			When:    func(l domain.Lane) ([]events.Event, error) { return l.Compress(cont, sid, true, soon) },
			ThenErr: domain.ErrLaneNotFound,
		},
		{
			Name:  "the gateway consumes the fresh-reset flag",
			Given: []events.Event{created(t0), reset},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.ConsumeFreshReset(cont, events.FreshResetConsumedExplicitly, soon)
			},
			Then: []events.Event{events.FreshResetConsumed{SessionID: cont, Cause: events.FreshResetConsumedExplicitly, At: soon}},
		},
		{
			Name:  "a consumed flag is not consumed twice",
			Given: []events.Event{created(t0), reset, events.FreshResetConsumed{SessionID: cont, Cause: events.FreshResetConsumedByTurn, At: t0}},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.ConsumeFreshReset("", events.FreshResetConsumedExplicitly, soon)
			},
		},
		{
			Name:  "the flag of a session the lane left is not the current one's",
			Given: []events.Event{created(t0), reset},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.ConsumeFreshReset(sid, events.FreshResetConsumedExplicitly, soon)
			},
		},
		{
			Name:    "consuming on a missing lane is refused",
			When:    func(l domain.Lane) ([]events.Event, error) { return l.ConsumeFreshReset("", "explicit", soon) },
			ThenErr: domain.ErrLaneNotFound,
		},
		{
			Name:  "a stuck-loop suspension at hermes' threshold is carried out",
			Given: []events.Event{created(t0)},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.SuspendStuckLoop(3, 3, soon) },
			Then:  []events.Event{events.Suspended{Reason: events.SuspendStuckLoop, At: soon}},
		},
		{
			Name:  "a lane hermes already suspended is not suspended twice",
			Given: []events.Event{created(t0), events.Suspended{Reason: events.SuspendStuckLoop, At: t0}},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.SuspendStuckLoop(0, 3, soon) },
		},
		{
			Name:    "a stuck-loop suspension below hermes' count is refused",
			Given:   []events.Event{created(t0)},
			When:    func(l domain.Lane) ([]events.Event, error) { return l.SuspendStuckLoop(2, 3, soon) },
			ThenErr: domain.ErrNotStuck,
		},
		{
			Name:  "the gateway finalizes an expired session",
			Given: []events.Event{created(t0)},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.FinalizeExpiryOf(sid, rules, false, dayLater) },
			Then:  []events.Event{events.ExpiryFinalized{SessionID: sid, At: dayLater}},
		},
		{
			Name:  "a finalized session is not finalized twice",
			Given: []events.Event{created(t0), events.ExpiryFinalized{SessionID: sid, At: dayLater}},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.FinalizeExpiryOf(sid, rules, true, dayLater) },
		},
		{
			Name:  "a finalization of a session the lane left changes nothing",
			Given: []events.Event{created(t0), reset},
			When:  func(l domain.Lane) ([]events.Event, error) { return l.FinalizeExpiryOf(sid, rules, false, dayLater) },
		},
		{
			Name:    "a session that has not expired is not finalized",
			Given:   []events.Event{created(t0)},
			When:    func(l domain.Lane) ([]events.Event, error) { return l.FinalizeExpiryOf(sid, rules, false, soon) },
			ThenErr: domain.ErrNotExpired,
		},
	}
	for _, s := range scenarios {
		t.Run(s.Name, s.Run)
	}
}

// TestEvolve_EntryChanges: a compression split moves only the session id
// (the token sums, the flags and an open turn stay), and a consumed flag
// is cleared only on the session it belongs to.
func TestEvolve_EntryChanges(t *testing.T) {
	sid := "20260509_100000_aaaaaaaa"
	cont := "20260509_103000_cccccccc"
	l := domain.Replay([]events.Event{
		created(t0),
		events.TurnStarted{TurnID: "t1", SessionID: sid, At: t0},
		events.TurnCompleted{TurnID: "t1", SessionID: sid, InputTokens: 10, OutputTokens: 5, At: t0},
		events.ResumeMarked{Reason: events.ResumeRestartInterrupted, At: t0},
		events.TurnStarted{TurnID: "t2", SessionID: sid, At: t0},
		events.SessionCompressed{SessionID: cont, PreviousSessionID: sid, At: t0.Add(time.Minute)},
	})
	if l.SessionID != cont || l.InputTokens != 10 || l.OutputTokens != 5 || !l.ResumePending || l.OpenTurnID != "t2" ||
		!l.CreatedAt.Equal(t0) || !l.HadActivity {
		t.Errorf("after a compression split: %+v, want session %s with sums, flags, open turn and creation kept", l, cont)
	}
	fresh := domain.Replay([]events.Event{created(t0), events.SessionReset{SessionID: cont, PreviousSessionID: sid, At: t0},
		events.FreshResetConsumed{SessionID: sid, Cause: events.FreshResetConsumedExplicitly, At: t0}})
	if !fresh.IsFreshReset {
		t.Errorf("a flag consumed for %s cleared the flag of %s", sid, cont)
	}
}
