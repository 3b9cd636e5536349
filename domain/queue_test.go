package domain_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hermes/domain"
	"hermes/events"
	"hermes/testfixtures"
)

var (
	queueRules = domain.DefaultQueueRules()
	mergeRules = domain.QueueRules{BusyInputMode: domain.BusyInputQueue, MaxItems: 32, TTL: 24 * time.Hour}
)

func added(id, kind, text, placement string, at time.Time) events.QueueItemAdded {
	return events.QueueItemAdded{ItemID: id, Kind: kind, Text: text, Placement: placement, At: at}
}

func enqueue(id, kind, text string, r domain.QueueRules, now time.Time) func(domain.Lane) ([]events.Event, error) {
	return func(l domain.Lane) ([]events.Event, error) {
		return l.Enqueue(domain.QueueArrival{ItemID: id, Kind: kind, Text: text}, r, now)
	}
}

func takeNext(r domain.QueueRules, now time.Time) func(domain.Lane) ([]events.Event, error) {
	return func(l domain.Lane) ([]events.Event, error) { return l.TakeNext(r, now) }
}

const (
	followup = events.QueueKindFollowup
	queued   = events.QueueKindQueue
)

func TestLane_Enqueue(t *testing.T) {
	soon := t0.Add(time.Minute)
	slotA := added("A", queued, "a", events.QueuePlacementSlot, t0)
	slotF := added("F", followup, "f", events.QueuePlacementSlot, t0)
	scenarios := []testfixtures.LaneScenario{
		{
			Name:  "a follow-up takes the free slot",
			Given: []events.Event{created(t0)},
			When:  enqueue("F", followup, "f", queueRules, soon),
			Then:  []events.Event{added("F", followup, "f", events.QueuePlacementSlot, soon)},
		},
		{
			Name:  "a second follow-up replaces the first in interrupt mode",
			Given: []events.Event{created(t0), slotF},
			When:  enqueue("G", followup, "g", queueRules, soon),
			Then: []events.Event{events.QueueItemAdded{ItemID: "G", Kind: followup, Text: "g",
				Placement: events.QueuePlacementReplaced, SlotItemID: "F", At: soon}},
		},
		{
			Name:  "steer replaces like interrupt",
			Given: []events.Event{created(t0), slotF},
			When:  enqueue("G", followup, "g", domain.QueueRules{BusyInputMode: domain.BusyInputSteer, MaxItems: 32, TTL: time.Hour}, soon),
			Then: []events.Event{events.QueueItemAdded{ItemID: "G", Kind: followup, Text: "g",
				Placement: events.QueuePlacementReplaced, SlotItemID: "F", At: soon}},
		},
		{
			Name:  "a second follow-up merges into the first in queue mode",
			Given: []events.Event{created(t0), slotF},
			When:  enqueue("G", followup, "g", mergeRules, soon),
			Then: []events.Event{events.QueueItemAdded{ItemID: "G", Kind: followup, Text: "g",
				Placement: events.QueuePlacementMerged, SlotItemID: "F", At: soon}},
		},
		{
			Name:  "a follow-up never merges into a /queue item: it waits in the overflow",
			Given: []events.Event{created(t0), slotA},
			When:  enqueue("F", followup, "f", mergeRules, soon),
			Then:  []events.Event{added("F", followup, "f", events.QueuePlacementOverflow, soon)},
		},
		{
			Name:  "a /queue item takes the free slot",
			Given: []events.Event{created(t0)},
			When:  enqueue("A", queued, "a", queueRules, soon),
			Then:  []events.Event{added("A", queued, "a", events.QueuePlacementSlot, soon)},
		},
		{
			Name:  "a /queue item behind a pending follow-up goes to the overflow",
			Given: []events.Event{created(t0), slotF},
			When:  enqueue("A", queued, "a", queueRules, soon),
			Then:  []events.Event{added("A", queued, "a", events.QueuePlacementOverflow, soon)},
		},
		{
			Name: "a /queue item does not jump the overflow when the slot is empty",
			Given: []events.Event{created(t0), slotA, added("B", queued, "b", events.QueuePlacementOverflow, t0),
				added("C", queued, "c", events.QueuePlacementOverflow, t0),
				events.QueueItemsExpired{ItemIDs: []string{"A"}, At: t0}},
			When: enqueue("D", queued, "d", queueRules, soon),
			Then: []events.Event{added("D", queued, "d", events.QueuePlacementOverflow, soon)},
		},
		{
			Name:  "stale items are dropped before the arrival is placed",
			Given: []events.Event{created(t0), slotA},
			When:  enqueue("B", queued, "b", queueRules, t0.Add(24*time.Hour+time.Nanosecond)),
			Then: []events.Event{
				events.QueueItemsExpired{ItemIDs: []string{"A"}, At: t0.Add(24*time.Hour + time.Nanosecond)},
				added("B", queued, "b", events.QueuePlacementSlot, t0.Add(24*time.Hour+time.Nanosecond)),
			},
		},
		{
			Name:  "an item exactly TTL old is not stale",
			Given: []events.Event{created(t0), slotA},
			When:  enqueue("B", queued, "b", queueRules, t0.Add(24*time.Hour)),
			Then:  []events.Event{added("B", queued, "b", events.QueuePlacementOverflow, t0.Add(24*time.Hour))},
		},
		{
			Name:  "the message is kept, compacted",
			Given: []events.Event{created(t0)},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.Enqueue(domain.QueueArrival{ItemID: "P", Kind: followup, Message: json.RawMessage(`{ "media_urls": ["a.png"] }`)}, queueRules, soon)
			},
			Then: []events.Event{events.QueueItemAdded{ItemID: "P", Kind: followup, Message: json.RawMessage(`{"media_urls":["a.png"]}`),
				Placement: events.QueuePlacementSlot, At: soon}},
		},
		{Name: "a missing lane is refused", When: enqueue("A", queued, "a", queueRules, soon), ThenErr: domain.ErrLaneNotFound},
		{Name: "a pruned lane is refused", Given: []events.Event{created(t0), events.EntryPruned{At: t0}}, When: enqueue("A", queued, "a", queueRules, soon), ThenErr: domain.ErrLaneNotFound},
		{Name: "an unknown kind is refused", Given: []events.Event{created(t0)}, When: enqueue("A", "later", "a", queueRules, soon), ThenErr: domain.ErrInvalidArgument},
		{Name: "an empty item is refused", Given: []events.Event{created(t0)}, When: enqueue("A", queued, "", queueRules, soon), ThenErr: domain.ErrInvalidArgument},
		{Name: "an empty id is refused", Given: []events.Event{created(t0)}, When: enqueue("", queued, "a", queueRules, soon), ThenErr: domain.ErrInvalidArgument},
		{Name: "an id already queued is refused", Given: []events.Event{created(t0), slotA}, When: enqueue("A", queued, "again", queueRules, soon), ThenErr: domain.ErrInvalidArgument},
		{
			Name:    "text over 64 KiB is refused",
			Given:   []events.Event{created(t0)},
			When:    enqueue("A", queued, strings.Repeat("x", domain.MaxQueueTextBytes+1), queueRules, soon),
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name:  "a message that is not an object is refused",
			Given: []events.Event{created(t0)},
			When: func(l domain.Lane) ([]events.Event, error) {
				return l.Enqueue(domain.QueueArrival{ItemID: "A", Kind: queued, Text: "a", Message: json.RawMessage(`["x"]`)}, queueRules, soon)
			},
			ThenErr: domain.ErrInvalidArgument,
		},
		{
			Name:  "a merge that would pass 64 KiB of text is refused as full",
			Given: []events.Event{created(t0), added("F", followup, strings.Repeat("x", domain.MaxQueueTextBytes-3), events.QueuePlacementSlot, t0)},
			When:  enqueue("G", followup, "g", mergeRules, soon),
			// 65533 + "\n\n" + "g" = 65536 bytes: exactly the limit.
			Then: []events.Event{events.QueueItemAdded{ItemID: "G", Kind: followup, Text: "g",
				Placement: events.QueuePlacementMerged, SlotItemID: "F", At: soon}},
		},
		{
			Name:    "a merge one byte past 64 KiB of text is refused as full",
			Given:   []events.Event{created(t0), added("F", followup, strings.Repeat("x", domain.MaxQueueTextBytes-2), events.QueuePlacementSlot, t0)},
			When:    enqueue("G", followup, "g", mergeRules, soon),
			ThenErr: domain.ErrQueueFull,
		},
		{Name: "a zero cap is refused", Given: []events.Event{created(t0)}, When: enqueue("A", queued, "a", domain.QueueRules{TTL: time.Hour}, soon), ThenErr: domain.ErrInvalidArgument},
	}
	for _, s := range scenarios {
		t.Run(s.Name, s.Run)
	}
}

