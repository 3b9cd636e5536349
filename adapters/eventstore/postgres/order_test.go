package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"hermes/events"
	pgtest "hermes/testfixtures/postgres"

	"github.com/jackc/pgx/v5"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// touch proposes one Touched event per id.
func touch(ids ...string) []events.Proposed {
	ps := make([]events.Proposed, len(ids))
	for i, id := range ids {
		ps[i] = events.Proposed{ID: id, Event: events.Touched{At: t0}}
	}
	return ps
}

func mustAppend(t testing.TB, s *Store, stream string, x events.ExpectedVersion, ps []events.Proposed) events.AppendResult {
	t.Helper()
	res, err := s.Append(context.Background(), stream, x, ps)
	if err != nil {
		t.Fatalf("Append(%s, %s) error = %v", stream, x, err)
	}
	return res
}

// waitLimit bounds each wait of these tests on the store or the server,
// so that a broken store fails instead of hanging; nothing waits for it
// to pass.
const waitLimit = time.Minute

// until polls cond (a question to the server about its state, never a
// clock rule) until it holds, failing after waitLimit.
func until(t testing.TB, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, waitLimit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// collector receives a subscription's events on a goroutine of its own.
type collector struct {
	mu        sync.Mutex
	positions []uint64
	ids       []string
	sub       events.Subscription
}

func collect(t testing.TB, s *Store, after uint64) *collector {
	t.Helper()
	sub, err := s.Subscribe(context.Background(), after)
	if err != nil {
		t.Fatalf("Subscribe(%d) error = %v", after, err)
	}
	t.Cleanup(sub.Close)
	c := &collector{sub: sub}
	go func() {
		for e := range sub.Events() {
			c.mu.Lock()
			c.positions = append(c.positions, e.Position)
			c.ids = append(c.ids, e.ID)
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *collector) last() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.positions) == 0 {
		return 0
	}
	return c.positions[len(c.positions)-1]
}

func (c *collector) got() ([]uint64, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.positions), slices.Clone(c.ids)
}

// waitThrough waits until c delivered position p or later.
func (c *collector) waitThrough(t testing.TB, p uint64) {
	t.Helper()
	until(t, fmt.Sprintf("subscription through position %d", p), func() (bool, error) {
		if err := c.sub.Err(); err != nil {
			return false, err
		}
		return c.last() >= p, nil
	})
}

// stalledRun is what runStalledCommitter saw.
type stalledRun struct {
	stalled   []uint64   // the positions the stalled transaction drew
	others    []uint64   // the positions of the appends made meanwhile
	all       []uint64   // every position of the log (ReadAll)
	delivered [][]uint64 // what each subscription delivered
}

