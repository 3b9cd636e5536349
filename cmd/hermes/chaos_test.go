package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"hermes/adapters/eventstore/kurrentdb"
	"hermes/adapters/eventstore/postgres"
	"hermes/events"
	"hermes/testfixtures/chaos"
	emulator "hermes/testfixtures/kurrentdb"
	pgtest "hermes/testfixtures/postgres"
)

// The chaos tests: three real `hermes serve` processes on one store, a
// client workload through all of them recording every operation, and a
// nemesis injecting faults on a seeded schedule; then the checkers of
// testfixtures/chaos decide from the history and the log. HERMES_CHAOS_SECONDS
// sets the workload's length (default 20 s: the short run of make test;
// make chaos runs several minutes), HERMES_CHAOS_SEED replays a schedule
// (the same faults at the same offsets and the same client choices; the
// interleaving itself is the machine's).
//
// The partition nemesis is a TCP proxy per node between the node and the
// store, owned by the test (testfixtures/chaos.Proxy), rather than network
// namespaces: it needs no root, touches nothing outside the test process on
// a machine other jobs share, cuts one node while the others keep the
// store, and heals at once and for certain.

// chaosEnabled skips the chaos tests unless HERMES_CHAOS is set: make
// test runs the short run on its own (make test-chaos), make chaos the
// long one, so the race-detector pass over the package does not run them
// again.
func chaosEnabled(t *testing.T) {
	t.Helper()
	if testing.Short() || os.Getenv("HERMES_CHAOS") == "" {
		t.Skip("a chaos run (HERMES_CHAOS=1; make test-chaos, make chaos)")
	}
}

// TestChaosOnKurrentDBEmulator is the chaos run on the KurrentDB emulator.
func TestChaosOnKurrentDBEmulator(t *testing.T) {
	chaosEnabled(t)
	runChaos(t, chaosEmulator(t), chaosOptions{bin: binary, nemesis: true})
}

// TestChaosOnPostgres is the chaos run on PostgreSQL (a cluster of the
// test's own, so the store-restart nemesis restarts no other test's).
func TestChaosOnPostgres(t *testing.T) {
	chaosEnabled(t)
	runChaos(t, chaosPostgres(t), chaosOptions{bin: binary, nemesis: true})
}

// TestChaosCatchesBrokenBuild: a hermes built with the tag
// hermes_broken_expected_version (lane appends ignore the expected
// version) forks lanes when two nodes resolve one new key at once; the
// checkers must say so. It passes when they fail the run.
func TestChaosCatchesBrokenBuild(t *testing.T) {
	chaosEnabled(t)
	bin := filepath.Join(t.TempDir(), "hermes-broken")
	build := exec.Command("go", "build", "-tags", "hermes_broken_expected_version", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the broken hermes: %v\n%s", err, out)
	}
	res := runChaos(t, chaosEmulator(t), chaosOptions{bin: bin, racingResolves: true, expectBroken: true})
	if res.ok() {
		t.Fatalf("the checkers passed a build without the expected-version check:\n%s", res.summary)
	}
	t.Logf("the checkers caught the broken build:\n%s", res.summary)
}

// chaosStore is a store the chaos nodes share.
type chaosStore struct {
	name string
	// target is the store's host:port; nodeURL is the URL a node is given
	// when its proxy listens on addr.
	target  string
	nodeURL func(addr string) string
	// open opens the store directly (no proxy), to read the log.
	open    func(t *testing.T) events.Store
	restart func() error
}

