package domain_test

import (
	"slices"
	"testing"

	"hermes/domain"
	"hermes/events"
)

func TestRunEnds_Observe(t *testing.T) {
	started := events.GatewayStarted{At: t0}
	timedOut := events.DrainFinished{TimedOut: true, OpenLanes: []string{"a"}, At: t0}
	clean := events.DrainFinished{OpenLanes: []string{}, At: t0}
	blind := events.DrainFinished{TimedOut: true, OpenLanes: []string{}, At: t0}
	crash := events.RunInterrupted{OpenLanes: []string{"b"}, At: t0}
	runStarted := events.GatewayRunStarted{Gateway: "default", RunID: "r1", LeaseSeconds: 60, At: t0}
	runLost := events.GatewayRunLost{RunID: "r1", Cause: events.RunLostLeaseExpired, OpenLanes: []string{"b"}, At: t0}
	tests := []struct {
		name    string
		given   []events.Event
		when    events.Event
		wantCut []string
		wantEnd bool
	}{
		{name: "a drain that timed out ends the run, cutting its open lanes", given: []events.Event{started}, when: timedOut, wantCut: []string{"a"}, wantEnd: true},
		{name: "a completed drain ends the run, cutting none", given: []events.Event{started}, when: clean, wantCut: []string{}, wantEnd: true},
		{name: "a crash ends the run, cutting its open lanes", given: []events.Event{started}, when: crash, wantCut: []string{"b"}, wantEnd: true},
		{name: "a crash after a finished drain was counted by the drain", given: []events.Event{started, timedOut}, when: crash},
		{name: "a crash after a completed drain was counted by the drain", given: []events.Event{started, clean}, when: crash},
		{name: "a drain blind to the open turns is no known end", given: []events.Event{started}, when: blind},
		{name: "a crash after a blind drain counts", given: []events.Event{started, blind}, when: crash, wantCut: []string{"b"}, wantEnd: true},
		{name: "a new start counts its own end again", given: []events.Event{started, timedOut, started}, when: crash, wantCut: []string{"b"}, wantEnd: true},
		{name: "an adoption ends the run like a crash", given: []events.Event{started}, when: events.RunAdopted{By: "n2", OpenLanes: []string{"c"}, At: t0}, wantCut: []string{"c"}, wantEnd: true},
		{name: "an adoption after the node's own crash record was counted by it", given: []events.Event{started, crash}, when: events.RunAdopted{By: "n2", OpenLanes: []string{"b"}, At: t0}},
		{name: "a crash record after an adoption was counted by the adoption", given: []events.Event{started, events.RunAdopted{By: "n2", OpenLanes: []string{"b"}, At: t0}}, when: crash},
		{name: "other gateway events are no end", given: []events.Event{started}, when: events.DrainStarted{OpenLanes: []string{"a"}, At: t0}},
		{name: "a gateway run's stop ends it, cutting the turns still open", given: []events.Event{runStarted}, when: events.GatewayRunStopped{RunID: "r1", OpenLanes: []string{"a"}, At: t0}, wantCut: []string{"a"}, wantEnd: true},
		{name: "a gateway run's stop after a completed drain cuts none", given: []events.Event{runStarted}, when: events.GatewayRunStopped{RunID: "r1", OpenLanes: []string{}, At: t0}, wantCut: []string{}, wantEnd: true},
		{name: "a lost gateway run ends it like a crash", given: []events.Event{runStarted}, when: runLost, wantCut: []string{"b"}, wantEnd: true},
		{name: "a gateway run lost twice counts once", given: []events.Event{runStarted, runLost}, when: runLost},
		{name: "the next gateway run counts its own end again", given: []events.Event{runStarted, runLost, runStarted}, when: runLost, wantCut: []string{"b"}, wantEnd: true},
		{name: "a lease renewal is no end", given: []events.Event{runStarted}, when: events.LeaseRenewed{Holder: "r1", Until: t0, At: t0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r domain.RunEnds
			for _, e := range tt.given {
				r.Observe(e)
			}
			cut, end := r.Observe(tt.when)
			if end != tt.wantEnd || !slices.Equal(cut, tt.wantCut) {
				t.Fatalf("Observe = %v, %t; want %v, %t", cut, end, tt.wantCut, tt.wantEnd)
			}
		})
	}
}

func TestClearsRestartCount(t *testing.T) {
	for _, tt := range []struct {
		e    events.Event
		want bool
	}{
		{events.TurnCompleted{TurnID: "t", At: t0}, true},
		{events.TurnCompleted{TurnID: "t", Failed: true, At: t0}, false},
		{events.TurnInterrupted{TurnID: "t", Reason: events.ResumeRestartTimeout, At: t0}, false},
		{events.SessionReset{SessionID: "x", At: t0}, true},
		{events.SessionSwitched{SessionID: "x", At: t0}, true},
		{events.SessionAutoReset{SessionID: "x", At: t0}, true},
		{events.Suspended{Reason: events.SuspendStuckLoop, At: t0}, true},
		{events.ResumeMarked{Reason: events.ResumeRestartTimeout, At: t0}, false},
	} {
		if got := domain.ClearsRestartCount(tt.e); got != tt.want {
			t.Errorf("ClearsRestartCount(%T %+v) = %t, want %t", tt.e, tt.e, got, tt.want)
		}
	}
}
