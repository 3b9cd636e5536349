package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"hermes/adapters/eventstore/kurrentdb"
	"hermes/events"
	emulator "hermes/testfixtures/kurrentdb"
)

// TestMultiNodeOnKurrentDBEmulator runs three real `hermes serve` processes
// on one KurrentDB emulator (a test fixture, not a real KurrentDB): 64
// clients resolve the same 1,000 new keys through all nodes at once and
// exactly one session is created per key; a node SIGKILLed with an open
// turn recovers it at restart and leaves other nodes' turns alone; every
// node's read models pass projections verify. It also logs the replication
// lag between nodes.
func TestMultiNodeOnKurrentDBEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three hermes serve processes")
	}
	srv, err := emulator.Start(emulator.WithMaxAppendSize(8 << 20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	storeURL := srv.URL()
	const nodes = 3
	homes := make([]string, nodes)
	servers := make([]*server, nodes)
	env := func(i int) []string {
		return []string{"HERMES_STORE_URL=" + storeURL, fmt.Sprintf("HERMES_NODE_ID=n%d", i), "HERMES_RECOVERY_RECENT_SECONDS=0"}
	}
	for i := range nodes {
		homes[i] = filepath.Join(t.TempDir(), fmt.Sprintf("node%d", i))
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
	store, err := kurrentdb.Open(t.Context(), storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
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
	t.Logf("replication lag between nodes on the emulator (write on one node, first successful read on another, %d samples): p50 %v, p99 %v, max %v",
		len(lags), lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1])

	// A turn open on node 1 and one on node 0; node 0 dies.
	openTurn := func(s *server, chat string) string {
		key := "agent:main:telegram:dm:" + chat
		s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": chat, "chat_type": "dm"}}, nil)
		s.must("POST", "/v1/sessions/"+url.PathEscape(key)+"/turns/start", map[string]any{"turn_id": "t-" + chat}, nil)
		return key
	}
	mine := openTurn(servers[0], "crash-0")
	theirs := openTurn(servers[1], "busy-1")
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

	for i, s := range servers {
		if code := s.stop(syscall.SIGTERM); code != 0 {
			t.Fatalf("node %d exited %d:\n%s", i, code, s.stderr.String())
		}
	}
	for i := range nodes {
		out, _ := hermes(t, 0, "projections", "verify", "--home", homes[i], "--store", storeURL)
		t.Logf("node %d: %s", i, out)
	}
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
