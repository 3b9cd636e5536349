package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gatewayHelperEnv, when set to a hermes address, makes the test binary a
// gateway process (TestHelperGatewayProcess): it announces run
// $HERMES_TEST_RUN_ID, opens a turn of the run on one lane, prints
// "ready <session key>" and beats every 50 ms until it is killed.
const gatewayHelperEnv = "HERMES_TEST_GATEWAY_ADDR"

func TestHelperGatewayProcess(t *testing.T) {
	addr := os.Getenv(gatewayHelperEnv)
	if addr == "" {
		t.Skip("a helper process of the gateway-run tests")
	}
	run := os.Getenv("HERMES_TEST_RUN_ID")
	post := func(path string, body any, out any) {
		data, _ := json.Marshal(body)
		resp, err := http.Post("http://"+addr+path, "application/json", bytes.NewReader(data))
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			fmt.Println("error", path, resp.StatusCode, string(raw))
			os.Exit(1)
		}
		if out != nil {
			_ = json.Unmarshal(raw, out)
		}
	}
	post("/v1/gateway-runs", map[string]any{"gateway": "default", "run_id": run, "pid": os.Getpid(), "host": "test", "lease_seconds": 60}, nil)
	var res struct {
		Entry struct {
			SessionKey string `json:"session_key"`
		} `json:"entry"`
	}
	post("/v1/sessions/resolve", map[string]any{"source": map[string]string{"platform": "telegram", "chat_id": "4242", "chat_type": "dm"}}, &res)
	post("/v1/sessions/"+url.PathEscape(res.Entry.SessionKey)+"/turns/start",
		map[string]any{"turn_id": "turn-" + run, "gateway_run": map[string]string{"gateway": "default", "run_id": run}}, nil)
	fmt.Println("ready", res.Entry.SessionKey)
	for {
		time.Sleep(50 * time.Millisecond)
		resp, err := http.Post("http://"+addr+"/v1/gateway-runs/default/"+run+"/heartbeat", "application/json", nil)
		if err == nil { // hermes may be restarting: beat again
			resp.Body.Close()
		}
	}
}

// gatewayProcess is a running gateway helper process.
type gatewayProcess struct {
	cmd  *exec.Cmd
	key  string
	done chan struct{}
}

func startGateway(t *testing.T, addr, run string) *gatewayProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperGatewayProcess$")
	cmd.Env = append(os.Environ(), gatewayHelperEnv+"="+addr, "HERMES_TEST_RUN_ID="+run)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gatewayProcess{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(g.done) }()
	t.Cleanup(g.kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	if key, ok := strings.CutPrefix(strings.TrimSpace(line), "ready "); ok {
		g.key = key
		go io.Copy(io.Discard, out)
		return g
	}
	t.Fatalf("gateway process: %q, %v", line, err)
	return nil
}

// kill SIGKILLs the gateway process: it dies without a word.
func (g *gatewayProcess) kill() {
	g.cmd.Process.Signal(syscall.SIGKILL)
	<-g.done
}

type runRow struct {
	RunID      string    `json:"run_id"`
	State      string    `json:"state"`
	Cause      *string   `json:"cause"`
	Cut        []string  `json:"cut"`
	LeaseUntil time.Time `json:"lease_until"`
}

func gatewayRuns(s *server) []runRow {
	s.t.Helper()
	var out struct {
		Runs []runRow `json:"runs"`
	}
	s.must("GET", "/v1/gateway-runs?gateway=default", nil, &out)
	return out.Runs
}

// waitUntil polls cond (the lease duty runs on its own goroutine once the
// manual clock moved) for at most 30 s of real time.
func waitUntil(t *testing.T, s *server, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s\n%s", what, s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var gatewayEnv = []string{"HERMES_RECOVERY_RECENT_SECONDS=0", "HERMES_EXPIRY_INTERVAL_SECONDS=100000000"}

// TestGatewayProcessKilledMidTurnIsRecovered: a gateway process announces a
// run, opens a turn and is SIGKILLed while hermes keeps running; once its
// lease ran out by hermes' (manual) clock the run is lost and its turn is
// closed with a resume mark (restart_interrupted), counted once toward the
// stuck-loop escalation; events tail tells it.
func TestGatewayProcessKilledMidTurnIsRecovered(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home, gatewayEnv, "--clock=manual")
	g := startGateway(t, s.addr, "run-1")
	if e := laneEntry(s, g.key); e.OpenTurnID == nil || *e.OpenTurnID != "turn-run-1" {
		t.Fatalf("the gateway's turn is not open: %+v", e)
	}
	g.kill()

	s.must("POST", "/v1/clock", map[string]any{"advance": "59s"}, nil)
	s.must("POST", "/v1/clock", map[string]any{"advance": "2s"}, nil)
	waitUntil(t, s, "the dead run is lost", func() bool {
		runs := gatewayRuns(s)
		return len(runs) == 1 && runs[0].State == "lost"
	})
	runs := gatewayRuns(s)
	if *runs[0].Cause != "lease_expired" || !slices.Equal(runs[0].Cut, []string{g.key}) {
		t.Errorf("the lost run = %+v, want lease_expired cutting %s", runs[0], g.key)
	}
	waitUntil(t, s, "the turn is recovered", func() bool { return laneEntry(s, g.key).OpenTurnID == nil })
	e := laneEntry(s, g.key)
	if !e.ResumePending || e.ResumeReason == nil || *e.ResumeReason != "restart_interrupted" {
		t.Errorf("after recovery: pending %v %v, want restart_interrupted", e.ResumePending, e.ResumeReason)
	}
	stopDrained(t, s)
	if got := restartCounts(t, home); !strings.Contains(got, `"`+g.key+`": 1`) && !strings.Contains(got, `"`+g.key+`":1`) {
		t.Errorf(".restart_failure_counts = %q, want %s at 1", got, g.key)
	}
	tail, _ := hermes(t, 0, "events", "tail", "--home", home, g.key)
	if !strings.Contains(tail, "lane.turn_interrupted.v1") || !strings.Contains(tail, "restart_interrupted") ||
		!strings.Contains(tail, "gateway run run-1 lost (lease_expired): cut this lane's turn  {interrupted_restarts: 0 → 1}") {
		t.Errorf("events tail does not explain the recovery:\n%s", tail)
	}
}

