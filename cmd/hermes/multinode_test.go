package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"hermes/adapters/eventstore/kurrentdb"
	"hermes/adapters/eventstore/postgres"
	"hermes/domain"
	"hermes/events"
	emulator "hermes/testfixtures/kurrentdb"
	pgtest "hermes/testfixtures/postgres"
)

// TestMultiNodeOnKurrentDBEmulator runs three real `hermes serve` processes
// on one KurrentDB emulator (a test fixture, not a real KurrentDB): 64
// clients resolve the same 1,000 new keys through all nodes at once and
// exactly one session is created per key; a node SIGKILLed with an open
// turn recovers it at restart and leaves other nodes' turns alone; every
// node's read models pass projections verify; a webhook receiver gets each
// event of the log exactly once across the three nodes (only the leader
// delivers). It also logs the replication lag between nodes.
func TestMultiNodeOnKurrentDBEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three hermes serve processes")
	}
	runMultiNode(t, emulatorStore(t, emulator.WithMaxAppendSize(8<<20)))
}

// TestMultiNodeOnPostgres is TestMultiNodeOnKurrentDBEmulator on a real
// PostgreSQL (the tests' own cluster, a schema of its own).
func TestMultiNodeOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three hermes serve processes")
	}
	runMultiNode(t, postgresStore(t))
}

// sharedStore is a store several nodes share in a test: the URL they are
// given, and how the test opens it to read the log.
type sharedStore struct {
	url  string
	open func(t *testing.T) events.Store
}

