package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"hermes/node"
)

// searchWords are the words of the seeded messages; every search for one of
// them must answer the same before, during and after a rebuild.
var searchWords = []string{"amber", "birch", "cedar", "dune", "ember", "fjord", "grove", "heath"}

// seedLanes writes lanes×messages messages over 8 connections and returns
// each lane's source and session id.
func seedLanes(t *testing.T, s *server, lanes, messages int) (sources []map[string]any, ids []string) {
	t.Helper()
	sources, ids = make([]map[string]any, lanes), make([]string, lanes)
	var wg sync.WaitGroup
	errs := make(chan error, lanes)
	sem := make(chan struct{}, 8)
	for i := range lanes {
		sources[i] = map[string]any{"platform": "telegram", "chat_id": fmt.Sprintf("live%d", i), "chat_type": "dm"}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var r resolved
			if status, err := s.request("POST", "/v1/sessions/resolve", map[string]any{"source": sources[i]}, &r); err != nil || status != 200 {
				errs <- fmt.Errorf("resolve lane %d = %d, %v", i, status, err)
				return
			}
			ids[i] = r.Entry.SessionID
			for j := range messages {
				text := fmt.Sprintf("%s and %s, note %d of lane %d", searchWords[(i+j)%len(searchWords)], searchWords[(3*i+j/2)%len(searchWords)], j, i)
				if status, err := s.request("POST", "/v1/transcripts/"+r.Entry.SessionID+"/messages", map[string]any{"role": "user", "content": text}, nil); err != nil || status != 200 {
					errs <- fmt.Errorf("append to lane %d = %d, %v", i, status, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return sources, ids
}

// inode is the inode number of path.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// TestRebuildWhileServingUnderLoad runs `hermes projections rebuild` (a
// real process) against a real hermes serve while 16 clients resolve their
// lane, search known words, and write and find their own messages: no
// request fails, every answer is the one expected, the read models were
// swapped (new files in place), and they match a rebuild afterwards.
func TestRebuildWhileServingUnderLoad(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home, nil, "--clock", "manual")
	const clients = 16
	sources, ids := seedLanes(t, s, 64, 40)
	// Each client writes to a session of its own, apart from the seeded
	// ones, so that the searches of the seeded words (their context of
	// neighbouring messages included) answer the same throughout.
	probeIDs := make([]string, clients)
	for c := range clients {
		var r resolved
		s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": fmt.Sprintf("probe%d", c), "chat_type": "dm"}}, &r)
		probeIDs[c] = r.Entry.SessionID
	}
	baseline := map[string]string{}
	for _, w := range searchWords {
		var raw json.RawMessage
		s.must("GET", "/v1/search?q="+w, nil, &raw)
		if !bytes.Contains(raw, []byte(`"session_id"`)) {
			t.Fatalf("search %q before the rebuild found nothing: %s", w, raw)
		}
		baseline[w] = string(raw)
	}
	var before struct {
		Run int `json:"run"`
	}
	s.must("GET", "/v1/projections/rebuild", nil, &before)
	lanesIno, stateIno := inode(t, filepath.Join(home, "hermes", "lanes.db")), inode(t, filepath.Join(home, "state.db"))

	// phase: 0 before the CLI runs, 1 while it runs, 2 after it exited.
	var phase atomic.Int32
	var requests [3]atomic.Int64
	var failures atomic.Int64
	var failMu sync.Mutex
	var failed []string
	fail := func(format string, args ...any) {
		failures.Add(1)
		failMu.Lock()
		defer failMu.Unlock()
		if len(failed) < 20 {
			failed = append(failed, fmt.Sprintf(format, args...))
		}
	}
	var latMu sync.Mutex
	var latencies [3][]time.Duration
	timed := func(p int32, method, path string, body, out any) (int, error) {
		start := time.Now()
		status, err := s.request(method, path, body, out)
		latMu.Lock()
		latencies[p] = append(latencies[p], time.Since(start))
		latMu.Unlock()
		return status, err
	}
	stop := make(chan struct{})
	// afterRounds counts, per client, the rounds begun once the CLI exited.
	var afterRounds [clients]atomic.Int32
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				p := phase.Load()
				if p == 2 {
					afterRounds[c].Add(1)
				}
				var r resolved
				status, err := timed(p, "POST", "/v1/sessions/resolve", map[string]any{"source": sources[c]}, &r)
				requests[p].Add(1)
				if err != nil || status != 200 || r.Entry.SessionID != ids[c] {
					fail("client %d: resolve = %d %v, session %q, want %q", c, status, err, r.Entry.SessionID, ids[c])
				}
				w := searchWords[(c+k)%len(searchWords)]
				var raw json.RawMessage
				status, err = timed(p, "GET", "/v1/search?q="+w, nil, &raw)
				requests[p].Add(1)
				if err != nil || status != 200 || string(raw) != baseline[w] {
					fail("client %d: search %q = %d %v:\n%.300s\nwant\n%.300s", c, w, status, err, raw, baseline[w])
				}
				// A write, then a read of it (read your writes across the swap).
				probe := fmt.Sprintf("probe%dx%d", c, k)
				status, err = timed(p, "POST", "/v1/transcripts/"+probeIDs[c]+"/messages", map[string]any{"role": "user", "content": probe}, nil)
				requests[p].Add(1)
				if err != nil || status != 200 {
					fail("client %d: append = %d %v", c, status, err)
					continue
				}
				var found struct {
					Results []struct {
						SessionID string `json:"session_id"`
					} `json:"results"`
				}
				status, err = timed(p, "GET", "/v1/search?q="+url.QueryEscape(probe), nil, &found)
				requests[p].Add(1)
				if err != nil || status != 200 || len(found.Results) != 1 || found.Results[0].SessionID != probeIDs[c] {
					fail("client %d: search of its own write %q = %d %v %+v", c, probe, status, err, found)
				}
			}
		})
	}

	phase.Store(1)
	cli := exec.Command(binary, "projections", "rebuild", "--home", home)
	cli.Env = append(os.Environ(), "NO_COLOR=1")
	var cliOut bytes.Buffer
	cli.Stdout, cli.Stderr = &cliOut, &cliOut
	cliErr := cli.Run()
	phase.Store(2)
	// Every client goes through at least two more rounds on the new files.
	deadline := time.Now().Add(60 * time.Second)
	for c := 0; c < clients; {
		if afterRounds[c].Load() >= 2 {
			c++
			continue
		}
		if time.Now().After(deadline) {
			t.Errorf("client %d made no rounds after the rebuild within 60s", c)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("requests before/during/after the rebuild: %d/%d/%d; CLI output:\n%s", requests[0].Load(), requests[1].Load(), requests[2].Load(), cliOut.String())
	for p, name := range []string{"during", "after"} {
		if d := latencies[p+1]; len(d) > 0 {
			slices.Sort(d)
			t.Logf("request latency %s the rebuild: p50 %s p99 %s max %s (%d requests)", name, d[len(d)/2], d[len(d)*99/100], d[len(d)-1], len(d))
		}
	}
	for _, line := range strings.Split(s.stderr.String(), "\n") {
		if strings.Contains(line, "rebuild") {
			t.Log(line)
		}
	}
	if cliErr != nil {
		t.Fatalf("hermes projections rebuild: %v\n%s\nserver:\n%s", cliErr, cliOut.String(), s.stderr.String())
	}
	if !strings.Contains(cliOut.String(), "rebuilt the read models live") {
		t.Errorf("the CLI did not rebuild live:\n%s", cliOut.String())
	}
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d requests failed or answered wrong during the rebuild, first ones:\n%s", n, strings.Join(failed, "\n"))
	}
	var after struct {
		Run   int    `json:"run"`
		Phase string `json:"phase"`
		Total uint64 `json:"total"`
	}
	s.must("GET", "/v1/projections/rebuild", nil, &after)
	if after.Run != before.Run+1 || after.Phase != "done" {
		t.Errorf("rebuild status = %+v, want run %d done", after, before.Run+1)
	}
	resp, err := http.Get("http://" + s.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"hermes_rebuild_runs 1\n", "hermes_rebuild_running 0\n", fmt.Sprintf("hermes_rebuild_target_position %d\n", after.Total)} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("/metrics after the rebuild lacks %q", want)
		}
	}
	if got := inode(t, filepath.Join(home, "hermes", "lanes.db")); got == lanesIno {
		t.Error("lanes.db is the same file after the rebuild: nothing was swapped")
	}
	if got := inode(t, filepath.Join(home, "state.db")); got == stateIno {
		t.Error("state.db is the same file after the rebuild: nothing was swapped")
	}
	if left, _ := filepath.Glob(filepath.Join(home, "hermes", node.RebuildScratchPrefix+"*")); len(left) > 0 {
		t.Errorf("scratch files left after the rebuild: %v", left)
	}
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("stop = %d\n%s", code, s.stderr.String())
	}
	out, _ := hermes(t, 0, "projections", "verify", "--home", home)
	if !strings.Contains(out, "ok: the read models match a rebuild") {
		t.Errorf("projections verify after the live rebuild:\n%s", out)
	}
}

