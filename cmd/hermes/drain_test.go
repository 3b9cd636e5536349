package main

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// waitDraining waits until /readyz reports the drain and the drain has
// logged the open turns it found. /readyz says "draining" as soon as new
// turns are refused, a moment before the drain looks for the open ones: a
// turn completed in between is never open to the drain, so a test that
// completes one waits for the look.
func (s *server) waitDraining() {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var body map[string]string
		status, err := s.request("GET", "/readyz", nil, &body)
		if err == nil && status == http.StatusServiceUnavailable && body["status"] == "draining" &&
			strings.Contains(s.stderr.String(), `msg="draining: no new turns`) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatalf("hermes never reported draining:\n%s", s.stderr.String())
}

func openTurn(s *server, chat string) (key string, sessionID string) {
	var r resolved
	s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "slack", "chat_id": chat, "chat_type": "channel", "user_id": "U1"}}, &r)
	s.must("POST", "/v1/sessions/"+url.PathEscape(r.Entry.SessionKey)+"/turns/start", map[string]any{}, nil)
	return r.Entry.SessionKey, r.Entry.SessionID
}

func TestGracefulStopWithAHungTurn(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home, []string{"HERMES_AGENT_RESTART_DRAIN_TIMEOUT=1"})
	key, sid := openTurn(s, "C1")
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code = %d, want 0\n%s", code, s.stderr.String())
	}
	if exists(filepath.Join(home, ".clean_shutdown")) {
		t.Fatal(".clean_shutdown written although the drain timed out")
	}
	s2 := startServer(t, home, nil)
	var e entry
	s2.must("GET", "/v1/sessions/"+url.PathEscape(key), nil, &e)
	if !e.ResumePending || e.ResumeReason == nil || *e.ResumeReason != "shutdown_timeout" || e.SessionID != sid || e.OpenTurnID != nil {
		t.Fatalf("lane after a timed-out drain = %+v, want resume_pending shutdown_timeout on %s", e, sid)
	}
	var resumable struct {
		Sessions []entry `json:"sessions"`
	}
	s2.must("GET", "/v1/recovery/resumable", nil, &resumable)
	if len(resumable.Sessions) != 1 || resumable.Sessions[0].SessionKey != key {
		t.Fatalf("resumable = %+v, want only %s", resumable.Sessions, key)
	}
	// The resumed turn completes: the mark is cleared.
	s2.must("POST", "/v1/sessions/"+url.PathEscape(key)+"/turns/start", map[string]any{}, nil)
	s2.must("POST", "/v1/sessions/"+url.PathEscape(key)+"/turns", map[string]any{"output_tokens": 1}, &e)
	if e.ResumePending {
		t.Fatalf("resume_pending survived a successful turn: %+v", e)
	}
}

func TestGracefulStopDrainsOpenTurns(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home, []string{"HERMES_AGENT_RESTART_DRAIN_TIMEOUT=30"})
	key, _ := openTurn(s, "C2")
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.waitDraining()
	var errBody struct {
		Error struct{ Code string } `json:"error"`
	}
	other := "/v1/sessions/" + url.PathEscape("agent:main:slack:channel:C9:U1")
	s.call("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "slack", "chat_id": "C9", "chat_type": "channel", "user_id": "U1"}}, nil)
	if status := s.call("POST", other+"/turns/start", map[string]any{}, &errBody); status != http.StatusServiceUnavailable || errBody.Error.Code != "unavailable" {
		t.Fatalf("turn start while draining = %d %+v, want 503 unavailable", status, errBody)
	}
	s.must("POST", "/v1/sessions/"+url.PathEscape(key)+"/turns", map[string]any{"output_tokens": 5}, nil)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("drain did not finish after the turn completed:\n%s", s.stderr.String())
	}
	if s.exit != 0 {
		t.Fatalf("exit code = %d, want 0", s.exit)
	}
	if !exists(filepath.Join(home, ".clean_shutdown")) {
		t.Fatal("no .clean_shutdown after a completed drain")
	}
	if n := strings.Count(s.stderr.String(), "session_key="+key); n != 1 || !strings.Contains(s.stderr.String(), `msg="drain: turn completed" session_key=`+key) {
		t.Fatalf("the log names session_key=%s %d times, want once: turn completed\n%s", key, n, s.stderr.String())
	}
	s2 := startServer(t, home, nil)
	if exists(filepath.Join(home, ".clean_shutdown")) {
		t.Fatal(".clean_shutdown not consumed at start")
	}
	var list struct {
		Sessions []entry `json:"sessions"`
	}
	s2.must("GET", "/v1/sessions", nil, &list)
	for _, e := range list.Sessions {
		if e.ResumePending {
			t.Fatalf("a clean stop marked %s resume_pending", e.SessionKey)
		}
	}
	if !strings.Contains(s2.stderr.String(), "skipping session recovery") {
		t.Fatalf("the start after a clean stop did not honour .clean_shutdown:\n%s", s2.stderr.String())
	}
}

func TestRestartExits75(t *testing.T) {
	for _, how := range []string{"SIGUSR1", "POST /v1/admin/restart"} {
		t.Run(how, func(t *testing.T) {
			home := t.TempDir()
			s := startServer(t, home, []string{"HERMES_AGENT_RESTART_DRAIN_TIMEOUT=0"})
			key, sid := openTurn(s, "C3")
			var code int
			if how == "SIGUSR1" {
				code = s.stop(syscall.SIGUSR1)
			} else {
				var body map[string]string
				if status := s.call("POST", "/v1/admin/restart", nil, &body); status != http.StatusAccepted {
					t.Fatalf("POST /v1/admin/restart = %d", status)
				}
				<-s.done
				code = s.exit
			}
			if code != 75 {
				t.Fatalf("exit code = %d, want 75\n%s", code, s.stderr.String())
			}
			s2 := startServer(t, home, nil)
			var e entry
			s2.must("GET", "/v1/sessions/"+url.PathEscape(key), nil, &e)
			if !e.ResumePending || e.ResumeReason == nil || *e.ResumeReason != "restart_timeout" || e.SessionID != sid {
				t.Fatalf("lane after a restart = %+v, want resume_pending restart_timeout", e)
			}
		})
	}
}