// fill queues n /queue items on a fresh lane.
func fill(n int) []events.Event {
	h := []events.Event{created(t0)}
	for i := range n {
		placement := events.QueuePlacementOverflow
		if i == 0 {
			placement = events.QueuePlacementSlot
		}
		h = append(h, added(fmt.Sprintf("q%02d", i+1), queued, fmt.Sprint(i+1), placement, t0))
	}
	return h
}

func TestLane_EnqueueCap(t *testing.T) {
	soon := t0.Add(time.Minute)
	scenarios := []testfixtures.LaneScenario{
		{
			Name:  "the 32nd item is accepted",
			Given: fill(31),
			When:  enqueue("q32", queued, "32", queueRules, soon),
			Then:  []events.Event{added("q32", queued, "32", events.QueuePlacementOverflow, soon)},
		},
		{Name: "the 33rd /queue item is refused", Given: fill(32), When: enqueue("q33", queued, "33", queueRules, soon), ThenErr: domain.ErrQueueFull},
		{Name: "the 33rd follow-up is refused", Given: fill(32), When: enqueue("f33", followup, "33", queueRules, soon), ThenErr: domain.ErrQueueFull},
		{
			Name:  "a merge at the cap adds no item and is accepted",
			Given: append([]events.Event{created(t0), added("F", followup, "f", events.QueuePlacementSlot, t0)}, fill(32)[2:]...),
			When:  enqueue("G", followup, "g", mergeRules, soon),
			Then: []events.Event{events.QueueItemAdded{ItemID: "G", Kind: followup, Text: "g",
				Placement: events.QueuePlacementMerged, SlotItemID: "F", At: soon}},
		},
		{
			Name:  "a stale item frees its place",
			Given: append(fill(32), events.QueueItemsExpired{ItemIDs: []string{"q05"}, At: t0}),
			When:  enqueue("q33", queued, "33", queueRules, soon),
			Then:  []events.Event{added("q33", queued, "33", events.QueuePlacementOverflow, soon)},
		},
		{
			Name:  "a custom cap",
			Given: fill(2),
			When:  enqueue("q3", queued, "3", domain.QueueRules{MaxItems: 2, TTL: time.Hour}, soon),
			// fill's items were queued at t0, within the hour.
			ThenErr: domain.ErrQueueFull,
		},
	}
	for _, s := range scenarios {
		t.Run(s.Name, s.Run)
	}
	_, err := domain.Replay(fill(32)).Enqueue(domain.QueueArrival{ItemID: "x", Kind: queued, Text: "x"}, queueRules, soon)
	if got, want := fmt.Sprint(err), "queue full (32 items)"; got != want {
		t.Errorf("Enqueue at the cap error = %q, want %q", got, want)
	}
}

