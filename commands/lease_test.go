package commands_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hermes/adapters/eventstore/sqlite"
	"hermes/commands"
	"hermes/events"
	"hermes/testfixtures"
)

const leaseTTL = 60 * time.Second

// cluster is several nodes' handlers on one store, each with its own clock.
type clusterFixture struct {
	store  *sqlite.Store
	clocks map[string]*testfixtures.Clock
	nodes  map[string]*commands.Handler
}

func newCluster(t *testing.T, names ...string) *clusterFixture {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	c := &clusterFixture{store: store, clocks: map[string]*testfixtures.Clock{}, nodes: map[string]*commands.Handler{}}
	for _, name := range names {
		clock := testfixtures.NewClock(t0)
		c.clocks[name] = clock
		c.nodes[name] = commands.NewHandler(store, idleConfig(), commands.WithClock(clock.Now), commands.WithNode(name))
	}
	return c
}

// advance moves every node's clock by d.
func (c *clusterFixture) advance(d time.Duration) {
	for _, clock := range c.clocks {
		clock.Advance(d)
	}
}

func (c *clusterFixture) count(t *testing.T, stream string, match func(events.Event) bool) int {
	t.Helper()
	envs, err := c.store.ReadStream(context.Background(), stream, 1, 100000, events.Forwards)
	if errors.Is(err, events.ErrStreamNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, env := range envs {
		if match(env.Event) {
			n++
		}
	}
	return n
}

func TestClaimLease_HolderRenewsOthersWaitForExpiryOrRelease(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, "n1", "n2")
	claim := func(node string, delivered uint64) string {
		t.Helper()
		l, err := c.nodes[node].ClaimLease(ctx, commands.ClaimLease{Stream: events.LeaderLease, TTL: leaseTTL, Delivered: delivered})
		if err != nil {
			t.Fatalf("%s: ClaimLease error = %v", node, err)
		}
		if l.HeldBy(node, c.clocks[node].Now(), leaseTTL/3) {
			return node
		}
		return l.Holder
	}
	steps := []struct {
		name    string
		advance time.Duration
		node    string
		want    string // who holds it after the claim
	}{
		{name: "the first claim takes the free lease", node: "n1", want: "n1"},
		{name: "another node waits", node: "n2", want: "n1"},
		{name: "the holder renews at a third of the TTL", advance: leaseTTL / 3, node: "n1", want: "n1"},
		{name: "still held just before the renewed lease ends", advance: leaseTTL - time.Second, node: "n2", want: "n1"},
		{name: "taken once it expired", advance: time.Second, node: "n2", want: "n2"},
		{name: "the old holder finds it taken", node: "n1", want: "n2"},
	}
	for _, s := range steps {
		c.advance(s.advance)
		if got := claim(s.node, 100); got != s.want {
			t.Fatalf("%s: holder = %q, want %q", s.name, got, s.want)
		}
	}
	if err := c.nodes["n2"].ReleaseLease(ctx, events.LeaderLease, 4242); err != nil {
		t.Fatal(err)
	}
	if got := claim("n1", 0); got != "n1" {
		t.Fatalf("after a release: holder = %q, want n1 at once", got)
	}
	l, _, err := c.nodes["n1"].ReadLease(ctx, events.LeaderLease)
	if err != nil {
		t.Fatal(err)
	}
	if l.Delivered != 4242 {
		t.Errorf("delivered checkpoint handed over = %d, want 4242 (the released holder's)", l.Delivered)
	}
}

func TestClaimLease_OneWinnerAmongConcurrentClaims(t *testing.T) {
	ctx := context.Background()
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	c := newCluster(t, names...)
	var wg sync.WaitGroup
	holders := make([]string, len(names))
	for i, name := range names {
		wg.Go(func() {
			l, err := c.nodes[name].ClaimLease(ctx, commands.ClaimLease{Stream: events.LeaderLease, TTL: leaseTTL})
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			holders[i] = l.Holder
		})
	}
	wg.Wait()
	for i := range holders {
		if holders[i] != holders[0] || holders[i] == "" {
			t.Fatalf("holders seen = %v, want one and the same", holders)
		}
	}
	if n := c.count(t, events.LeaderLease, func(e events.Event) bool { _, ok := e.(events.LeaseAcquired); return ok }); n != 1 {
		t.Errorf("lease-leader holds %d lease.acquired, want 1", n)
	}
}

