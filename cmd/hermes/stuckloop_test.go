package main

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// drainNow: a drain that cuts every open turn at once (no waiting on a clock).
var drainNow = []string{"HERMES_AGENT_RESTART_DRAIN_TIMEOUT=0", "HERMES_RECOVERY_RECENT_SECONDS=0"}

func laneEntry(s *server, key string) entry {
	s.t.Helper()
	var e entry
	s.must("GET", "/v1/sessions/"+url.PathEscape(key), nil, &e)
	return e
}

func restartCounts(t *testing.T, home string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(home, ".restart_failure_counts"))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func stopDrained(t *testing.T, s *server) {
	t.Helper()
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code = %d, want 0\n%s", code, s.stderr.String())
	}
}

// TestStuckLoopCountsConsecutiveDrainsOnly: lane A's turn is cut at drains
// 1, 3 and 4 (quiet at 2), lane B's at drains 1, 2 and 3. Only B was active
// across three consecutive restarts: it is suspended at the start after
// drain 3; A never is.
func TestStuckLoopCountsConsecutiveDrainsOnly(t *testing.T) {
	home := t.TempDir()
	cutAt := map[string][]int{"A": {1, 3, 4}, "B": {1, 2, 3}}
	keys := map[string]string{}
	for drain := 1; drain <= 5; drain++ {
		s := startServer(t, home, drainNow)
		for _, chat := range []string{"A", "B"} {
			key, ok := keys[chat]
			if !ok {
				continue
			}
			wantSuspended := chat == "B" && drain >= 4
			if e := laneEntry(s, key); e.Suspended != wantSuspended {
				t.Fatalf("start after drain %d: lane %s suspended = %t, want %t\n%s", drain-1, chat, e.Suspended, wantSuspended, s.stderr.String())
			}
		}
		if drain == 5 {
			// B's count went with its suspension; A was cut at the last two drains.
			if got, want := restartCounts(t, home), `{"agent:main:slack:channel:A:U1":2}`; got != want {
				t.Fatalf(".restart_failure_counts = %q, want %q", got, want)
			}
			stopDrained(t, s)
			break
		}
		for _, chat := range []string{"A", "B"} {
			if slices.Contains(cutAt[chat], drain) {
				keys[chat], _ = openTurn(s, chat)
			}
		}
		stopDrained(t, s)
	}
	// The completed drain cut no lane: no count is left.
	if got := restartCounts(t, home); got != "" {
		t.Fatalf(".restart_failure_counts after a completed drain = %q, want no file", got)
	}
	// The log explains both: the stops that counted are shown with the lane.
	tailB, _ := hermes(t, 0, "events", "tail", "--home", home, keys["B"])
	if n := strings.Count(tailB, "drain timed out: cut this lane's turn"); n != 3 || !strings.Contains(tailB, "{interrupted_restarts: 2 → 3}") || !strings.Contains(tailB, "suspended: stuck_loop") {
		t.Fatalf("events tail of B does not show the three consecutive cuts and the suspension:\n%s", tailB)
	}
	tailA, _ := hermes(t, 0, "events", "tail", "--home", home, keys["A"])
	if !strings.Contains(tailA, "drain timed out: did not cut this lane  {interrupted_restarts: 1 → 0}") || strings.Contains(tailA, "suspended") {
		t.Fatalf("events tail of A does not show the quiet drain that dropped its count:\n%s", tailA)
	}
}

// TestStuckLoopHermesTwoLaneSequence is Hermes' test_stuck_loop sequence:
// lanes a and b are cut by a drain, then only a by the next one; Hermes'
// counts are {a: 2} (b was not active at the second shutdown).
func TestStuckLoopHermesTwoLaneSequence(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home, drainNow)
	a, _ := openTurn(s, "a")
	b, _ := openTurn(s, "b")
	stopDrained(t, s)
	if got, want := restartCounts(t, home), `{"agent:main:slack:channel:a:U1":1,"agent:main:slack:channel:b:U1":1}`; got != want {
		t.Fatalf(".restart_failure_counts after the first drain = %q, want %q", got, want)
	}
	s = startServer(t, home, drainNow)
	if again, _ := openTurn(s, "a"); again != a {
		t.Fatalf("lane a came back as %s, want %s", again, a)
	}
	stopDrained(t, s)
	if got, want := restartCounts(t, home), `{"agent:main:slack:channel:a:U1":2}`; got != want {
		t.Fatalf(".restart_failure_counts after the second drain = %q, want %q", got, want)
	}

	// Any reason is stored; only the restart reasons are auto-resumed.
	s = startServer(t, home, drainNow)
	c := "agent:main:slack:channel:c:U1"
	s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "slack", "chat_id": "c", "chat_type": "channel", "user_id": "U1"}}, nil)
	var mark struct {
		Marked bool  `json:"marked"`
		Entry  entry `json:"entry"`
	}
	s.must("POST", "/v1/sessions/"+url.PathEscape(c)+"/resume-pending", map[string]any{"reason": "manual_resume_request"}, &mark)
	if !mark.Marked || mark.Entry.ResumeReason == nil || *mark.Entry.ResumeReason != "manual_resume_request" {
		t.Fatalf("resume-pending manual_resume_request = %+v, want marked with that reason", mark)
	}
	var resumable struct {
		Sessions []entry `json:"sessions"`
	}
	s.must("GET", "/v1/recovery/resumable", nil, &resumable)
	var got []string
	for _, e := range resumable.Sessions {
		got = append(got, e.SessionKey)
	}
	slices.Sort(got)
	if want := []string{a, b}; !slices.Equal(got, want) {
		t.Fatalf("resumable = %v, want %v (not the manually marked %s)", got, want, c)
	}
	stopDrained(t, s)
}