func taken(id, kind, text, from, staged string, at time.Time) events.QueueItemTaken {
	return events.QueueItemTaken{ItemID: id, Kind: kind, Text: text, From: from, StagedItemID: staged, At: at}
}

func TestLane_TakeNext(t *testing.T) {
	soon := t0.Add(time.Minute)
	scenarios := []testfixtures.LaneScenario{
		{Name: "an empty queue decides nothing", Given: []events.Event{created(t0)}, When: takeNext(queueRules, soon)},
		{Name: "a missing lane is refused", When: takeNext(queueRules, soon), ThenErr: domain.ErrLaneNotFound},
		{
			Name:  "the slot item is taken",
			Given: fill(1),
			When:  takeNext(queueRules, soon),
			Then:  []events.Event{taken("q01", queued, "1", events.QueueFromSlot, "", soon)},
		},
		{
			Name:  "taking the slot stages the overflow head",
			Given: fill(3),
			When:  takeNext(queueRules, soon),
			Then:  []events.Event{taken("q01", queued, "1", events.QueueFromSlot, "q02", soon)},
		},
		{
			Name:  "with the slot empty the overflow head runs and nothing is staged",
			Given: append(fill(3), events.QueueItemsExpired{ItemIDs: []string{"q01"}, At: t0}),
			When:  takeNext(queueRules, soon),
			Then:  []events.Event{taken("q02", queued, "2", events.QueueFromOverflow, "", soon)},
		},
		{
			Name:  "a stale slot is dropped first, then the overflow head runs",
			Given: append(fill(1), added("late", queued, "late", events.QueuePlacementOverflow, t0.Add(2*time.Hour))),
			When:  takeNext(queueRules, t0.Add(25*time.Hour)),
			Then: []events.Event{
				events.QueueItemsExpired{ItemIDs: []string{"q01"}, At: t0.Add(25 * time.Hour)},
				taken("late", queued, "late", events.QueueFromOverflow, "", t0.Add(25*time.Hour)),
			},
		},
		{
			Name:  "only stale items: they expire and nothing is taken",
			Given: fill(2),
			When:  takeNext(queueRules, t0.Add(25*time.Hour)),
			Then:  []events.Event{events.QueueItemsExpired{ItemIDs: []string{"q01", "q02"}, At: t0.Add(25 * time.Hour)}},
		},
		{
			Name: "a merged follow-up runs with both texts and messages",
			Given: []events.Event{created(t0),
				events.QueueItemAdded{ItemID: "F", Kind: followup, Text: "fix that bug", Message: json.RawMessage(`{"message_id":"1","media_urls":["a.png"]}`), Placement: events.QueuePlacementSlot, At: t0},
				events.QueueItemAdded{ItemID: "G", Kind: followup, Text: "in the second function", Message: json.RawMessage(`{"message_id":"2","media_urls":["b.png"]}`), Placement: events.QueuePlacementMerged, SlotItemID: "F", At: t0},
				events.QueueItemAdded{ItemID: "H", Kind: followup, Text: "the one named validate", Placement: events.QueuePlacementMerged, SlotItemID: "F", At: t0},
			},
			When: takeNext(mergeRules, soon),
			Then: []events.Event{events.QueueItemTaken{ItemID: "F", Kind: followup,
				Text:    "fix that bug\n\nin the second function\n\nthe one named validate",
				Message: json.RawMessage(`{"media_urls":["a.png","b.png"],"message_id":"2"}`),
				From:    events.QueueFromSlot, At: soon}},
		},
		{
			Name: "a replaced follow-up runs as the newest alone",
			Given: []events.Event{created(t0), added("F", followup, "first", events.QueuePlacementSlot, t0),
				events.QueueItemAdded{ItemID: "G", Kind: followup, Text: "second", Placement: events.QueuePlacementReplaced, SlotItemID: "F", At: t0}},
			When: takeNext(queueRules, soon),
			Then: []events.Event{taken("G", followup, "second", events.QueueFromSlot, "", soon)},
		},
	}
	for _, s := range scenarios {
		t.Run(s.Name, s.Run)
	}
}