// emulatorStore starts a KurrentDB emulator for t.
func emulatorStore(t *testing.T, opts ...emulator.Option) sharedStore {
	t.Helper()
	srv, err := emulator.Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return sharedStore{url: srv.URL(), open: func(t *testing.T) events.Store {
		t.Helper()
		s, err := kurrentdb.Open(t.Context(), srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}}
}

// postgresStore gives t a database of its own on the tests' PostgreSQL
// cluster, in a schema that is not the default one.
func postgresStore(t *testing.T) sharedStore {
	t.Helper()
	u, err := url.Parse(pgtest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(postgres.SchemaParam, "nodes")
	u.RawQuery = q.Encode()
	storeURL := u.String()
	return sharedStore{url: storeURL, open: func(t *testing.T) events.Store {
		t.Helper()
		s, err := postgres.Open(t.Context(), storeURL, postgres.WithReadOnly())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}}
}

// runMultiNode is TestMultiNodeOnKurrentDBEmulator on the store st.
func runMultiNode(t *testing.T, st sharedStore) {
	storeURL := st.url
	const nodes = 3
	homes := make([]string, nodes)
	servers := make([]*server, nodes)
	env := func(i int) []string {
		return []string{"HERMES_STORE_URL=" + storeURL, fmt.Sprintf("HERMES_NODE_ID=n%d", i), "HERMES_RECOVERY_RECENT_SECONDS=0"}
	}
	hook := newHookCounter(t)
	for i := range nodes {
		homes[i] = filepath.Join(t.TempDir(), fmt.Sprintf("node%d", i))
		writeHookConfig(t, homes[i], hook.url)
		servers[i] = startServer(t, homes[i], env(i))
	}

	// 64 clients, 1,000 new keys, each resolved once through every node,
	// the three resolves of a key taken by different clients at once.
	const clients, keys = 64, 1000
	type job struct{ key, node int }
	jobs := make(chan job)
	go func() {
		defer close(jobs)
		for k := range keys {
			for n := range nodes {
				jobs <- job{k, (k + n) % nodes}
			}
		}
	}()
	created := make([]int, keys)
	sessionIDs := make([]map[string]bool, keys)
	for k := range sessionIDs {
		sessionIDs[k] = map[string]bool{}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for j := range jobs {
				var r resolved
				src := map[string]any{"platform": "telegram", "chat_id": fmt.Sprintf("race-%d", j.key), "chat_type": "dm"}
				status, err := servers[j.node].request("POST", "/v1/sessions/resolve", map[string]any{"source": src}, &r)
				if err == nil && status != http.StatusOK {
					err = fmt.Errorf("resolve key %d on node %d = %d", j.key, j.node, status)
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if r.Created {
					created[j.key]++
				}
				sessionIDs[j.key][r.Entry.SessionID] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d resolves of %d new keys through %d nodes by %d clients: %v", keys*nodes, keys, nodes, clients, time.Since(start).Round(time.Millisecond))
	for k := range keys {
		if created[k] != 1 || len(sessionIDs[k]) != 1 {
			t.Errorf("key %d: %d resolves said created, %d session ids; want exactly one of each", k, created[k], len(sessionIDs[k]))
		}
	}

	// The log itself: exactly one session_created per lane.
	store := st.open(t)
	for k := range keys {
		stream := events.LaneStream(fmt.Sprintf("agent:main:telegram:dm:race-%d", k))
		envs, err := store.ReadStream(t.Context(), stream, 0, 100, events.Forwards)
		if err != nil {
			t.Fatalf("ReadStream(%s) error = %v", stream, err)
		}
		n := 0
		for _, e := range envs {
			if _, ok := e.Event.(events.SessionCreated); ok {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s holds %d session_created events, want 1", stream, n)
		}
	}

	lags := replicationLag(t, servers, 200)
	t.Logf("replication lag between nodes (write on one node, first successful read on another, %d samples; the read models gather up to 100 ms while nobody waits for them): p50 %v, p99 %v, max %v",
		len(lags), lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1])

	// Webhooks, the normal case: every event delivered, once, whichever
	// node wrote it. Delivery catches up before node 0 is killed.
	store2 := st.open(t)
	waitForDelivery(t, store2, hook)
	t.Logf("webhook receiver: %d deliveries of %d distinct events so far", hook.total(), len(hook.counts()))

	// A turn open on node 1 and one on node 0; node 0 dies.
	openTurn := func(s *server, chat string) string {
		key := "agent:main:telegram:dm:" + chat
		s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": chat, "chat_type": "dm"}}, nil)
		s.must("POST", "/v1/sessions/"+url.PathEscape(key)+"/turns/start", map[string]any{"turn_id": "t-" + chat}, nil)
		return key
	}
	mine := openTurn(servers[0], "crash-0")
	theirs := openTurn(servers[1], "busy-1")
	waitForDelivery(t, store2, hook) // nothing in flight: the kill is no webhook's business
	servers[0].kill()
	servers[0] = startServer(t, homes[0], env(0))
	var e entry
	servers[0].must("GET", "/v1/sessions/"+url.PathEscape(mine), nil, &e)
	if e.OpenTurnID != nil || !e.ResumePending || e.ResumeReason == nil || *e.ResumeReason != events.ResumeRestartInterrupted {
		t.Errorf("node 0's lane after its SIGKILL and restart = %+v, want the turn closed and resume pending (restart_interrupted)", e)
	}
	waitFor(t, func() bool {
		var e entry
		return servers[1].call("GET", "/v1/sessions/"+url.PathEscape(mine), nil, &e) == http.StatusOK && e.OpenTurnID == nil
	}, "node 1 to see node 0's recovery")
	servers[1].must("GET", "/v1/sessions/"+url.PathEscape(theirs), nil, &e)
	if e.OpenTurnID == nil || e.ResumePending {
		t.Errorf("node 1's lane after node 0's recovery = %+v, want its turn still open", e)
	}
	servers[1].must("POST", "/v1/sessions/"+url.PathEscape(theirs)+"/turns", map[string]any{"input_tokens": 1, "output_tokens": 1}, nil)

	waitForDelivery(t, store2, hook)
	for i, s := range servers {
		if code := s.stop(syscall.SIGTERM); code != 0 {
			t.Fatalf("node %d exited %d:\n%s", i, code, s.stderr.String())
		}
	}
	for i := range nodes {
		out, _ := hermes(t, 0, "projections", "verify", "--home", homes[i], "--store", storeURL)
		t.Logf("node %d: %s", i, out)
	}

	// The whole run: every event up to the checkpoint the last leader
	// released delivered exactly once, lease events never.
	lease := lastLease(t, store2)
	want, err := deliverable(t.Context(), store2, lease.Delivered)
	if err != nil {
		t.Fatal(err)
	}
	got := hook.counts()
	dups, missing := 0, 0
	for id, n := range got {
		if n != 1 {
			dups++
			if dups <= 5 {
				t.Errorf("event %s delivered %d times, want once", id, n)
			}
		}
	}
	for _, id := range want {
		if got[id] == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("event %s never delivered", id)
			}
		}
	}
	if dups > 0 || missing > 0 || len(got) < len(want) {
		t.Errorf("webhook receiver: %d distinct events (%d deliveries), %d duplicated, %d missing of %d up to the released checkpoint",
			len(got), hook.total(), dups, missing, len(want))
	}
	t.Logf("webhook receiver: %d deliveries of %d distinct events; %d events up to the released checkpoint %d (held last by %s); none twice",
		hook.total(), len(got), len(want), lease.Delivered, lease.Holder)
}

// hookCounter is a loopback webhook receiver counting deliveries by
// X-Hermes-Event-Id.
type hookCounter struct {
	url string
	mu  sync.Mutex
	n   map[string]int
}

func newHookCounter(t *testing.T) *hookCounter {
	t.Helper()
	h := &hookCounter{n: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.n[r.Header.Get("X-Hermes-Event-Id")]++
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/hook"
	return h
}

func (h *hookCounter) counts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.n)
}

func (h *hookCounter) total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.n {
		n += c
	}
	return n
}

// writeHookConfig writes home's config.yaml: one webhook to url, for the
// whole log.
func writeHookConfig(t *testing.T, home, url string) {
	t.Helper()
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := "hooks:\n  start_at_head: false\n  webhooks:\n    - name: count\n      url: " + url + "\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// deliverable lists the ids of the events a webhook for the whole log
// gets, up to position upTo: all but lease events.
func deliverable(ctx context.Context, store events.Store, upTo uint64) ([]string, error) {
	var ids []string
	var after uint64
	for {
		page, err := store.ReadAll(ctx, after, 4096)
		if err != nil {
			return nil, err
		}
		for _, env := range page {
			after = env.Position
			if env.Position > upTo {
				return ids, nil
			}
			if !events.IsLeaseType(env.Type) {
				ids = append(ids, env.ID)
			}
		}
		if len(page) < 4096 {
			return ids, nil
		}
	}
}

// waitForDelivery waits until the receiver got every deliverable event up
// to the log's head at the call.
func waitForDelivery(t *testing.T, store events.Store, hook *hookCounter) {
	t.Helper()
	head, err := store.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want, err := deliverable(t.Context(), store, head)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got := hook.counts()
		missing := 0
		for _, id := range want {
			if got[id] == 0 {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook receiver still misses %d of %d events after 3 minutes", missing, len(want))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lastLease is the leader lease as the log holds it.
func lastLease(t *testing.T, store events.Store) domain.Lease {
	t.Helper()
	envs, err := store.ReadStream(t.Context(), events.LeaderLease, 1, 1<<20, events.Forwards)
	if err != nil {
		t.Fatal(err)
	}
	var l domain.Lease
	for _, env := range envs {
		l = l.Evolve(env.Event)
	}
	return l
}

// replicationLag resolves n new keys, each on one node, and measures how
// long until another node's read model has the lane.
func replicationLag(t *testing.T, servers []*server, n int) []time.Duration {
	t.Helper()
	lags := make([]time.Duration, 0, n)
	for i := range n {
		w, r := servers[i%len(servers)], servers[(i+1)%len(servers)]
		chat := fmt.Sprintf("lag-%d", i)
		key := url.PathEscape("agent:main:telegram:dm:" + chat)
		w.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": chat, "chat_type": "dm"}}, nil)
		written := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		for {
			if status, err := r.request("GET", "/v1/sessions/"+key, nil, nil); err == nil && status == http.StatusOK {
				break
			}
			if ctx.Err() != nil {
				cancel()
				t.Fatalf("node never saw lane %s", chat)
			}
			time.Sleep(200 * time.Microsecond)
		}
		cancel()
		lags = append(lags, time.Since(written))
	}
	slices.Sort(lags)
	return lags
}

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMultiNodeAdoptionOnKurrentDBEmulator: a node SIGKILLed with an open
// turn and never restarted has its run adopted by a surviving node once its
// lease expired, by the survivors' clocks: the turn is closed and marked
// to resume exactly once, and gateway-<dead> records one adoption. The
// nodes run manual clocks (node.lease_seconds 3, renewed every second of
// them), moved with POST /v1/clock; each step waits for the node's renewal
// in the log before the next node's clock moves.
func TestMultiNodeAdoptionOnKurrentDBEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three hermes serve processes")
	}
	runMultiNodeAdoption(t, emulatorStore(t))
}

// TestMultiNodeAdoptionOnPostgres is
// TestMultiNodeAdoptionOnKurrentDBEmulator on a real PostgreSQL.
func TestMultiNodeAdoptionOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three hermes serve processes")
	}
	runMultiNodeAdoption(t, postgresStore(t))
}

func runMultiNodeAdoption(t *testing.T, st sharedStore) {
	storeURL := st.url
	const ttl = 3 * time.Second
	names := []string{"a0", "a1", "dead"}
	servers := make([]*server, len(names))
	homes := make([]string, len(names))
	for i, name := range names {
		homes[i] = filepath.Join(t.TempDir(), name)
		servers[i] = startServer(t, homes[i], []string{"HERMES_STORE_URL=" + storeURL, "HERMES_NODE_ID=" + name,
			"HERMES_NODE_LEASE_SECONDS=3", "HERMES_RECOVERY_RECENT_SECONDS=0"}, "--clock=manual")
	}
	// Opened once a node has created the store (a read-only PostgreSQL
	// store needs its schema).
	store := st.open(t)
	// One time for all: every clock is moved to base, past each start.
	base := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	setClock := func(i int, to time.Time) {
		t.Helper()
		servers[i].must("POST", "/v1/clock", map[string]any{"now": to.Format(time.RFC3339Nano)}, nil)
		waitFor(t, func() bool { return renewedAt(t, store, names[i], to) }, names[i]+"'s lease renewal at "+to.String())
	}
	for i := range servers {
		setClock(i, base)
	}

	chat := "adopt-me"
	key := "agent:main:telegram:dm:" + chat
	servers[2].must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": chat, "chat_type": "dm"}}, nil)
	servers[2].must("POST", "/v1/sessions/"+url.PathEscape(key)+"/turns/start", map[string]any{"turn_id": "t-" + chat}, nil)
	servers[2].kill()

	// The survivors' clocks move a third of the lease at a time; the dead
	// node's lease (until base + 3 s) runs out at the third step.
	for step := 1; step <= 4; step++ {
		for i := range 2 {
			setClock(i, base.Add(time.Duration(step)*ttl/3))
		}
	}
	var e entry
	waitFor(t, func() bool {
		return servers[0].call("GET", "/v1/sessions/"+url.PathEscape(key), nil, &e) == http.StatusOK && e.OpenTurnID == nil
	}, "the dead node's turn to be closed by an adopter")
	if !e.ResumePending || e.ResumeReason == nil || *e.ResumeReason != events.ResumeRestartInterrupted {
		t.Errorf("adopted lane = %+v, want resume pending (restart_interrupted)", e)
	}
	// One more round on each survivor: nothing is adopted twice.
	for i := range 2 {
		setClock(i, base.Add(5*ttl/3))
	}

	gw, err := store.ReadStream(t.Context(), events.GatewayStreamOf("dead"), 1, 1000, events.Forwards)
	if err != nil {
		t.Fatal(err)
	}
	var adoptions []events.RunAdopted
	for _, env := range gw {
		if a, ok := env.Event.(events.RunAdopted); ok {
			adoptions = append(adoptions, a)
		}
	}
	if len(adoptions) != 1 || !slices.Equal(adoptions[0].OpenLanes, []string{key}) || adoptions[0].By == "dead" {
		t.Errorf("gateway-dead adoptions = %+v, want one by a survivor listing %s", adoptions, key)
	}
	lane, err := store.ReadStream(t.Context(), events.LaneStream(key), 1, 1000, events.Forwards)
	if err != nil {
		t.Fatal(err)
	}
	interrupted := 0
	for _, env := range lane {
		if _, ok := env.Event.(events.TurnInterrupted); ok {
			interrupted++
			// Once the run is recorded adopted, any survivor that still
			// sees the turn open closes it (the adoption rule, commands'
			// AdoptDeadRuns: an adopter that dies in between leaves no
			// turn open); the turn is closed once, by one of them.
			if env.Metadata.Command != "adopt_turn" || (env.Metadata.Node != names[0] && env.Metadata.Node != names[1]) {
				t.Errorf("turn_interrupted metadata = %+v, want command adopt_turn by a survivor", env.Metadata)
			}
		}
	}
	if interrupted != 1 {
		t.Errorf("lane holds %d turn_interrupted, want 1", interrupted)
	}
	if len(adoptions) == 1 {
		t.Logf("node %s adopted the dead node's run (its lease ran out at %s): %v", adoptions[0].By, adoptions[0].LeaseUntil.Format(time.RFC3339), adoptions[0].OpenLanes)
	}

	for i := range 2 {
		if code := servers[i].stop(syscall.SIGTERM); code != 0 {
			t.Fatalf("node %s exited %d:\n%s", names[i], code, servers[i].stderr.String())
		}
		out, _ := hermes(t, 0, "projections", "verify", "--home", homes[i], "--store", storeURL)
		t.Logf("node %s: %s", names[i], out)
	}
}

// renewedAt reports whether node's gateway stream holds a lease event
// written at its clock's time at.
func renewedAt(t *testing.T, store events.Store, node string, at time.Time) bool {
	t.Helper()
	last, err := store.ReadStream(t.Context(), events.GatewayStreamOf(node), 0, 8, events.Backwards)
	if err != nil {
		return false
	}
	for _, env := range last {
		switch e := env.Event.(type) {
		case events.LeaseRenewed:
			if e.At.Equal(at) {
				return true
			}
		case events.LeaseAcquired:
			if e.At.Equal(at) {
				return true
			}
		}
	}
	return false
}
