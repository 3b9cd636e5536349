package transcripts

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"hermes/events"
)

// TestStateEventsHandleTheirOwnType: every entry of stateEvents is keyed by
// the type its handler expects, so Apply of the stored golden event of that
// type runs its handler without a failed type assertion or an error.
func TestStateEventsHandleTheirOwnType(t *testing.T) {
	for typ := range stateEvents {
		t.Run(typ, func(t *testing.T) {
			// Given the golden event of typ, as events stores it.
			data, err := os.ReadFile(filepath.Join("..", "..", "events", "testdata", typ+".golden"))
			if err != nil {
				t.Fatalf("read golden of %s: %v", typ, err)
			}
			e, err := events.Decode(typ, data)
			if err != nil {
				t.Fatalf("Decode(%s) error = %v", typ, err)
			}
			if got := e.EventType(); got != typ {
				t.Fatalf("Decode(%s).EventType() = %q, want %q", typ, got, typ)
			}
			p := openTemp(t)
			env := events.Envelope{Stream: "test", Version: 1, Position: 1, Type: typ, Event: e}

			// When it is applied.
			err = p.Apply(context.Background(), []events.Envelope{env})

			// Then its handler ran without failing.
			if err != nil {
				t.Fatalf("Apply(%s) error = %v", typ, err)
			}
		})
	}
}

// TestStateHandlerOfSkipsOtherEvents: events outside stateEvents (and no
// event at all) leave state.db as it is.
func TestStateHandlerOfSkipsOtherEvents(t *testing.T) {
	for _, e := range []events.Event{
		nil,
		events.Touched{},
		events.TurnStarted{},
		events.QueueItemAdded{},
		events.NoticeDelivered{},
		events.GatewayStarted{},
	} {
		if _, ok := stateHandlerOf(e); ok {
			t.Errorf("stateHandlerOf(%T) = true, want false", e)
		}
	}
}