func TestLane_ClearQueue(t *testing.T) {
	soon := t0.Add(time.Minute)
	clear := func(now time.Time) func(domain.Lane) ([]events.Event, error) {
		return func(l domain.Lane) ([]events.Event, error) { return l.ClearQueue(queueRules, now) }
	}
	scenarios := []testfixtures.LaneScenario{
		{Name: "an empty queue changes nothing", Given: []events.Event{created(t0)}, When: clear(soon)},
		{Name: "a missing lane is refused", When: clear(soon), ThenErr: domain.ErrLaneNotFound},
		{
			Name:  "slot and overflow are cleared",
			Given: fill(3),
			When:  clear(soon),
			Then:  []events.Event{events.QueueCleared{ItemIDs: []string{"q01", "q02", "q03"}, Reason: events.QueueClearedByCommand, At: soon}},
		},
		{
			Name:  "stale items expire rather than count as cleared",
			Given: append(fill(1), added("late", queued, "late", events.QueuePlacementOverflow, t0.Add(2*time.Hour))),
			When:  clear(t0.Add(25 * time.Hour)),
			Then: []events.Event{
				events.QueueItemsExpired{ItemIDs: []string{"q01"}, At: t0.Add(25 * time.Hour)},
				events.QueueCleared{ItemIDs: []string{"late"}, Reason: events.QueueClearedByCommand, At: t0.Add(25 * time.Hour)},
			},
		},
	}
	for _, s := range scenarios {
		t.Run(s.Name, s.Run)
	}
}

