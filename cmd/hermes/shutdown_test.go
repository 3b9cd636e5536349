package main

import (
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestShutdownWithinBound: SIGTERM with a turn that never completes and
// the default 180 s agent.restart_drain_timeout still exits 0 within
// agent.shutdown_timeout, the lane marked resume_pending /
// shutdown_timeout, and the log names the lane once (not once per poll).
func TestShutdownWithinBound(t *testing.T) {
	const bound = 2 * time.Second
	home := t.TempDir()
	s := startServer(t, home, []string{"HERMES_AGENT_SHUTDOWN_TIMEOUT=2"})
	key, sid := openTurn(s, "C-bound")
	before := len(s.stderr.String())

	began := time.Now()
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code = %d, want 0\n%s", code, s.stderr.String())
	}
	// The margin is for the process to be scheduled and reaped on a busy
	// machine; the stop itself is bounded by agent.shutdown_timeout.
	if took := time.Since(began); took > bound+5*time.Second {
		t.Fatalf("SIGTERM to exit took %v, want within agent.shutdown_timeout (%v) plus a margin\n%s", took, bound, s.stderr.String())
	}
	stopLog := s.stderr.String()[before:]
	var laneLines, drainLines []string
	for line := range strings.SplitSeq(stopLog, "\n") {
		if strings.Contains(line, "session_key="+key) {
			laneLines = append(laneLines, line)
		}
		if strings.Contains(line, "drain") {
			drainLines = append(drainLines, line)
		}
	}
	if len(laneLines) != 1 || !strings.Contains(laneLines[0], "interrupted") || !strings.Contains(laneLines[0], "shutdown_timeout") {
		t.Errorf("log lines naming session_key=%s = %q, want one: interrupted, shutdown_timeout\n%s", key, laneLines, stopLog)
	}
	// Started (listing the lanes), the lane's line, finished.
	if len(drainLines) != 3 {
		t.Errorf("drain log lines = %d, want 3 (start, the lane, end):\n%s", len(drainLines), stopLog)
	}

	s2 := startServer(t, home, nil)
	var e entry
	s2.must("GET", "/v1/sessions/"+url.PathEscape(key), nil, &e)
	if !e.ResumePending || e.ResumeReason == nil || *e.ResumeReason != "shutdown_timeout" || e.SessionID != sid || e.OpenTurnID != nil {
		t.Fatalf("lane after a bounded stop = %+v, want resume_pending shutdown_timeout on %s", e, sid)
	}
}

// TestSignalAtTheFirstAnswerStopsGracefully: given hermes serve starting
// after a crash (so it has recovery to do before it is ready), when SIGTERM
// or SIGUSR1 is sent as soon as its listener answers anything (/readyz may
// still say not ready), then it stops gracefully (exit 0, or the restart
// code) once ready, instead of dying by the signal's default action: the
// signals are caught before the listener opens, so before anyone can see
// the process, ready or not.
func TestSignalAtTheFirstAnswerStopsGracefully(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	for _, tc := range []struct {
		sig  syscall.Signal
		want int
	}{{syscall.SIGTERM, 0}, {syscall.SIGUSR1, exitRestart}} {
		home := t.TempDir()
		s := startServer(t, home, nil)
		s.stop(syscall.SIGKILL)

		s = launchServer(t, home, nil)
		for answered := false; !answered; {
			select {
			case <-s.done:
				t.Fatalf("hermes serve exited (%d) before it answered:\n%s", s.exit, s.stderr.String())
			default:
			}
			if resp, err := http.Get("http://" + s.addr + "/readyz"); err == nil {
				resp.Body.Close()
				answered = true
			} else {
				time.Sleep(time.Millisecond)
			}
		}
		if code := s.stop(tc.sig); code != tc.want {
			t.Errorf("%v at the first answer: exit code %d, want %d\n%s", tc.sig, code, tc.want, s.stderr.String())
		}
	}
}