// openTurnOn starts node's run with its lease and opens a turn on a new lane.
func openTurnOn(t *testing.T, c *clusterFixture, node, chat string) string {
	t.Helper()
	ctx := context.Background()
	h := c.nodes[node]
	if _, err := h.RecordGateway(ctx, commands.RecordGateway{Event: events.GatewayStarted{PID: 1, At: h.Now()}}); err != nil {
		t.Fatal(err)
	}
	if err := h.RenewNodeLease(ctx, leaseTTL); err != nil {
		t.Fatal(err)
	}
	src := alice
	src.ChatID = chat
	res, err := h.ResolveSession(ctx, commands.ResolveSession{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.StartTurn(ctx, commands.StartTurn{Key: res.Lane.SessionKey}); err != nil {
		t.Fatal(err)
	}
	return res.Lane.SessionKey
}

func TestAdoptDeadRuns(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, "dead", "n2", "n3")
	key := openTurnOn(t, c, "dead", "dead-1")
	adopt := func(node string) []commands.Adoption {
		t.Helper()
		turns, err := c.nodes[node].OpenTurns(ctx, []string{key})
		if err != nil {
			t.Fatal(err)
		}
		a, err := c.nodes[node].AdoptDeadRuns(ctx, commands.AdoptDeadRuns{Turns: turns, TTL: leaseTTL})
		if err != nil {
			t.Fatalf("%s: AdoptDeadRuns error = %v", node, err)
		}
		return a
	}

	c.advance(leaseTTL - time.Second)
	if a := adopt("n2"); len(a) != 0 {
		t.Fatalf("adoption while the lease is live = %+v, want none", a)
	}
	c.advance(time.Second)

	// Two nodes find the lease expired at once: one run adoption, one
	// interruption of the turn.
	var wg sync.WaitGroup
	results := make([][]commands.Adoption, 2)
	for i, node := range []string{"n2", "n3"} {
		wg.Go(func() { results[i] = adopt(node) })
	}
	wg.Wait()
	recorded, interrupted := 0, 0
	for _, r := range results {
		for _, a := range r {
			if a.Recorded {
				recorded++
			}
			interrupted += len(a.Interrupted)
		}
	}
	if recorded != 1 || interrupted != 1 {
		t.Errorf("adoptions %+v: %d recorded, %d turns interrupted; want 1 and 1", results, recorded, interrupted)
	}
	if n := c.count(t, events.GatewayStreamOf("dead"), func(e events.Event) bool { _, ok := e.(events.RunAdopted); return ok }); n != 1 {
		t.Errorf("gateway-dead holds %d run_adopted, want 1", n)
	}
	if n := c.count(t, events.LaneStream(key), func(e events.Event) bool { _, ok := e.(events.TurnInterrupted); return ok }); n != 1 {
		t.Errorf("lane holds %d turn_interrupted, want 1", n)
	}
	lane, _, err := c.nodes["n2"].Lane(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if lane.TurnOpen() || !lane.ResumePending || lane.ResumeReason != events.ResumeRestartInterrupted {
		t.Errorf("adopted lane = %+v, want its turn closed and resume pending (restart_interrupted)", lane)
	}
	if a := adopt("n3"); len(a) != 0 {
		t.Errorf("a later pass = %+v, want nothing left to do", a)
	}

	// The dead node, should it come back: it cannot renew, and its next
	// start sees the run stopped (uncleanly), so it records no second crash.
	if err := c.nodes["dead"].RenewNodeLease(ctx, leaseTTL); !errors.Is(err, commands.ErrRunAdopted) {
		t.Errorf("RenewNodeLease of the adopted node error = %v, want ErrRunAdopted", err)
	}
	prev, err := c.nodes["dead"].PreviousRun(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (commands.GatewayRun{Started: true, Stopped: true}); prev != want {
		t.Errorf("PreviousRun of the adopted node = %+v, want %+v", prev, want)
	}
}

// TestAdoptDeadRuns_LeavesLiveAndOwnTurns: a node whose lease is renewed
// keeps its turns, and a node never adopts its own.
func TestAdoptDeadRuns_LeavesLiveAndOwnTurns(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, "n1", "n2")
	k1 := openTurnOn(t, c, "n1", "live-1")
	k2 := openTurnOn(t, c, "n2", "own-2")
	for i := range 6 {
		c.advance(leaseTTL / 3)
		if err := c.nodes["n1"].RenewNodeLease(ctx, leaseTTL); err != nil {
			t.Fatal(err)
		}
		turns, err := c.nodes["n2"].OpenTurns(ctx, []string{k1, k2})
		if err != nil {
			t.Fatal(err)
		}
		if len(turns) != 2 {
			t.Fatalf("round %d: open turns = %+v, want both", i, turns)
		}
		a, err := c.nodes["n2"].AdoptDeadRuns(ctx, commands.AdoptDeadRuns{Turns: turns, TTL: leaseTTL})
		if err != nil || len(a) != 0 {
			t.Fatalf("round %d: AdoptDeadRuns = %+v, %v; want nothing (n1 renews, n2's turn is its own)", i, a, err)
		}
	}
}

// TestOpenTurnsFarBack: a turn opened hundreds of events before the lane's
// end (touches, queue traffic) is still found, with the node that opened
// it; a turn completed as far back is not.
func TestOpenTurnsFarBack(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, "n1", "n2")
	open := openTurnOn(t, c, "n1", "far-open")
	closed := openTurnOn(t, c, "n1", "far-closed")
	if _, err := c.nodes["n1"].CompleteTurn(ctx, commands.CompleteTurn{Key: closed}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{open, closed} {
		ps := make([]events.Proposed, 300)
		for i := range ps {
			ps[i] = events.Proposed{ID: longLaneID(key, i), Event: events.Touched{At: t0},
				Metadata: events.Metadata{SchemaVersion: events.SchemaVersionOf(events.TypeTouched)}}
		}
		if _, err := c.store.Append(ctx, events.LaneStream(key), events.AnyVersion(), ps); err != nil {
			t.Fatal(err)
		}
	}
	started, err := c.store.ReadStream(ctx, events.LaneStream(open), 2, 1, events.Forwards)
	if err != nil {
		t.Fatal(err)
	}
	turn, ok := started[0].Event.(events.TurnStarted)
	if !ok {
		t.Fatalf("version 2 of %s is %T, want the turn_started", open, started[0].Event)
	}

	turns, err := c.nodes["n2"].OpenTurns(ctx, []string{open, closed})
	if err != nil {
		t.Fatal(err)
	}
	want := []commands.OpenTurn{{Key: open, TurnID: turn.TurnID, Node: "n1", Position: started[0].Position}}
	if diff := cmp.Diff(want, turns); diff != "" {
		t.Errorf("OpenTurns (-want +got):\n%s", diff)
	}
}