// queueShape is the queue as ids: slot ("" when free) and overflow.
type queueShape struct {
	Slot     string
	Overflow []string
	Depth    int
}

func shapeOf(q domain.Queue) queueShape {
	s := queueShape{Depth: q.Depth(), Overflow: []string{}}
	if q.Slot != nil {
		s.Slot = q.Slot.Text
	}
	for _, it := range q.Overflow {
		s.Overflow = append(s.Overflow, it.Text)
	}
	return s
}

// queueStep is one step of a walk through the queue: an action, what it
// took (when a take), and the queue after it.
type queueStep struct {
	name  string
	do    func(l domain.Lane, now time.Time) ([]events.Event, error)
	runs  string
	after queueShape
}

func walk(t *testing.T, given []events.Event, steps []queueStep) domain.Lane {
	t.Helper()
	history := given
	l := domain.Replay(history)
	now := t0
	for _, st := range steps {
		now = now.Add(time.Second)
		decided, err := st.do(l, now)
		if err != nil {
			t.Fatalf("%s: error %v", st.name, err)
		}
		runs := ""
		for _, e := range decided {
			if tk, ok := e.(events.QueueItemTaken); ok {
				runs = tk.Text
			}
			l = domain.Evolve(l, e)
			history = append(history, e)
		}
		if runs != st.runs {
			t.Errorf("%s: runs %q, want %q", st.name, runs, st.runs)
		}
		if diff := cmp.Diff(st.after, shapeOf(l.Queue)); diff != "" {
			t.Errorf("%s: queue mismatch (-want +got):\n%s", st.name, diff)
		}
		if diff := cmp.Diff(l, domain.Replay(history)); diff != "" {
			t.Fatalf("%s: Replay differs from the evolved lane (-evolved +replayed):\n%s", st.name, diff)
		}
	}
	return l
}

func enq(kind, text string, r domain.QueueRules) func(domain.Lane, time.Time) ([]events.Event, error) {
	return func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.Enqueue(domain.QueueArrival{ItemID: "id-" + text, Kind: kind, Text: text}, r, now)
	}
}

func take(l domain.Lane, now time.Time) ([]events.Event, error) { return l.TakeNext(queueRules, now) }

// TestQueue_WorkedExample is catalogue §5's worked example, step by step:
// A, B and C are queued while a turn runs, then each turn end takes the
// slot and stages the overflow head.
func TestQueue_WorkedExample(t *testing.T) {
	walk(t, []events.Event{created(t0)}, []queueStep{
		{"enqueue A", enq(queued, "A", queueRules), "", queueShape{"A", []string{}, 1}},
		{"enqueue B", enq(queued, "B", queueRules), "", queueShape{"A", []string{"B"}, 2}},
		{"enqueue C", enq(queued, "C", queueRules), "", queueShape{"A", []string{"B", "C"}, 3}},
		{"turn ends: A runs, B staged", take, "A", queueShape{"B", []string{"C"}, 2}},
		{"turn ends: B runs, C staged", take, "B", queueShape{"C", []string{}, 1}},
		{"turn ends: C runs", take, "C", queueShape{"", []string{}, 0}},
		{"turn ends: nothing queued", take, "", queueShape{"", []string{}, 0}},
	})
}

