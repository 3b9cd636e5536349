package domain_test

import (
	"fmt"
	"time"

	"hermes/domain"
	"hermes/events"
)

// A lane decision: Resolve turns "a message arrived at now" into events,
// Replay (or Evolve) folds them into the lane. Time and the random part of
// a new session id come in as arguments, so the decision is reproducible.
func ExampleLane_Resolve() {
	src := domain.SessionSource{Platform: "telegram", ChatID: "99", ChatType: "dm", UserID: "42"}
	key := domain.BuildSessionKey(src, domain.DefaultKeyOptions())
	rules := domain.LaneRules{
		Policy:   domain.ResetPolicy{Mode: domain.ResetIdle, IdleMinutes: 60},
		Location: time.UTC,
	}
	resolve := func(lane domain.Lane, at time.Time, entropy string) []events.Event {
		evs, err := lane.Resolve(domain.ResolveRequest{Source: src, SessionKey: key, Rules: rules, Entropy: entropy}, at)
		if err != nil {
			panic(err)
		}
		return evs
	}
	t0 := time.Date(2026, 5, 9, 10, 0, 0, 0, time.UTC)

	// The first message: the lane does not exist, a session is created.
	history := resolve(domain.Lane{}, t0, "aaaaaaaa")
	lane := domain.Replay(history)
	fmt.Println(key)
	fmt.Println(history[0].EventType(), lane.SessionID)

	// Half an hour later the session continues.
	evs := resolve(lane, t0.Add(30*time.Minute), "bbbbbbbb")
	lane = domain.Evolve(lane, evs[0])
	fmt.Println(evs[0].EventType(), lane.SessionID)

	// After more than the 60 idle minutes it is replaced.
	evs = resolve(lane, t0.Add(3*time.Hour), "cccccccc")
	reset := evs[0].(events.SessionAutoReset)
	lane = domain.Evolve(lane, reset)
	fmt.Println(reset.EventType(), reset.Reason, reset.PreviousSessionID, "->", lane.SessionID)
	// Output:
	// agent:main:telegram:dm:99
	// lane.session_created.v1 20260509_100000_aaaaaaaa
	// lane.touched.v1 20260509_100000_aaaaaaaa
	// lane.session_auto_reset.v1 idle 20260509_100000_aaaaaaaa -> 20260509_130000_cccccccc
}
