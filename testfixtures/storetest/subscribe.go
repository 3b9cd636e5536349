package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"hermes/events"

	"github.com/google/go-cmp/cmp"
)

func subscribe(t *testing.T, s events.Store, ctx context.Context, after uint64) events.Subscription {
	t.Helper()
	sub, err := s.Subscribe(ctx, after)
	if err != nil {
		t.Fatalf("Subscribe(%d) error = %v", after, err)
	}
	t.Cleanup(sub.Close)
	return sub
}

// receiveThrough reads sub until the event at position last, failing on a
// gap, a duplicate, a reordering, an early end or no event for the wait
// limit.
func receiveThrough(t *testing.T, sub events.Subscription, after, last uint64) []events.Envelope {
	t.Helper()
	limit := time.NewTimer(waitLimit)
	defer limit.Stop()
	var got []events.Envelope
	for after < last {
		select {
		case e, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription ended at position %d, want through %d (Err() = %v)", after, last, sub.Err())
			}
			if e.Position <= after {
				t.Fatalf("subscription delivered position %d after %d", e.Position, after)
			}
			got = append(got, e)
			after = e.Position
			limit.Reset(waitLimit)
		case <-limit.C:
			t.Fatalf("subscription stuck at position %d for %v, want through %d", after, waitLimit, last)
		}
	}
	if after != last {
		t.Fatalf("subscription went past %d to %d", last, after)
	}
	return got
}

// waitEnded drains sub until its channel is closed.
func waitEnded(t *testing.T, sub events.Subscription, why string) {
	t.Helper()
	limit := time.NewTimer(waitLimit)
	defer limit.Stop()
	for {
		select {
		case _, ok := <-sub.Events():
			if !ok {
				return
			}
		case <-limit.C:
			t.Fatalf("subscription still open after %s", why)
		}
	}
}

func identities(envs []events.Envelope) []string {
	out := make([]string, len(envs))
	for i, e := range envs {
		out[i] = fmt.Sprintf("%d %s@%d %s", e.Position, e.Stream, e.Version, e.ID)
	}
	return out
}

func testSubscribeLive(t *testing.T, s events.Store) {
	st := lane(1)
	sub := subscribe(t, s, t.Context(), 0)
	res := mustAppend(t, s, st, events.NoStream(), touched(st, "a", "b"))
	got := receiveThrough(t, sub, 0, res.LastPosition())
	diffEnvelopes(t, "live events", got, wantEnvelopes(st, touched(st, "a", "b"), res))

	late := subscribe(t, s, t.Context(), res.LastPosition())
	ps := touched(st, "c")
	res2 := mustAppend(t, s, st, events.ExactVersion(2), ps)
	diffEnvelopes(t, "first subscription, next event", receiveThrough(t, sub, res.LastPosition(), res2.LastPosition()), wantEnvelopes(st, ps, res2))
	diffEnvelopes(t, "subscription from the head", receiveThrough(t, late, res.LastPosition(), res2.LastPosition()), wantEnvelopes(st, ps, res2))
}

// testSubscribeHandover starts a subscription in the middle of the history
// while writers append concurrently: the switch from catch-up to live must
// lose, repeat and reorder nothing.
func testSubscribeHandover(t *testing.T, s events.Store) {
	const writers, appendsEach = 8, 25
	var history []uint64
	for i := range 40 {
		st := lane(i % 5)
		res := mustAppend(t, s, st, events.AnyVersion(), touched(st, fmt.Sprint(i)))
		history = append(history, res.Positions...)
	}
	from := history[len(history)/2]

	progress := make(chan struct{}, writers*appendsEach)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			st := lane(100 + w)
			for i := range appendsEach {
				n := 1 + i%3
				if _, err := appendWithin(t, s, st, events.AnyVersion(), numbered(st, fmt.Sprint(i), n)); err != nil {
					errs <- err
					return
				}
				progress <- struct{}{}
			}
		})
	}
	for range writers * appendsEach / 4 {
		select {
		case <-progress:
		case err := <-errs:
			t.Fatalf("Append error = %v", err)
		}
	}
	sub := subscribe(t, s, t.Context(), from)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append error = %v", err)
	}

	h := head(t, s)
	got := receiveThrough(t, sub, from, h)
	var want []events.Envelope
	for _, e := range everything(t, s) {
		if e.Position > from {
			want = append(want, e)
		}
	}
	if diff := cmp.Diff(identities(want), identities(got)); diff != "" {
		t.Errorf("subscription from %d differs from ReadAll (-want +got):\n%s", from, diff)
	}
}

func testSlowSubscriber(t *testing.T, s events.Store) {
	const writers, appendsEach, perAppend = 10, 30, 10
	sub := subscribe(t, s, t.Context(), 0)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			st := lane(w)
			for i := range appendsEach {
				if _, err := appendWithin(t, s, st, events.ExactVersion(uint64(i*perAppend)), numbered(st, fmt.Sprint(i), perAppend)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append with an unread subscription: error = %v (a slow subscriber must not block appends)", err)
	}
	all := everything(t, s)
	if len(all) != writers*appendsEach*perAppend {
		t.Fatalf("ReadAll: %d events, want %d", len(all), writers*appendsEach*perAppend)
	}
	got := receiveThrough(t, sub, 0, all[len(all)-1].Position)
	if diff := cmp.Diff(identities(all), identities(got)); diff != "" {
		t.Errorf("slow subscription differs from ReadAll (-want +got):\n%s", diff)
	}
}

func testSubscriptionEnds(t *testing.T, s events.Store) {
	st := lane(1)
	res := mustAppend(t, s, st, events.NoStream(), touched(st, "a"))

	ctx, cancel := context.WithCancel(t.Context())
	byContext := subscribe(t, s, ctx, 0)
	receiveThrough(t, byContext, 0, res.LastPosition())
	cancel()
	waitEnded(t, byContext, "its context was cancelled")
	if err := byContext.Err(); err != nil {
		t.Errorf("Err() after the context was cancelled = %v, want nil", err)
	}

	byClose := subscribe(t, s, t.Context(), 0)
	byClose.Close()
	waitEnded(t, byClose, "Close")
	if err := byClose.Err(); err != nil {
		t.Errorf("Err() after Close = %v, want nil", err)
	}
	byClose.Close()

	byStore := subscribe(t, s, t.Context(), res.LastPosition())
	if err := s.Close(); err != nil {
		t.Fatalf("store Close() error = %v", err)
	}
	waitEnded(t, byStore, "the store was closed")
}