// TestQueue_EmptySlotEdgeCase: the slot is empty at drain time and the
// overflow is [X, Y]: X runs immediately and Y stays in the overflow, not
// staged. The state arises when the slot item expired.
func TestQueue_EmptySlotEdgeCase(t *testing.T) {
	given := []events.Event{created(t0),
		added("W", queued, "W", events.QueuePlacementSlot, t0),
		added("X", queued, "X", events.QueuePlacementOverflow, t0),
		added("Y", queued, "Y", events.QueuePlacementOverflow, t0),
		events.QueueItemsExpired{ItemIDs: []string{"W"}, At: t0},
	}
	walk(t, given, []queueStep{
		{"slot empty: X runs, Y not staged", take, "X", queueShape{"", []string{"Y"}, 1}},
		{"a new /queue item waits behind Y", enq(queued, "Z", queueRules), "", queueShape{"", []string{"Y", "Z"}, 2}},
		{"Y runs, Z not staged", take, "Y", queueShape{"", []string{"Z"}, 1}},
		{"Z runs", take, "Z", queueShape{"", []string{}, 0}},
	})
}

// TestQueue_FollowupModes: burst collapse in interrupt mode, merge in queue
// mode, and a follow-up behind a /queue item keeping its own turn.
func TestQueue_FollowupModes(t *testing.T) {
	t.Run("interrupt replaces", func(t *testing.T) {
		walk(t, []events.Event{created(t0)}, []queueStep{
			{"first", enq(followup, "fix that bug", queueRules), "", queueShape{"fix that bug", []string{}, 1}},
			{"second", enq(followup, "in the second function", queueRules), "", queueShape{"in the second function", []string{}, 1}},
			{"runs the newest", take, "in the second function", queueShape{"", []string{}, 0}},
		})
	})
	t.Run("queue merges", func(t *testing.T) {
		walk(t, []events.Event{created(t0)}, []queueStep{
			{"first", enq(followup, "fix that bug", mergeRules), "", queueShape{"fix that bug", []string{}, 1}},
			{"second", enq(followup, "in the second function", mergeRules), "", queueShape{"fix that bug\n\nin the second function", []string{}, 1}},
			{"/queue behind it", enq(queued, "then deploy", mergeRules), "", queueShape{"fix that bug\n\nin the second function", []string{"then deploy"}, 2}},
			{"runs the merged follow-up", take, "fix that bug\n\nin the second function", queueShape{"then deploy", []string{}, 1}},
			{"a follow-up behind the staged /queue item", enq(followup, "and tag it", mergeRules), "", queueShape{"then deploy", []string{"and tag it"}, 2}},
			{"runs /queue", take, "then deploy", queueShape{"and tag it", []string{}, 1}},
			{"runs the follow-up", take, "and tag it", queueShape{"", []string{}, 0}},
		})
	})
}

// TestQueue_ClearedOnReset: /new and /reset discard the overflow and keep
// the slot (Hermes); automatic resets and /resume keep the queue; /queue
// clear empties both.
func TestQueue_ClearedOnReset(t *testing.T) {
	reset := func(l domain.Lane, now time.Time) ([]events.Event, error) { return l.Reset("", rules, "cccccccc", now) }
	walk(t, []events.Event{created(t0)}, []queueStep{
		{"enqueue A", enq(queued, "A", queueRules), "", queueShape{"A", []string{}, 1}},
		{"enqueue B", enq(queued, "B", queueRules), "", queueShape{"A", []string{"B"}, 2}},
		{"enqueue C", enq(queued, "C", queueRules), "", queueShape{"A", []string{"B", "C"}, 3}},
		{"/new", reset, "", queueShape{"A", []string{}, 1}},
		{"enqueue D", enq(queued, "D", queueRules), "", queueShape{"A", []string{"D"}, 2}},
		{"/resume keeps it", func(l domain.Lane, now time.Time) ([]events.Event, error) {
			return l.Switch("20260101_000000_cccccccc", now)
		}, "", queueShape{"A", []string{"D"}, 2}},
		{"idle auto-reset keeps it", func(l domain.Lane, now time.Time) ([]events.Event, error) {
			return l.Resolve(domain.ResolveRequest{Source: alice, SessionKey: laneKey, Rules: rules, Entropy: "dddddddd"}, now.Add(48*time.Hour))
		}, "", queueShape{"A", []string{"D"}, 2}},
		{"force_new discards the overflow", func(l domain.Lane, now time.Time) ([]events.Event, error) {
			return l.Resolve(domain.ResolveRequest{Source: alice, SessionKey: laneKey, ForceNew: true, Rules: rules, Entropy: "eeeeeeee"}, now)
		}, "", queueShape{"A", []string{}, 1}},
		{"enqueue E", enq(queued, "E", queueRules), "", queueShape{"A", []string{"E"}, 2}},
		{"/queue clear", func(l domain.Lane, now time.Time) ([]events.Event, error) { return l.ClearQueue(queueRules, now) }, "", queueShape{"", []string{}, 0}},
	})
}

