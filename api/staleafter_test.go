package api_test

import (
	"testing"

	"hermes/api"
	"hermes/events"
)

// TestStaleAfter: the events an append's checks must not answer past
// unapplied are deletions, erasures and switches; the rest only add.
func TestStaleAfter(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    events.Event
		want bool
	}{
		{"delete", events.TranscriptDeleted{SessionID: "s"}, true},
		{"lane erased", events.LaneErased{}, true},
		{"transcript erased", events.TranscriptErased{}, true},
		{"switch", events.SessionSwitched{}, true},
		{"message", events.MessageAppended{SessionID: "s"}, false},
		{"session created", events.SessionCreated{}, false},
		{"activity", events.ActivityRecorded{SessionID: "s"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := api.StaleAfter(tc.e); got != tc.want {
				t.Fatalf("StaleAfter(%T) = %v, want %v", tc.e, got, tc.want)
			}
		})
	}
}
