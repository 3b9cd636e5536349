package events_test

import (
	"slices"
	"testing"

	"hermes/events"

	"github.com/google/go-cmp/cmp"
)

// TestPersonalClassMatchesErase checks, over every event type fully
// populated, that each erasure erases exactly the events of the classes it
// names, leaving them as PersonalClass says: a store that destroys the keys
// of those classes leaves what Erase would leave.
func TestPersonalClassMatchesErase(t *testing.T) {
	const id = "er_4f1c2d3e"
	erasures := []events.Erasure{
		events.TranscriptErased{Scope: events.EraseMessages},
		events.TranscriptErased{Scope: events.EraseTranscript},
		events.LaneErased{ErasureID: id},
		events.LaneErased{ErasureID: id, QueueTexts: true},
		events.TopicsErased{ErasureID: id},
		events.ErasureCompleted{ErasureID: id},
		events.ErasureCompleted{ErasureID: "another"},
	}
	personal := 0
	for _, e := range goldenEvents() {
		class, shadow := events.PersonalClass(e)
		if class != "" {
			personal++
			if again, _ := events.PersonalClass(shadow); again != "" {
				t.Errorf("PersonalClass(erased %s) = %q, want \"\" (erased is erased)", e.EventType(), again)
			}
		}
		for _, x := range erasures {
			got, changed := x.Erase(e)
			named := slices.Contains(events.ErasedClasses(x), class)
			if changed != named {
				t.Errorf("%T%+v.Erase(%s) changed = %v, but its classes %v hold %q: %v", x, x, e.EventType(), changed, events.ErasedClasses(x), class, named)
				continue
			}
			if changed {
				if diff := cmp.Diff(shadow, got); diff != "" {
					t.Errorf("%s erased by %T differs from PersonalClass's (-class +erase):\n%s", e.EventType(), x, diff)
				}
			}
		}
	}
	if personal < 10 {
		t.Errorf("%d event types hold personal content, want at least 10 (the test sees too few)", personal)
	}
}