// TestRebuildOffline: with hermes serve stopped, `hermes projections
// rebuild` rebuilds in the process itself, replaces both files and leaves no
// scratch directory; the read models match a rebuild after.
func TestRebuildOffline(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home, nil, "--clock", "manual")
	seedLanes(t, s, 4, 5)
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("stop = %d\n%s", code, s.stderr.String())
	}
	stateIno := inode(t, filepath.Join(home, "state.db"))
	_, stderr := hermes(t, 0, "projections", "rebuild", "--home", home)
	if !strings.Contains(stderr, "rebuilt the read models from") || strings.Contains(stderr, "live") {
		t.Errorf("offline rebuild said:\n%s", stderr)
	}
	if inode(t, filepath.Join(home, "state.db")) == stateIno {
		t.Error("state.db is the same file after the rebuild")
	}
	if left, _ := filepath.Glob(filepath.Join(home, "hermes", node.RebuildScratchPrefix+"*")); len(left) > 0 {
		t.Errorf("scratch files left after the rebuild: %v", left)
	}
	out, _ := hermes(t, 0, "projections", "verify", "--home", home)
	if !strings.Contains(out, "ok: the read models match a rebuild") {
		t.Errorf("projections verify after the offline rebuild:\n%s", out)
	}
}

// TestLiveRebuildUsesTheAPIToken: the CLI sends the configured token to a
// server that requires one, and says why it was refused without it.
func TestLiveRebuildUsesTheAPIToken(t *testing.T) {
	home := t.TempDir()
	const token = "a-long-enough-token-for-the-rebuild-test-0123456789"
	startServer(t, home, []string{"HERMES_API_TOKEN=" + token})
	run := func(env ...string) (string, error) {
		cmd := exec.Command(binary, "projections", "rebuild", "--home", home)
		cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("HERMES_API_TOKEN=wrong-" + token); err == nil || !strings.Contains(out, "401 unauthorized") {
		t.Errorf("rebuild with a wrong token = %v:\n%s\nwant a refusal naming 401", err, out)
	}
	if out, err := run("HERMES_API_TOKEN=" + token); err != nil || !strings.Contains(out, "rebuilt the read models live") {
		t.Errorf("rebuild with the token = %v:\n%s", err, out)
	}
}
