package domain_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"hermes/domain"
	"hermes/events"
)

// TestQueue_Properties drives random queue commands (follow-ups, /queue
// items, takes, clears, /new, time passing) and checks after every step:
// replaying the history gives the evolved lane; the depth never passes the
// cap; /queue items run in the order they were queued; and every accepted
// /queue item is accounted for exactly once — run, cleared, expired,
// discarded by /new, or still queued (never silently replaced or lost).
func TestQueue_Properties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := domain.QueueRules{
			BusyInputMode: rapid.SampledFrom([]string{domain.BusyInputInterrupt, domain.BusyInputQueue}).Draw(t, "mode"),
			MaxItems:      rapid.IntRange(1, 6).Draw(t, "cap"),
			TTL:           time.Duration(rapid.IntRange(1, 10).Draw(t, "ttl hours")) * time.Hour,
		}
		history := []events.Event{created(t0)}
		l := domain.Replay(history)
		now := t0
		var queuedOrder []string // accepted /queue item ids, in order
		fate := map[string]string{}
		var ranQueue []string
		for i := range rapid.IntRange(1, 80).Draw(t, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 4*60).Draw(t, "minutes")) * time.Minute)
			var decided []events.Event
			var err error
			before := l
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op <= 2:
				decided, err = l.Enqueue(domain.QueueArrival{ItemID: fmt.Sprintf("f%d", i), Kind: followup, Text: fmt.Sprint(i)}, r, now)
			case op <= 5:
				id := fmt.Sprintf("q%d", i)
				decided, err = l.Enqueue(domain.QueueArrival{ItemID: id, Kind: queued, Text: fmt.Sprint(i)}, r, now)
				if err == nil {
					queuedOrder = append(queuedOrder, id)
				}
			case op <= 7:
				decided, err = l.TakeNext(r, now)
			case op == 8:
				decided, err = l.ClearQueue(r, now)
			default:
				decided, err = l.Reset("", rules, "cccccccc", now)
			}
			if err != nil {
				if len(decided) != 0 {
					t.Fatalf("step %d refused with %v but decided %v", i, err, decided)
				}
				continue
			}
			for _, e := range decided {
				switch e := e.(type) {
				case events.QueueItemTaken:
					setFate(t, fate, e.ItemID, "ran")
					if e.Kind == queued {
						ranQueue = append(ranQueue, e.ItemID)
					}
				case events.QueueCleared:
					for _, id := range e.ItemIDs {
						setFate(t, fate, id, "cleared")
					}
				case events.QueueItemsExpired:
					for _, id := range e.ItemIDs {
						setFate(t, fate, id, "expired")
					}
				case events.SessionReset:
					for _, it := range l.Queue.Overflow {
						setFate(t, fate, it.ID, "reset")
					}
				}
				l = domain.Evolve(l, e)
				history = append(history, e)
			}
			if l.Queue.Depth() > r.MaxItems {
				t.Fatalf("step %d: depth %d passes the cap %d", i, l.Queue.Depth(), r.MaxItems)
			}
			if d := l.Queue.Depth(); d > before.Queue.Depth()+1 {
				t.Fatalf("step %d: depth went from %d to %d", i, before.Queue.Depth(), d)
			}
			if diff := cmp.Diff(l, domain.Replay(history)); diff != "" {
				t.Fatalf("step %d: Replay differs (-evolved +replayed):\n%s", i, diff)
			}
		}
		// /queue items ran in FIFO order.
		var order []string
		for _, id := range queuedOrder {
			if slices.Contains(ranQueue, id) {
				order = append(order, id)
			}
		}
		if !slices.Equal(order, ranQueue) {
			t.Fatalf("/queue items ran as %v, want the queued order %v", ranQueue, order)
		}
		// Every accepted /queue item is accounted for exactly once.
		for _, it := range l.Queue.Items() {
			setFate(t, fate, it.ID, "queued")
		}
		for _, id := range queuedOrder {
			if fate[id] == "" {
				t.Fatalf("/queue item %s was lost (history %v)", id, history)
			}
		}
	})
}

func setFate(t *rapid.T, fate map[string]string, id, f string) {
	if prev, ok := fate[id]; ok {
		t.Fatalf("item %s %s after it was already %s", id, f, prev)
	}
	fate[id] = f
}