func chaosEmulator(t *testing.T) chaosStore {
	srv, err := emulator.Start(emulator.WithMaxAppendSize(8 << 20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return chaosStore{
		name:    "kurrentdb-emulator",
		target:  srv.Addr(),
		nodeURL: func(addr string) string { return strings.Replace(srv.URL(), srv.Addr(), addr, 1) },
		open: func(t *testing.T) events.Store {
			s, err := kurrentdb.Open(context.Background(), srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		restart: srv.Restart,
	}
}

func chaosPostgres(t *testing.T) chaosStore {
	c, err := pgtest.Start(t.Context())
	if errors.Is(err, pgtest.ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	u, err := url.Parse(c.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(postgres.SchemaParam, "chaos")
	u.RawQuery = q.Encode()
	direct := u.String()
	return chaosStore{
		name:   "postgres",
		target: u.Host,
		nodeURL: func(addr string) string {
			v := *u
			v.Host = addr
			return v.String()
		},
		open: func(t *testing.T) events.Store {
			s, err := postgres.Open(context.Background(), direct, postgres.WithReadOnly())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		restart: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			return c.Restart(ctx)
		},
	}
}

type chaosOptions struct {
	bin string
	// nemesis injects faults; racingResolves makes every client resolve
	// the same new keys on every node at once (the fork workload).
	nemesis, racingResolves bool
	// expectBroken: the run is meant to fail the checkers (not logged as
	// an error).
	expectBroken bool
}

// chaosNode is one hermes serve of the run.
type chaosNode struct {
	name, home string
	env, args  []string
	proxy      *chaos.Proxy
	// skew, for the node on a manual clock, is how far its clock is set
	// from the system clock (nanoseconds; see driveClock).
	skew atomic.Int64
	// lifecycle serialises the kills and restarts of the node's process.
	lifecycle sync.Mutex

	mu  sync.Mutex
	srv *server
}

func (n *chaosNode) current() *server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv
}

const (
	chaosNodes    = 3
	chaosLease    = 3 * time.Second
	chaosTimeout  = 5 * time.Second
	chaosReadyMax = 90 * time.Second
)

// boot starts the node's process and waits until it is ready.
func (n *chaosNode) boot(t *testing.T, bin string) error {
	s := launchServerBin(t, bin, n.home, n.env, n.args...)
	deadline := time.Now().Add(chaosReadyMax)
	for {
		select {
		case <-s.done:
			return fmt.Errorf("node %s exited (%d) before ready:\n%s", n.name, s.exit, lastLines(s.stderr.String(), 20))
		default:
		}
		resp, err := http.Get("http://" + s.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				n.mu.Lock()
				n.srv = s
				n.mu.Unlock()
				return nil
			}
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("node %s not ready after %v:\n%s", n.name, chaosReadyMax, lastLines(s.stderr.String(), 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// chaosResult is a run's verdict.
type chaosResult struct {
	linear    chaos.Linearizability
	log       chaos.LogReport
	anomalies []chaos.Anomaly
	summary   string
}

func (r chaosResult) ok() bool {
	return r.linear.Result == porcupine.Ok && len(r.anomalies) == 0
}

func chaosSeconds() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("HERMES_CHAOS_SECONDS")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 20 * time.Second
}

func chaosSeed() uint64 {
	if s, err := strconv.ParseUint(os.Getenv("HERMES_CHAOS_SEED"), 10, 64); err == nil {
		return s
	}
	return uint64(time.Now().UnixNano())
}

func runChaos(t *testing.T, st chaosStore, opt chaosOptions) chaosResult {
	seed := chaosSeed()
	t.Logf("chaos on %s: seed %d (HERMES_CHAOS_SEED=%d replays the schedule)", st.name, seed, seed)
	hook := newHookCounter(t)
	nodes := make([]*chaosNode, chaosNodes)
	for i := range nodes {
		p, err := chaos.NewProxy(st.target)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		n := &chaosNode{name: fmt.Sprintf("c%d", i), home: filepath.Join(t.TempDir(), fmt.Sprintf("c%d", i)), proxy: p}
		n.env = []string{"HERMES_STORE_URL=" + st.nodeURL(p.Addr()), "HERMES_NODE_ID=" + n.name,
			"HERMES_NODE_LEASE_SECONDS=" + strconv.Itoa(int(chaosLease/time.Second)), "HERMES_RECOVERY_RECENT_SECONDS=0"}
		if err := os.MkdirAll(n.home, 0o700); err != nil {
			t.Fatal(err)
		}
		// No automatic resets and no stuck-loop suspensions: a lane's
		// session changes only by the workload's resets (the model's rule).
		// A stop drains for a second at most.
		cfg := "session_reset:\n  mode: none\nrecovery:\n  stuck_loop_threshold: 1000000\nagent:\n  restart_drain_timeout: 1\nhooks:\n  start_at_head: false\n  webhooks:\n    - name: count\n      url: " + hook.url + "\n"
		if err := os.WriteFile(filepath.Join(n.home, "config.yaml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if i == chaosNodes-1 && opt.nemesis {
			// The last node keeps its own time: a manual clock the test
			// moves along the system clock, plus a skew the nemesis sets.
			n.args = []string{"--clock=manual"}
		}
		if err := n.boot(t, opt.bin); err != nil {
			t.Fatal(err)
		}
		if len(n.args) > 0 {
			go driveClock(t.Context(), n)
		}
		nodes[i] = n
	}
	store := st.open(t)
	t.Logf("%d nodes ready", len(nodes))

	history := chaos.NewHistory()
	w := &chaosWorkload{nodes: nodes, history: history, client: &http.Client{Timeout: chaosTimeout}, known: map[string]*keyState{}}
	duration := chaosSeconds()
	if opt.racingResolves {
		w.racingResolves(t, 120)
	} else {
		deadline := time.Now().Add(duration)
		var wg sync.WaitGroup
		const clients, keys = 8, 40
		for c := range clients {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			wg.Go(func() { w.run(c, rng, keys, deadline) })
		}
		var faults map[string]int
		var schedule []string
		// A node whose run was adopted (cut off, paused, or another node's
		// clock ahead) restarts itself (exit 75): bring it back, as its
		// supervisor would.
		watchCtx, stopWatch := context.WithCancel(t.Context())
		var watch sync.WaitGroup
		watch.Go(func() {
			for watchCtx.Err() == nil {
				restartExited(t, nodes, opt.bin)
				select {
				case <-watchCtx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		})
		if opt.nemesis {
			faults, schedule = nemesis(t, st, nodes, opt.bin, rand.New(rand.NewPCG(seed, 1<<32)), deadline)
		}
		wg.Wait()
		stopWatch()
		watch.Wait()
		w.faults, w.schedule = faults, schedule
	}
	healAll(t, nodes, opt.bin)

	return checkChaos(t, st, store, nodes, hook, w, seed, opt)
}

// keyState is what the clients know of a lane: its session and the turns
// started on it, shared so that clients contend for the same turns.
type keyState struct {
	sid   string
	turns []string
}

type chaosWorkload struct {
	nodes   []*chaosNode
	history *chaos.History
	client  *http.Client

	mu    sync.Mutex
	known map[string]*keyState
	seq   int

	faults   map[string]int
	schedule []string
}

func chaosKey(chat string) string { return "agent:main:telegram:dm:" + chat }

// run is one client: random operations on random keys through random nodes
// until deadline.
func (w *chaosWorkload) run(client int, rng *rand.Rand, keys int, deadline time.Time) {
	for time.Now().Before(deadline) {
		chat := fmt.Sprintf("chaos-%d", rng.IntN(keys))
		key := chaosKey(chat)
		node := rng.IntN(len(w.nodes))
		w.mu.Lock()
		ks := w.known[key]
		if ks == nil {
			ks = &keyState{}
			w.known[key] = ks
		}
		sid, turns := ks.sid, slices.Clone(ks.turns)
		w.seq++
		seq := w.seq
		w.mu.Unlock()
		in := chaos.Input{Key: key}
		r := rng.IntN(100)
		switch {
		case sid == "" || r < 15:
			in.Kind = chaos.Resolve
		case r < 40:
			in.Kind, in.Turn = chaos.Start, fmt.Sprintf("t%d-%d", client, seq)
		case r < 65 && len(turns) > 0:
			in.Kind, in.Turn, in.SessionID = chaos.Message, turns[len(turns)-1-rng.IntN(min(2, len(turns)))], sid
			in.Text = fmt.Sprintf("m%d-%d", client, seq)
		case r < 92 && len(turns) > 0:
			in.Kind, in.Turn = chaos.Complete, turns[len(turns)-1]
		case r < 96:
			in.Kind = chaos.Reset
		default:
			in.Kind = chaos.Resolve
		}
		out := w.do(client, node, chat, in)
		if out.Outcome == chaos.OK {
			w.mu.Lock()
			if out.SessionID != "" {
				ks.sid = out.SessionID
			}
			if in.Kind == chaos.Start {
				ks.turns = append(ks.turns, in.Turn)
				if len(ks.turns) > 4 {
					ks.turns = ks.turns[1:]
				}
			}
			w.mu.Unlock()
		}
	}
}

// racingResolves resolves n new keys, each on every node at once.
func (w *chaosWorkload) racingResolves(t *testing.T, n int) {
	for k := range n {
		chat := fmt.Sprintf("race-%d", k)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range w.nodes {
			wg.Go(func() {
				<-start
				w.do(i, i, chat, chaos.Input{Kind: chaos.Resolve, Key: chaosKey(chat)})
			})
		}
		close(start)
		wg.Wait()
	}
	t.Logf("%d keys resolved on %d nodes at once", n, len(w.nodes))
}

// do sends one operation and records it.
func (w *chaosWorkload) do(client, node int, chat string, in chaos.Input) chaos.Output {
	srv := w.nodes[node].current()
	var path string
	var body any
	lanePath := "/v1/sessions/" + url.PathEscape(in.Key)
	switch in.Kind {
	case chaos.Resolve:
		path, body = "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": chat, "chat_type": "dm"}}
	case chaos.Start:
		path, body = lanePath+"/turns/start", map[string]any{"turn_id": in.Turn}
	case chaos.Complete:
		path, body = lanePath+"/turns", map[string]any{"turn_id": in.Turn, "output_tokens": 1}
	case chaos.Reset:
		path, body = lanePath+"/reset", map[string]any{}
	case chaos.Message:
		path, body = "/v1/transcripts/"+url.PathEscape(in.SessionID)+"/messages", map[string]any{"role": "assistant", "content": in.Text, "turn_id": in.Turn}
	}
	id := w.history.Invoke(client, node, in)
	out := w.send(srv, path, body, in.Kind)
	w.history.Done(id, out)
	return out
}

func (w *chaosWorkload) send(srv *server, path string, body any, kind chaos.Kind) chaos.Output {
	data, _ := json.Marshal(body)
	req, err := http.NewRequest("POST", "http://"+srv.addr+path, bytes.NewReader(data))
	if err != nil {
		return chaos.Output{Outcome: chaos.Unknown, Err: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		// Nothing listens (the node is down): the request was never sent.
		return chaos.Output{Outcome: chaos.Failed, Code: "connection_refused"}
	}
	if err != nil {
		return chaos.Output{Outcome: chaos.Unknown, Err: err.Error()}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return chaos.Output{Outcome: chaos.Unknown, Status: resp.StatusCode, Err: err.Error()}
	}
	out := chaos.Output{Status: resp.StatusCode}
	switch resp.StatusCode {
	case http.StatusOK:
		out.Outcome = chaos.OK
	case http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusInsufficientStorage:
		// Refusals: nothing was appended.
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		out.Outcome, out.Code = chaos.Failed, e.Error.Code
		return out
	default:
		// A 5xx may follow a commit (a timeout after the append).
		out.Outcome, out.Err = chaos.Unknown, strings.TrimSpace(string(raw))
		return out
	}
	var e entry
	var v struct {
		Entry    *entry `json:"entry"`
		Created  bool   `json:"created"`
		Position uint64 `json:"position"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return chaos.Output{Outcome: chaos.Unknown, Status: resp.StatusCode, Err: "decode: " + err.Error()}
	}
	switch kind {
	case chaos.Resolve, chaos.Start:
		if v.Entry != nil {
			e = *v.Entry
		}
	case chaos.Complete, chaos.Reset:
		_ = json.Unmarshal(raw, &e)
	case chaos.Message:
		out.Position = v.Position
		return out
	}
	out.SessionID, out.Created, out.Version = e.SessionID, v.Created, e.Version
	return out
}

// nemesis injects a fault every few seconds until deadline, each healed
// before the next: a node partitioned from the store, a node paused
// (SIGSTOP) past its lease, a node SIGKILLed and restarted, the store
// restarted, the last node's clock skewed by more than a third of the
// lease. It returns the faults injected by kind and the schedule.
func nemesis(t *testing.T, st chaosStore, nodes []*chaosNode, bin string, rng *rand.Rand, deadline time.Time) (map[string]int, []string) {
	faults := map[string]int{}
	var schedule []string
	start := time.Now()
	hold := chaosLease + time.Second
	for time.Until(deadline) > hold+time.Second {
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		i := rng.IntN(len(nodes))
		n := nodes[i]
		var kind string
		switch rng.IntN(5) {
		case 0:
			kind = "partition " + n.name
			n.proxy.Partition()
			time.Sleep(hold)
			n.proxy.Heal()
		case 1:
			kind = "pause " + n.name
			s := n.current()
			_ = s.cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(hold)
			_ = s.cmd.Process.Signal(syscall.SIGCONT)
		case 2:
			kind = "kill+restart " + n.name
			n.lifecycle.Lock()
			n.current().kill()
			err := n.boot(t, bin)
			n.lifecycle.Unlock()
			if err != nil {
				t.Logf("nemesis: restart %s (the watchdog tries again): %v", n.name, err)
			}
		case 3:
			kind = "store restart"
			if err := st.restart(); err != nil {
				t.Errorf("nemesis: restart the store: %v", err)
			}
		case 4:
			// More than a third of the lease, ahead or behind.
			skewed := nodes[len(nodes)-1]
			d := chaosLease/3 + time.Duration(500+rng.IntN(1000))*time.Millisecond
			if rng.IntN(2) == 0 {
				d = -d
			}
			kind = fmt.Sprintf("skew %s %+.1fs", skewed.name, d.Seconds())
			skewed.skew.Store(int64(d))
			time.Sleep(hold)
			skewed.skew.Store(0)
		}
		faults[strings.Fields(kind)[0]]++
		schedule = append(schedule, fmt.Sprintf("%6.1fs %s", time.Since(start).Seconds(), kind))
	}
	return faults, schedule
}

// driveClock moves the manual clock of n to the system clock plus n's
// skew every 100 ms until ctx ends. A manual clock only moves forwards: a
// skew ahead that ends leaves the clock still until the system clock
// catches up, and a skew behind is the clock held still for a while.
func driveClock(ctx context.Context, n *chaosNode) {
	client := &http.Client{Timeout: time.Second}
	var last time.Time
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		to := time.Now().Add(time.Duration(n.skew.Load())).UTC()
		s := n.current()
		if !to.After(last) || s == nil {
			continue
		}
		body, _ := json.Marshal(map[string]any{"now": to.Format(time.RFC3339Nano)})
		req, err := http.NewRequestWithContext(ctx, "POST", "http://"+s.addr+"/v1/clock", bytes.NewReader(body))
		if err != nil {
			continue
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			continue // paused, restarting: the next tick catches up
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			last = to
		} else {
			last = time.Time{} // a restarted node: its clock began anew
		}
	}
}

// restartExited restarts the nodes whose process ended (a node whose run
// was adopted while it was cut off restarts itself: exit 75). A node that
// cannot start (its store cut off or restarting: it exits at once) is
// tried again by the next call; one that never comes back is what the
// convergence checker reports.
func restartExited(t *testing.T, nodes []*chaosNode, bin string) {
	for _, n := range nodes {
		n.lifecycle.Lock()
		select {
		case <-n.current().done:
			if err := n.boot(t, bin); err != nil {
				t.Logf("restart %s (tried again): %v", n.name, err)
			}
		default:
		}
		n.lifecycle.Unlock()
	}
}

// healAll ends every fault: proxies heal, paused processes resume, ended
// ones restart.
func healAll(t *testing.T, nodes []*chaosNode, bin string) {
	for _, n := range nodes {
		n.proxy.Heal()
		_ = n.current().cmd.Process.Signal(syscall.SIGCONT)
	}
	restartExited(t, nodes, bin)
}

// checkChaos runs the checkers over the history and the log once the
// cluster is healed, and prints the summary.
func checkChaos(t *testing.T, st chaosStore, store events.Store, nodes []*chaosNode, hook *hookCounter, w *chaosWorkload, seed uint64, opt chaosOptions) chaosResult {
	ctx := t.Context()
	var res chaosResult
	phase := time.Now()
	lap := func(what string) {
		t.Logf("%s: %v", what, time.Since(phase).Round(time.Millisecond))
		phase = time.Now()
	}
	ops := w.history.Ops()
	logEnvs, err := chaos.ReadLog(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	// The turns hermes itself closed (adoption, crash recovery) join the
	// history: each may have happened any time after its turn's start.
	startOf := map[string]chaos.Op{}
	for _, o := range ops {
		if o.Input.Kind == chaos.Start {
			startOf[o.Input.Key+"/"+o.Input.Turn] = o
		}
	}
	end := ops[len(ops)-1].Complete
	for _, o := range ops {
		end = max(end, o.Complete)
	}
	checked := slices.Clone(ops)
	interrupts, adoptions := 0, 0
	for _, env := range logEnvs {
		if _, ok := env.Event.(events.RunAdopted); ok {
			adoptions++
		}
		e, ok := env.Event.(events.TurnInterrupted)
		if !ok || !strings.HasPrefix(env.Stream, events.LaneStream("")) {
			continue
		}
		key := strings.TrimPrefix(env.Stream, events.LaneStream(""))
		s, ok := startOf[key+"/"+e.TurnID]
		if !ok {
			continue
		}
		interrupts++
		checked = append(checked, chaos.Op{ID: len(checked), Client: -1, Input: chaos.Input{Kind: chaos.Interrupt, Key: key, Turn: e.TurnID},
			Output: chaos.Output{Outcome: chaos.OK}, Invoke: s.Invoke, Complete: end})
	}
	checkStart := time.Now()
	res.linear = chaos.CheckLinearizable(checked, 2*time.Minute)
	checkTime := time.Since(checkStart)
	res.log = chaos.CheckLog(logEnvs, ops)
	res.anomalies = append(res.anomalies, res.log.Anomalies...)

	// Webhooks: every deliverable event delivered at least once (the
	// leader may die or pause mid-batch: duplicates are counted).
	lap("history and log checked")
	if !opt.expectBroken {
		res.anomalies = append(res.anomalies, waitDelivered(ctx, store, hook)...)
	}
	lap("webhooks delivered")
	dups := 0
	for _, n := range hook.counts() {
		if n > 1 {
			dups++
		}
	}
	// Read models converge: every node answers each lane as the log has
	// it (session, version, open turn).
	res.anomalies = append(res.anomalies, converge(t, nodes, logEnvs, opt.bin)...)
	lap("read models converged")
	// Every node stops before any is verified: a node still running
	// appends (its stop, its leases) past what a stopped one applied.
	for _, n := range nodes {
		s := n.current()
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(time.Minute):
			res.anomalies = append(res.anomalies, chaos.Anomaly{Checker: "stop", What: n.name + " did not stop after SIGTERM"})
			s.kill()
		}
	}
	verified := 0
	for _, n := range nodes {
		cmd := exec.Command(binary, "projections", "verify", "--home", n.home, "--store", st.nodeURL(n.proxy.Addr()))
		cmd.Env = append(os.Environ(), "NO_COLOR=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			res.anomalies = append(res.anomalies, chaos.Anomaly{Checker: "projections-verify", What: fmt.Sprintf("%s: %v: %s", n.name, err, lastLines(string(out), 5))})
		} else {
			verified++
		}
	}

	lap("nodes stopped and verified")
	counts := chaos.Counts(ops)
	var b strings.Builder
	fmt.Fprintf(&b, "chaos summary (%s, seed %d)\n", st.name, seed)
	fmt.Fprintf(&b, "  operations: %d (ok %d, failed %d, unknown %d); turns closed by hermes: %d\n", len(ops), counts[chaos.OK], counts[chaos.Failed], counts[chaos.Unknown], interrupts)
	fmt.Fprintf(&b, "  node runs adopted by another node: %d\n", adoptions)
	kinds := map[chaos.Kind]int{}
	for _, o := range ops {
		kinds[o.Input.Kind]++
	}
	fmt.Fprintf(&b, "  by kind: %v\n", kinds)
	why := map[string]int{}
	for _, o := range ops {
		if o.Output.Outcome == chaos.Unknown {
			r := o.Output.Err
			if o.Output.Status != 0 {
				r = fmt.Sprintf("%d %s", o.Output.Status, r)
			}
			if len(r) > 60 {
				r = r[:60]
			}
			why[r]++
		} else if o.Output.Outcome == chaos.Failed {
			why[fmt.Sprintf("failed %d %s", o.Output.Status, o.Output.Code)]++
		}
	}
	reasons := slices.SortedFunc(maps.Keys(why), func(a, b string) int { return why[b] - why[a] })
	for i, r := range reasons {
		if i == 6 {
			break
		}
		fmt.Fprintf(&b, "    %5d × %s\n", why[r], r)
	}
	fmt.Fprintf(&b, "  faults injected: %v\n", w.faults)
	fmt.Fprintf(&b, "  log: %d events, %d lanes, %d messages; %d acknowledged writes looked up\n", res.log.Events, res.log.Lanes, res.log.Messages, res.log.Acknowledged)
	verdict := func(name string, ok bool) {
		s := "PASS"
		if !ok {
			s = "FAIL"
		}
		fmt.Fprintf(&b, "  %-22s %s\n", name, s)
	}
	verdict("linearizable (lanes)", res.linear.Result == porcupine.Ok)
	fmt.Fprintf(&b, "    (porcupine, %d lanes, %v)\n", res.log.Lanes, checkTime.Round(time.Millisecond))
	if res.linear.Result == porcupine.Unknown {
		fmt.Fprintf(&b, "    (porcupine timed out on some lane)\n")
	}
	for _, c := range []string{"acknowledged-once", "no-fork", "one-open-turn", "fence", "webhooks", "converge", "projections-verify"} {
		verdict(c, !slices.ContainsFunc(res.anomalies, func(a chaos.Anomaly) bool { return a.Checker == c }))
	}
	fmt.Fprintf(&b, "  webhooks: %d events delivered, %d more than once (takeover window)\n", len(hook.counts()), dups)
	fmt.Fprintf(&b, "  projections verify: %d of %d nodes\n", verified, len(nodes))
	for i, k := range res.linear.Keys {
		if i == 3 {
			fmt.Fprintf(&b, "  … %d more lanes not linearizable\n", len(res.linear.Keys)-3)
			break
		}
		fmt.Fprintf(&b, "  not linearizable: %s\n", k)
		for _, o := range res.linear.Ops[k] {
			fmt.Fprintf(&b, "    %s\n", o)
		}
	}
	for i, a := range res.anomalies {
		if i == 10 {
			fmt.Fprintf(&b, "  … %d more anomalies\n", len(res.anomalies)-10)
			break
		}
		fmt.Fprintf(&b, "  anomaly %s\n", a)
	}
	if len(w.schedule) > 0 {
		fmt.Fprintf(&b, "  schedule:\n    %s\n", strings.Join(w.schedule, "\n    "))
	}
	res.summary = b.String()
	if !opt.expectBroken {
		if !res.ok() {
			t.Errorf("%s", res.summary)
		} else {
			t.Logf("%s", res.summary)
		}
		if counts[chaos.OK] == 0 {
			t.Errorf("no operation succeeded")
		}
	}
	return res
}

// waitDelivered waits until the receiver has every deliverable event up
// to the log's head.
func waitDelivered(ctx context.Context, store events.Store, hook *hookCounter) []chaos.Anomaly {
	head, err := store.Head(ctx)
	if err != nil {
		return []chaos.Anomaly{{Checker: "webhooks", What: err.Error()}}
	}
	want, err := deliverable(ctx, store, head)
	if err != nil {
		return []chaos.Anomaly{{Checker: "webhooks", What: err.Error()}}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := hook.counts()
		var missing []string
		for _, id := range want {
			if got[id] == 0 {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return []chaos.Anomaly{{Checker: "webhooks", What: fmt.Sprintf("%d of %d events never delivered (first %s)", len(missing), len(want), missing[0])}}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// converge waits until every node answers every lane of the log as the log
// has it, and reports the lanes some node still answers otherwise.
func converge(t *testing.T, nodes []*chaosNode, log []events.Envelope, bin string) []chaos.Anomaly {
	type laneEnd struct {
		version uint64
	}
	lanes := map[string]laneEnd{}
	for _, env := range log {
		if strings.HasPrefix(env.Stream, events.LaneStream("")) {
			lanes[strings.TrimPrefix(env.Stream, events.LaneStream(""))] = laneEnd{env.Version}
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		// A node whose run was adopted while it was paused or cut off
		// restarts itself once it notices (exit 75).
		restartExited(t, nodes, bin)
		var differ []string
		for key, want := range lanes {
			var first *entry
			for _, n := range nodes {
				var e entry
				status, err := n.current().request("GET", "/v1/sessions/"+url.PathEscape(key), nil, &e)
				if err != nil || status != http.StatusOK || e.Version < want.version {
					differ = append(differ, fmt.Sprintf("%s on %s (status %d, version %d of %d)", key, n.name, status, e.Version, want.version))
					continue
				}
				if first == nil {
					first = &e
				} else if e.SessionID != first.SessionID || !equalPtr(e.OpenTurnID, first.OpenTurnID) || e.Version != first.Version {
					differ = append(differ, fmt.Sprintf("%s: nodes answer %+v and %+v", key, *first, e))
				}
			}
		}
		if len(differ) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			slices.Sort(differ)
			return []chaos.Anomaly{{Checker: "converge", What: fmt.Sprintf("%d answers differ from the log after a minute, e.g. %s", len(differ), differ[0])}}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func equalPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