// runStalledCommitter runs three stores on one schema, as three nodes.
// Node A's first append takes its positions, then stalls before its
// COMMIT; meanwhile nodes B and C append (with the order lock, they wait
// for it; without, they commit). Then A commits, B appends once more, and
// five subscriptions (from the start on every node, one started during
// the stall, one from the last event before it) are read through the end.
func runStalledCommitter(t *testing.T, lock bool) stalledRun {
	url := tempSchema(t)
	stalledAt := make(chan []uint64, 1)
	release := make(chan struct{})
	var once sync.Once
	hook := func(positions []uint64) {
		once.Do(func() {
			stalledAt <- slices.Clone(positions)
			<-release
		})
	}
	var opts []Option
	if !lock {
		opts = append(opts, func(c *config) { c.noOrderLock = true })
	}
	first := openAt(t, url, opts...)
	pre := mustAppend(t, first, "lane-pre", events.NoStream(), touch("pre-1", "pre-2"))
	a := openAt(t, url, append(opts, func(c *config) { c.beforeCommit = hook })...)
	b := openAt(t, url, opts...)
	c := openAt(t, url, opts...)
	subs := []*collector{collect(t, a, 0), collect(t, b, 0), collect(t, c, 0), collect(t, first, pre.Positions[0])}

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	appendAsync := func(s *Store, stream string, ids ...string) {
		wg.Go(func() {
			if _, err := s.Append(context.Background(), stream, events.AnyVersion(), touch(ids...)); err != nil {
				errs <- err
			}
		})
	}
	appendAsync(a, "lane-a", "a-1", "a-2")
	var run stalledRun
	select {
	case run.stalled = <-stalledAt:
	case err := <-errs:
		t.Fatalf("the stalled append failed: %v", err)
	case <-time.After(waitLimit):
		t.Fatal("the stalled append never drew its positions")
	}
	subs = append(subs, collect(t, b, 0))

	var others []events.AppendResult
	var mu sync.Mutex
	appendOther := func(s *Store, stream string, ids ...string) {
		wg.Go(func() {
			res, err := s.Append(context.Background(), stream, events.AnyVersion(), touch(ids...))
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			others = append(others, res)
			mu.Unlock()
		})
	}
	for i := range 3 {
		appendOther(b, "lane-b", fmt.Sprintf("b-%d", i))
		appendOther(c, "lane-c", fmt.Sprintf("c-%d-1", i), fmt.Sprintf("c-%d-2", i))
	}
	admin, err := pgx.Connect(t.Context(), pgtest.Shared(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if lock {
		// Both other nodes' writers are in a transaction, waiting for the
		// order lock the stalled one holds: they cannot draw a position,
		// let alone commit one, before it commits.
		until(t, "two writers waiting for the order lock", func() (bool, error) {
			var waiting int
			err := admin.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
				AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1`,
				int64(uint64(a.keys.order)>>32), int64(uint32(a.keys.order))).Scan(&waiting)
			return waiting >= 2, err
		})
		if h, err := b.Head(t.Context()); err != nil || h != pre.LastPosition() {
			t.Fatalf("Head() during the stall = %d, %v; want %d (nothing committed after the stalled transaction's positions)", h, err, pre.LastPosition())
		}
	} else {
		// Without it they commit later positions while the stalled
		// transaction is open, and the subscriptions deliver them.
		until(t, "the other appends committed", func() (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return len(others) == 6, nil
		})
		var highest uint64
		for _, r := range others {
			highest = max(highest, r.LastPosition())
		}
		for _, s := range subs {
			s.waitThrough(t, highest)
		}
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append error = %v", err)
	}
	final := mustAppend(t, b, "lane-b", events.AnyVersion(), touch("final"))
	for _, r := range others {
		run.others = append(run.others, r.Positions...)
	}
	all, err := b.ReadAll(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		run.all = append(run.all, e.Position)
	}
	for _, s := range subs {
		s.waitThrough(t, final.LastPosition())
		got, _ := s.got()
		run.delivered = append(run.delivered, got)
	}
	return run
}

// TestStalledCommitter: a transaction that has drawn its positions stalls
// before its COMMIT while other nodes append. With the order lock, every
// subscription on every node delivers every event once, in position
// order, and the appends made meanwhile land after the stalled ones.
func TestStalledCommitter(t *testing.T) {
	run := runStalledCommitter(t, true)
	for _, p := range run.others {
		if p <= run.stalled[len(run.stalled)-1] {
			t.Errorf("an append made during the stall got position %d, before the stalled transaction's %v", p, run.stalled)
		}
	}
	for i, got := range run.delivered {
		for k := 1; k < len(got); k++ {
			if got[k] <= got[k-1] {
				t.Fatalf("subscription %d delivered %d after %d", i, got[k], got[k-1])
			}
		}
		want := run.all
		if len(got) > 0 {
			want = run.all[slices.Index(run.all, got[0]):]
		}
		if !slices.Equal(got, want) {
			t.Errorf("subscription %d delivered %v, want %v (the log after its start)", i, got, want)
		}
	}
	if got := run.delivered[0]; !slices.Equal(got, run.all) {
		t.Errorf("subscription from 0 delivered %v, want the whole log %v", got, run.all)
	}
}

// TestStalledCommitterWithoutOrderLock is the control: without the order
// lock, the same run makes subscriptions skip the stalled transaction's
// events for good, which is the pitfall the lock prevents (and shows that
// TestStalledCommitter can fail).
func TestStalledCommitterWithoutOrderLock(t *testing.T) {
	run := runStalledCommitter(t, false)
	for _, p := range run.stalled {
		if !slices.Contains(run.all, p) {
			t.Fatalf("position %d of the stalled transaction is not in the log %v", p, run.all)
		}
	}
	for i, got := range run.delivered {
		for _, p := range run.stalled {
			if slices.Contains(got, p) {
				t.Errorf("subscription %d delivered position %d of the stalled transaction; without the lock it should have skipped it", i, p)
			}
		}
	}
}