// TestHermesRestartAloneLeavesTheGatewaysTurn: hermes is SIGKILLed while a
// live gateway process has a turn open; hermes' restart neither cuts that
// turn (it is the gateway's) nor marks the lane to resume, and the run,
// beating again, is never lost.
func TestHermesRestartAloneLeavesTheGatewaysTurn(t *testing.T) {
	home := t.TempDir()
	// recovery.recent_seconds at its default: the gateway's recently active
	// lane is not marked to resume by hermes' crash either (the gateway
	// applies that rule at its own unclean start).
	env := []string{"HERMES_EXPIRY_INTERVAL_SECONDS=100000000"}
	s := startServer(t, home, env, "--clock=manual")
	addr := s.addr
	g := startGateway(t, addr, "run-1")
	s.kill()

	s = startServerAt(t, home, addr, env, "--clock=manual")
	e := laneEntry(s, g.key)
	if e.OpenTurnID == nil || e.ResumePending {
		t.Fatalf("after hermes' restart the gateway's turn: open %v, pending %v; want open, not pending", e.OpenTurnID, e.ResumePending)
	}
	var clock struct {
		Now time.Time `json:"now"`
	}
	s.must("POST", "/v1/clock", map[string]any{"advance": "0s"}, &clock)
	now := clock.Now
	s.must("POST", "/v1/clock", map[string]any{"advance": "30s"}, nil)
	waitUntil(t, s, "a heartbeat renews the lease", func() bool {
		runs := gatewayRuns(s)
		return len(runs) == 1 && runs[0].LeaseUntil.After(now.Add(80*time.Second))
	})
	s.must("POST", "/v1/clock", map[string]any{"advance": "40s"}, nil)
	waitUntil(t, s, "a second heartbeat renews the lease", func() bool {
		runs := gatewayRuns(s)
		return len(runs) == 1 && runs[0].LeaseUntil.After(now.Add(120*time.Second))
	})
	if runs := gatewayRuns(s); runs[0].State != "running" {
		t.Errorf("the beating run = %+v, want running", runs[0])
	}
	if e := laneEntry(s, g.key); e.OpenTurnID == nil {
		t.Errorf("the gateway's turn was cut while it lives")
	}
}

// TestGatewayAndHermesDieTogether: both are SIGKILLed with the gateway's
// turn open; hermes' restart leaves the turn; the gateway's next run finds
// its last run open, records it lost and recovers the turn: one
// interrupted restart, not two.
func TestGatewayAndHermesDieTogether(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home, gatewayEnv, "--clock=manual")
	g := startGateway(t, s.addr, "run-1")
	g.kill()
	s.kill()

	s = startServer(t, home, gatewayEnv, "--clock=manual")
	if e := laneEntry(s, g.key); e.OpenTurnID == nil {
		t.Fatalf("hermes' restart cut the gateway's turn")
	}
	var started struct {
		Interrupted []string `json:"interrupted"`
		Previous    runRow   `json:"previous"`
	}
	if status := s.call("POST", "/v1/gateway-runs", map[string]any{"gateway": "default", "run_id": "run-2"}, &started); status != http.StatusCreated {
		t.Fatalf("POST /v1/gateway-runs = %d", status)
	}
	if !slices.Equal(started.Interrupted, []string{g.key}) || started.Previous.State != "lost" || *started.Previous.Cause != "restarted" {
		t.Errorf("the gateway's next run = %+v, want run-1 lost (restarted) and the turn recovered", started)
	}
	e := laneEntry(s, g.key)
	if e.OpenTurnID != nil || !e.ResumePending {
		t.Errorf("after the gateway's restart: open %v, pending %v; want closed and pending", e.OpenTurnID, e.ResumePending)
	}
	stopDrained(t, s)
	if got := restartCounts(t, home); !strings.Contains(got, ": 1") && !strings.Contains(got, ":1") {
		t.Errorf(".restart_failure_counts = %q, want %s at 1 (one crash counted once)", got, g.key)
	}
}

// startServerAt is startServer on a given address (the one a running
// gateway process knows).
func startServerAt(t *testing.T, home, addr string, env []string, args ...string) *server {
	t.Helper()
	s := &server{t: t, home: home, addr: addr, stderr: &syncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(binary, append([]string{"serve", "--home", home, "--addr", addr}, args...)...)
	s.cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := s.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			s.exit = ee.ExitCode()
		}
		close(s.done)
	}()
	t.Cleanup(s.kill)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-s.done:
			t.Fatalf("hermes serve exited (%d) before ready:\n%s", s.exit, s.stderr.String())
		default:
		}
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("hermes serve not ready after 60s:\n%s", s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
