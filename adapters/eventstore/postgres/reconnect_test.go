package postgres

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"hermes/events"
	pgtest "hermes/testfixtures/postgres"
)

// databaseOf is the database a store URL names.
func databaseOf(t testing.TB, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Path[1:]
}

// appender appends n one-event appends to stream on a goroutine, each
// expecting the version the previous one left, stopping at the first
// error.
type appender struct {
	done chan struct{}
	mu   sync.Mutex
	ok   int
	err  error
}

func appendLoop(s *Store, stream string, n int) *appender {
	a := &appender{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for i := range n {
			_, err := s.Append(context.Background(), stream, events.ExactVersion(uint64(i)), touch(fmt.Sprintf("%s-%d", stream, i)))
			a.mu.Lock()
			if err != nil {
				a.err = fmt.Errorf("append %d: %w", i, err)
			} else {
				a.ok++
			}
			a.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return a
}

// waitFor waits until k appends succeeded, failing on an append's error.
func (a *appender) waitFor(t testing.TB, k int) {
	t.Helper()
	until(t, fmt.Sprintf("%d appends", k), func() (bool, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.ok >= k, a.err
	})
}

// wait waits until the appends ended, failing on an append's error.
func (a *appender) wait(t testing.TB) {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(waitLimit):
		t.Fatalf("appends still running after %v", waitLimit)
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
}

// checkDelivered fails unless c delivered exactly the events of the log
// after position after, in order.
func checkDelivered(t *testing.T, s *Store, c *collector, after uint64) {
	t.Helper()
	all, err := s.ReadAll(t.Context(), after, 100000)
	if err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for _, e := range all {
		want = append(want, e.Position)
	}
	c.waitThrough(t, want[len(want)-1])
	got, ids := c.got()
	if !slices.Equal(got, want) {
		t.Errorf("subscription delivered %d events %v, want the %d of the log %v", len(got), got, len(want), want)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("event %s delivered twice", id)
		}
		seen[id] = true
	}
}

// TestTerminatedConnections ends every session of the store's database
// (as pg_terminate_backend, a failover or a network cut does) while
// appends and a subscription run: the writer reconnects and commits every
// append exactly once, and the subscription delivers the log without a gap
// or a duplicate.
func TestTerminatedConnections(t *testing.T) {
	cluster := pgtest.Shared(t)
	url := schemaOn(t, cluster.NewDatabase(t))
	s := openAt(t, url)
	c := collect(t, s, 0)
	const n = 60
	a := appendLoop(s, "lane-1", n)
	for cut := 1; cut <= 3; cut++ {
		a.waitFor(t, 10*cut)
		if _, err := cluster.TerminateBackends(t.Context(), databaseOf(t, url)); err != nil {
			t.Fatal(err)
		}
	}
	a.wait(t)
	envs, err := s.ReadStream(t.Context(), "lane-1", 1, 1000, events.Forwards)
	if err != nil || len(envs) != n {
		t.Fatalf("ReadStream = %d events, %v; want %d", len(envs), err, n)
	}
	checkDelivered(t, s, c, 0)
	if err := c.sub.Err(); err != nil {
		t.Errorf("subscription Err() = %v", err)
	}
}

// TestRestartUnderSubscriber restarts the server (a cluster of its own)
// while a node appends and subscriptions on two nodes read: the appends
// made across the restart wait for it and succeed, each once, and both
// subscriptions deliver the whole log, in order, once.
func TestRestartUnderSubscriber(t *testing.T) {
	if pgtest.Shared(t).External() {
		t.Skip("an external server cannot be restarted by the tests")
	}
	cluster, err := pgtest.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Close() })
	url := schemaOn(t, cluster.URL())
	writer := openAt(t, url)
	reader := openAt(t, url, WithPollInterval(time.Hour))
	subs := []*collector{collect(t, writer, 0), collect(t, reader, 0)}
	const n = 40
	a := appendLoop(writer, "lane-1", n)
	a.waitFor(t, n/2)
	if err := cluster.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.wait(t)
	for _, c := range subs {
		checkDelivered(t, writer, c, 0)
	}
}

// TestNotifyWakesOtherNodes: a subscription whose store polls only once
// an hour receives another node's commits at once, through LISTEN/NOTIFY,
// and still does after its listening connection was cut (the listener
// wakes the subscriptions once it listens again, for what was committed
// while nobody listened).
func TestNotifyWakesOtherNodes(t *testing.T) {
	cluster := pgtest.Shared(t)
	url := schemaOn(t, cluster.NewDatabase(t))
	writer := openAt(t, url)
	reader := openAt(t, url, WithPollInterval(time.Hour))
	c := collect(t, reader, 0)
	for round := range 3 {
		res := mustAppend(t, writer, "lane-1", events.AnyVersion(), touch(fmt.Sprintf("e-%d", round)))
		c.waitThrough(t, res.LastPosition())
		if _, err := cluster.TerminateBackends(t.Context(), databaseOf(t, url)); err != nil {
			t.Fatal(err)
		}
	}
	checkDelivered(t, writer, c, 0)
}

// TestPollingWithoutNotifications: with no notification ever coming (the
// listener left out, as behind a pooler that drops LISTEN), subscriptions
// still deliver every commit of another node, by polling.
func TestPollingWithoutNotifications(t *testing.T) {
	url := tempSchema(t)
	writer := openAt(t, url)
	reader := openAt(t, url, WithPollInterval(20*time.Millisecond), func(c *config) { c.noListen = true })
	c := collect(t, reader, 0)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 10 {
				mustAppend(t, writer, fmt.Sprintf("lane-%d", w), events.ExactVersion(uint64(i)), touch(fmt.Sprintf("%d-%d", w, i)))
			}
		})
	}
	wg.Wait()
	checkDelivered(t, writer, c, 0)
}