func TestQueue_Fresh(t *testing.T) {
	l := domain.Replay(append(fill(2), added("late", queued, "late", events.QueuePlacementOverflow, t0.Add(2*time.Hour))))
	got := shapeOf(l.Queue.Fresh(24*time.Hour, t0.Add(25*time.Hour)))
	if diff := cmp.Diff(queueShape{"", []string{"late"}, 1}, got); diff != "" {
		t.Errorf("Fresh(24h, t0+25h) mismatch (-want +got):\n%s", diff)
	}
	if l.Queue.Depth() != 3 {
		t.Errorf("Depth() after Fresh = %d, want 3 (Fresh returns a view)", l.Queue.Depth())
	}
}

func TestMergeQueued(t *testing.T) {
	tests := []struct {
		name              string
		text, newText     string
		msg, newMsg       string
		wantText, wantMsg string
	}{
		{"texts joined by a blank line", "a", "b", "", "", "a\n\nb", ""},
		{"empty earlier text adds no separator", "", "b", "", "", "b", ""},
		{"empty later text adds no separator", "a", "", "", "", "a", ""},
		{"arrays concatenate, scalars take the newest", "a", "b",
			`{"media_urls":["1"],"message_id":"m1","reply_to":"x"}`, `{"media_urls":["2","3"],"message_id":"m2"}`,
			"a\n\nb", `{"media_urls":["1","2","3"],"message_id":"m2","reply_to":"x"}`},
		{"a missing message adds nothing", "a", "b", `{"k":1}`, "", "a\n\nb", `{"k":1}`},
		{"a message joins a missing one", "a", "b", "", `{"k":1}`, "a\n\nb", `{"k":1}`},
		{"array against scalar: newest wins", "a", "b", `{"k":[1]}`, `{"k":2}`, "a\n\nb", `{"k":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, msg := domain.MergeQueued(tt.text, raw(tt.msg), tt.newText, raw(tt.newMsg))
			if text != tt.wantText || string(msg) != tt.wantMsg {
				t.Errorf("MergeQueued(%q, %s, %q, %s) = %q, %s, want %q, %s", tt.text, tt.msg, tt.newText, tt.newMsg, text, msg, tt.wantText, tt.wantMsg)
			}
		})
	}
}

func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func TestQueue_EvolveDoesNotAlias(t *testing.T) {
	base := domain.Replay(fill(2))
	a := domain.Evolve(base, added("x", queued, "x", events.QueuePlacementOverflow, t0))
	b := domain.Evolve(base, added("y", queued, "y", events.QueuePlacementOverflow, t0))
	if got := shapeOf(a.Queue).Overflow; !cmp.Equal(got, []string{"2", "x"}) {
		t.Errorf("first branch overflow = %v, want [2 x] (a later branch wrote into it)", got)
	}
	if got := shapeOf(b.Queue).Overflow; !cmp.Equal(got, []string{"2", "y"}) {
		t.Errorf("second branch overflow = %v, want [2 y]", got)
	}
	if base.Queue.Depth() != 2 {
		t.Errorf("base depth = %d, want 2", base.Queue.Depth())
	}
}
