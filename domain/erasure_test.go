package domain_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hermes/domain"
	"hermes/events"
)

// TestEvolve_LaneErased: a person erasure changes the same thing whether the
// lane is folded live (the erasure applied to the state) or rebuilt from the
// erased history (each earlier event rewritten by the erasure, as the store
// does): origin names and ids gone, queued items kept with their content
// erased, and nothing else of the lane's state touched.
func TestEvolve_LaneErased(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	origin := events.Source{Platform: "telegram", ChatID: "42", ChatType: "dm", UserID: "u42", UserName: "Ada Marker", ChatName: "Ada's chat"}
	history := []events.Event{
		events.SessionCreated{SessionKey: "agent:main:telegram:dm:42", SessionID: "s1", Origin: origin, DisplayName: "Ada's chat", Platform: "telegram", ChatType: "dm", At: t0},
		events.TurnStarted{TurnID: "t1", SessionID: "s1", At: t0.Add(time.Second)},
		events.QueueItemAdded{ItemID: "q1", Kind: events.QueueKindFollowup, Text: "secret one", Message: json.RawMessage(`{"m":"x"}`), Placement: events.QueuePlacementSlot, At: t0.Add(2 * time.Second)},
		events.QueueItemAdded{ItemID: "q2", Kind: events.QueueKindFollowup, Text: "secret two", Placement: events.QueuePlacementMerged, SlotItemID: "q1", At: t0.Add(3 * time.Second)},
		events.QueueItemAdded{ItemID: "q3", Kind: events.QueueKindQueue, Text: "secret three", Placement: events.QueuePlacementOverflow, At: t0.Add(4 * time.Second)},
		events.SessionReset{SessionID: "s2", PreviousSessionID: "s1", DisplayName: "Ada's chat", At: t0.Add(5 * time.Second)},
	}
	tests := []struct {
		name    string
		erasure events.LaneErased
	}{
		{"keyed on the person: queue texts too", events.LaneErased{ErasureID: "er1", QueueTexts: true, Reason: events.ErasurePerson, At: t0.Add(time.Hour)}},
		{"shared lane: origins only", events.LaneErased{ErasureID: "er1", Reason: events.ErasurePerson, At: t0.Add(time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := domain.Replay(history)
			live := domain.Evolve(before, tt.erasure)

			erased := make([]events.Event, 0, len(history)+1)
			for _, e := range history {
				e, _ = tt.erasure.Erase(e)
				erased = append(erased, e)
			}
			rebuilt := domain.Replay(append(erased, tt.erasure))
			if diff := cmp.Diff(live, rebuilt); diff != "" {
				t.Errorf("live erasure differs from the rebuilt one (-live +rebuilt):\n%s", diff)
			}
			if live.Origin.UserID != "" || live.Origin.UserName != "" || live.Origin.ChatName != "" || live.DisplayName != "" {
				t.Errorf("origin after erasure = %+v, display %q: person fields left", live.Origin, live.DisplayName)
			}
			if live.Origin.ChatID != "42" || live.SessionID != before.SessionID || live.Queue.Depth() != before.Queue.Depth() {
				t.Errorf("erasure changed the lane's state: %+v", live)
			}
			for _, it := range live.Queue.Items() {
				if tt.erasure.QueueTexts && (it.Text != "" || it.Message != nil) {
					t.Errorf("queued item %s kept its content %q", it.ID, it.Text)
				}
				if !tt.erasure.QueueTexts && it.Text == "" {
					t.Errorf("queued item %s lost its text on a shared lane", it.ID)
				}
			}
		})
	}
}
