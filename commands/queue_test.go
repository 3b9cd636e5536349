package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hermes/commands"
	"hermes/domain"
	"hermes/events"
)

func queueFixture(t *testing.T, q commands.QueueSettings) *fixture {
	t.Helper()
	cfg := commands.DefaultConfig()
	cfg.Queue = q
	f := newFixture(t, cfg)
	if _, err := f.handler.ResolveSession(context.Background(), commands.ResolveSession{Source: alice}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) enqueue(t *testing.T, kind, text, commandID string) commands.Enqueued {
	t.Helper()
	res, err := f.handler.Enqueue(context.Background(), commands.EnqueueMessage{Key: aliceKey, Kind: kind, Text: text, CommandID: commandID})
	if err != nil {
		t.Fatalf("Enqueue(%s, %q) = %v", kind, text, err)
	}
	return res
}

func (f *fixture) take(t *testing.T, commandID string) *events.QueueItemTaken {
	t.Helper()
	res, err := f.handler.TakeQueued(context.Background(), commands.TakeQueued{Key: aliceKey, CommandID: commandID})
	if err != nil {
		t.Fatalf("TakeQueued() = %v", err)
	}
	return res.Item
}

// TestQueue_WorkedExample runs catalogue §5's example through the real
// handler and store, then replays the stream from scratch.
func TestQueue_WorkedExample(t *testing.T) {
	f := queueFixture(t, commands.QueueSettings{})
	ids := map[string]string{}
	for i, text := range []string{"A", "B", "C"} {
		res := f.enqueue(t, events.QueueKindQueue, text, "")
		if res.Depth != i+1 {
			t.Errorf("Enqueue(%s) depth = %d, want %d", text, res.Depth, i+1)
		}
		ids[text] = res.ItemID
	}
	for _, want := range []string{"A", "B", "C"} {
		got := f.take(t, "")
		if got == nil || got.Text != want || got.ItemID != ids[want] {
			t.Fatalf("TakeQueued() = %+v, want %s (%s)", got, want, ids[want])
		}
	}
	if got := f.take(t, ""); got != nil {
		t.Errorf("TakeQueued() on an empty queue = %+v, want nil", got)
	}
	fresh := commands.NewHandler(f.store, commands.DefaultConfig(), commands.WithClock(f.clock.Now))
	q, _, err := fresh.Queue(context.Background(), aliceKey)
	if err != nil || q.Depth() != 0 {
		t.Errorf("Queue() from a fresh handler = depth %d, %v, want 0, nil", q.Depth(), err)
	}
}

// TestQueue_SurvivesNewHandler: the queue is in the log, so a new handler
// (a restarted process) sees it whole and in order.
func TestQueue_SurvivesNewHandler(t *testing.T) {
	f := queueFixture(t, commands.QueueSettings{})
	var want []string
	for i := range 5 {
		text := fmt.Sprintf("item %d", i)
		f.enqueue(t, events.QueueKindQueue, text, "")
		want = append(want, text)
	}
	h := commands.NewHandler(f.store, commands.DefaultConfig(), commands.WithClock(f.clock.Now))
	var got []string
	for {
		res, err := h.TakeQueued(context.Background(), commands.TakeQueued{Key: aliceKey})
		if err != nil {
			t.Fatal(err)
		}
		if res.Item == nil {
			break
		}
		got = append(got, res.Item.Text)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("taken after a restart (-want +got):\n%s", diff)
	}
}

// TestQueue_IdempotentRetries: a retried take answers the item the first
// attempt took, even after the queue moved on or emptied; a retried enqueue
// queues nothing more; a retried clear answers the same count.
func TestQueue_IdempotentRetries(t *testing.T) {
	f := queueFixture(t, commands.QueueSettings{})
	a := f.enqueue(t, events.QueueKindQueue, "A", "enq-a")
	again := f.enqueue(t, events.QueueKindQueue, "A", "enq-a")
	if again.ItemID != a.ItemID || again.Depth != 1 {
		t.Errorf("retried Enqueue = item %s depth %d, want %s depth 1", again.ItemID, again.Depth, a.ItemID)
	}
	f.enqueue(t, events.QueueKindQueue, "B", "enq-b")

	first := f.take(t, "take-1")
	retry := f.take(t, "take-1")
	if first == nil || retry == nil || retry.ItemID != first.ItemID || first.Text != "A" {
		t.Fatalf("take then retry = %+v, %+v, want A twice", first, retry)
	}
	second := f.take(t, "take-2")
	if second == nil || second.Text != "B" {
		t.Fatalf("next take = %+v, want B", second)
	}
	// The queue is empty now; the retries still answer their items.
	if r := f.take(t, "take-1"); r == nil || r.ItemID != first.ItemID {
		t.Errorf("retry of take-1 on an empty queue = %+v, want %s", r, first.ItemID)
	}
	if r := f.take(t, "take-2"); r == nil || r.ItemID != second.ItemID {
		t.Errorf("retry of take-2 on an empty queue = %+v, want %s", r, second.ItemID)
	}
	if n := countType[events.QueueItemTaken](f.history(t, aliceKey)); n != 2 {
		t.Errorf("%d QueueItemTaken in the log, want 2", n)
	}

	f.enqueue(t, events.QueueKindQueue, "C", "")
	f.enqueue(t, events.QueueKindQueue, "D", "")
	for range 2 {
		_, n, err := f.handler.ClearQueue(context.Background(), commands.ClearQueue{Key: aliceKey, CommandID: "clear-1"})
		if err != nil || n != 2 {
			t.Errorf("ClearQueue(clear-1) = %d, %v, want 2, nil", n, err)
		}
	}
}

func TestQueue_CapAndTTL(t *testing.T) {
	f := queueFixture(t, commands.QueueSettings{MaxItems: 3, TTL: time.Hour})
	for _, text := range []string{"1", "2", "3"} {
		f.enqueue(t, events.QueueKindQueue, text, "")
	}
	_, err := f.handler.Enqueue(context.Background(), commands.EnqueueMessage{Key: aliceKey, Kind: events.QueueKindQueue, Text: "4"})
	if !errors.Is(err, domain.ErrQueueFull) || err.Error() != "queue full (3 items)" {
		t.Fatalf("Enqueue over the cap = %v, want %q wrapping ErrQueueFull", err, "queue full (3 items)")
	}
	f.clock.Advance(time.Hour + time.Second)
	q, _, err := f.handler.Queue(context.Background(), aliceKey)
	if err != nil || q.Depth() != 0 {
		t.Errorf("Queue() after the TTL = depth %d, %v, want 0 (stale items hidden)", q.Depth(), err)
	}
	res := f.enqueue(t, events.QueueKindQueue, "fresh", "")
	if res.Depth != 1 {
		t.Errorf("Enqueue after the TTL depth = %d, want 1", res.Depth)
	}
	envs := f.history(t, aliceKey)
	last := envs[len(envs)-2].Event
	if exp, ok := last.(events.QueueItemsExpired); !ok || len(exp.ItemIDs) != 3 {
		t.Errorf("event before the new item = %#v, want QueueItemsExpired of 3 items", last)
	}
}

func TestQueue_MergeMode(t *testing.T) {
	f := queueFixture(t, commands.QueueSettings{BusyInputMode: domain.BusyInputQueue})
	first, err := f.handler.Enqueue(context.Background(), commands.EnqueueMessage{
		Key:  aliceKey,
		Kind: events.QueueKindFollowup, Text: "fix that bug", Message: json.RawMessage(`{"media_urls":["a.png"],"message_id":"1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.handler.Enqueue(context.Background(), commands.EnqueueMessage{
		Key:  aliceKey,
		Kind: events.QueueKindFollowup, Text: "in the second function", Message: json.RawMessage(`{"media_urls":["b.png"],"message_id":"2"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if second.ItemID != first.ItemID || second.Depth != 1 {
		t.Errorf("merged Enqueue = item %s depth %d, want %s depth 1", second.ItemID, second.Depth, first.ItemID)
	}
	got := f.take(t, "")
	if got.Text != "fix that bug\n\nin the second function" || string(got.Message) != `{"media_urls":["a.png","b.png"],"message_id":"2"}` {
		t.Errorf("taken merged item = %q %s", got.Text, got.Message)
	}
}

func TestQueue_MissingLane(t *testing.T) {
	f := newFixture(t, commands.DefaultConfig())
	ctx := context.Background()
	if _, err := f.handler.Enqueue(ctx, commands.EnqueueMessage{Key: aliceKey, Kind: events.QueueKindQueue, Text: "x"}); !errors.Is(err, domain.ErrLaneNotFound) {
		t.Errorf("Enqueue on a missing lane = %v, want ErrLaneNotFound", err)
	}
	if _, err := f.handler.TakeQueued(ctx, commands.TakeQueued{Key: aliceKey}); !errors.Is(err, domain.ErrLaneNotFound) {
		t.Errorf("TakeQueued on a missing lane = %v, want ErrLaneNotFound", err)
	}
	if _, _, err := f.handler.Queue(ctx, aliceKey); !errors.Is(err, domain.ErrLaneNotFound) {
		t.Errorf("Queue on a missing lane = %v, want ErrLaneNotFound", err)
	}
}

// TestQueue_ConcurrentTakes: concurrent takes hand out every item exactly
// once.
func TestQueue_ConcurrentTakes(t *testing.T) {
	f := queueFixture(t, commands.QueueSettings{})
	const n = 20
	for i := range n {
		f.enqueue(t, events.QueueKindQueue, fmt.Sprint(i), "")
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				res, err := f.handler.TakeQueued(context.Background(), commands.TakeQueued{Key: aliceKey})
				if err != nil {
					t.Error(err)
					return
				}
				if res.Item == nil {
					return
				}
				mu.Lock()
				seen[res.Item.Text]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d distinct items taken, want %d", len(seen), n)
	}
	for text, c := range seen {
		if c != 1 {
			t.Errorf("item %s taken %d times", text, c)
		}
	}
}
