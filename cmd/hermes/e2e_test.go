package main

import (
	"flag"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestReadmeWalkthrough builds the real binary, starts hermes serve on a
// free loopback port with a temp home and the manual clock, walks the
// README's curl scenario over real HTTP, and checks `hermes events tail`.
func TestReadmeWalkthrough(t *testing.T) {
	home := t.TempDir()
	// The expiry watcher would finalize the idle lane during the 25 h jump;
	// it has its own tests, so it is kept out of this golden.
	s := startServer(t, home, []string{"HERMES_EXPIRY_INTERVAL_SECONDS=100000000"}, "--clock=manual")
	s.must("POST", "/v1/clock", map[string]any{"now": "2030-01-02T09:00:00Z"}, nil)

	source := map[string]any{"platform": "telegram", "chat_id": "12345", "chat_type": "dm", "user_id": "42", "user_name": "Alice"}
	var r resolved
	s.must("POST", "/v1/sessions/resolve", map[string]any{"source": source}, &r)
	if !r.Created || r.Entry.SessionKey != "agent:main:telegram:dm:12345" {
		t.Fatalf("first resolve = %+v", r)
	}
	key := "/v1/sessions/" + url.PathEscape(r.Entry.SessionKey)
	sid := r.Entry.SessionID

	var started struct {
		TurnID string `json:"turn_id"`
	}
	s.must("POST", key+"/turns/start", map[string]any{}, &started)
	s.must("POST", "/v1/transcripts/"+sid+"/messages", map[string]any{"role": "user", "content": "How do I fix the docker-compose networking?"}, nil)
	s.must("POST", "/v1/clock", map[string]any{"advance": "20s"}, nil)
	s.must("POST", "/v1/transcripts/"+sid+"/messages", map[string]any{"role": "assistant", "content": "Put both services on one user-defined bridge network."}, nil)
	var done entry
	s.must("POST", key+"/turns", map[string]any{"turn_id": started.TurnID, "input_tokens": 812, "output_tokens": 96, "estimated_cost_usd": 0.0042}, &done)
	if done.TotalTokens != 908 || done.OpenTurnID != nil {
		t.Fatalf("entry after the turn = %+v", done)
	}

	var found struct {
		Results []struct {
			SessionID string `json:"session_id"`
			Snippet   string `json:"snippet"`
		} `json:"results"`
	}
	s.must("GET", "/v1/search?q=docker-compose", nil, &found)
	if len(found.Results) != 1 || found.Results[0].SessionID != sid || !strings.Contains(found.Results[0].Snippet, ">>>docker-compose<<<") {
		t.Fatalf("search = %+v", found)
	}

	s.must("POST", "/v1/clock", map[string]any{"advance": "1m"}, nil)
	s.must("POST", key+"/suspend", nil, nil)
	s.must("POST", "/v1/clock", map[string]any{"advance": "1m"}, nil)
	var again resolved
	s.must("POST", "/v1/sessions/resolve", map[string]any{"source": source}, &again)
	if !again.Created || again.ResetReason == nil || *again.ResetReason != "suspended" || again.Entry.SessionID == sid {
		t.Fatalf("resolve after suspend = %+v", again)
	}

	// A day later the lane resets for idleness — and says so.
	s.must("POST", key+"/turns/start", map[string]any{}, nil)
	s.must("POST", key+"/turns", map[string]any{"input_tokens": 10, "output_tokens": 5}, nil)
	s.must("POST", "/v1/clock", map[string]any{"advance": "25h"}, nil)
	var idle resolved
	s.must("POST", "/v1/sessions/resolve", map[string]any{"source": source}, &idle)
	if idle.ResetReason == nil || *idle.ResetReason != "idle" {
		t.Fatalf("resolve after 25h = %+v", idle)
	}

	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM exit code = %d, want 0\n%s", code, s.stderr.String())
	}
	out, _ := hermes(t, 0, "events", "tail", "--home", home, "agent:main:telegram:dm:12345", "--transcripts")
	checkGolden(t, "events_tail_walkthrough.golden", normalizeIDs(out))

	// The CLI reads the same history with or without the server.
	list, _ := hermes(t, 0, "sessions", "list", "--home", home)
	if !strings.Contains(list, "agent:main:telegram:dm:12345") || !strings.Contains(list, "auto_reset(idle)") {
		t.Fatalf("sessions list =\n%s", list)
	}
	then, _ := hermes(t, 0, "sessions", "show", "--home", home, "agent:main:telegram:dm:12345", "--at-version", "4")
	if !strings.Contains(then, `"session_id": "`+sid+`"`) || !strings.Contains(then, `"total_tokens": 908`) {
		t.Fatalf("sessions show --at-version 4 =\n%s", then)
	}
	verify, _ := hermes(t, 0, "projections", "verify", "--home", home)
	if !strings.HasPrefix(verify, "ok:") {
		t.Fatalf("projections verify = %q", verify)
	}
	searchOut, _ := hermes(t, 0, "search", "--home", home, "bridge network")
	if !strings.Contains(searchOut, sid) {
		t.Fatalf("hermes search = %q", searchOut)
	}
	if _, err := os.Stat(filepath.Join(home, ".clean_shutdown")); err != nil {
		t.Fatalf("no .clean_shutdown after a clean stop: %v", err)
	}
}

var (
	sessionIDPattern = regexp.MustCompile(`\d{8}_\d{6}_[0-9a-f]{8}`)
	turnIDPattern    = regexp.MustCompile(`turn_[0-9a-f]{16}`)
)

// normalizeIDs replaces random session and turn ids by stable names in
// order of appearance, so a golden file can pin the rest.
func normalizeIDs(s string) string {
	for _, p := range []struct {
		re     *regexp.Regexp
		prefix string
	}{{sessionIDPattern, "SESSION"}, {turnIDPattern, "TURN"}} {
		seen := map[string]string{}
		s = p.re.ReplaceAllStringFunc(s, func(m string) string {
			if n, ok := seen[m]; ok {
				return n
			}
			n := p.prefix + "_" + string(rune('A'+len(seen)))
			seen[m] = n
			return n
		})
	}
	return s
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s mismatch:\n--- want\n%s\n--- got\n%s", name, want, got)
	}
}

func TestSecondServerOnOneHomeExits1(t *testing.T) {
	home := t.TempDir()
	startServer(t, home, nil)
	_, stderr := hermes(t, 1, "serve", "--home", home, "--addr", freeAddr(t))
	if !strings.Contains(stderr, "another hermes process holds this home") {
		t.Fatalf("second serve stderr = %q", stderr)
	}
}

func TestBadConfigExits2(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("session_reset:\n  mode: both\n  at_hour: 25\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr := hermes(t, 2, "serve", "--home", home, "--addr", freeAddr(t))
	if !strings.Contains(stderr, "session_reset.at_hour") || !strings.Contains(stderr, "config.yaml:3") {
		t.Fatalf("stderr = %q, want the key path and line", stderr)
	}
	_, stderr = hermes(t, 2, "serve", "--home", home, "--addr", "0.0.0.0:1")
	if !strings.Contains(stderr, "token") {
		t.Fatalf("non-loopback without token: stderr = %q", stderr)
	}
}

func TestNonLoopbackWithoutTokenRefused(t *testing.T) {
	home := t.TempDir()
	_, stderr := hermes(t, 2, "serve", "--home", home, "--addr", "0.0.0.0:18999")
	if !strings.Contains(stderr, "api.token") && !strings.Contains(stderr, "token") {
		t.Fatalf("stderr = %q", stderr)
	}
}

func TestVersionFlag(t *testing.T) {
	out, _ := hermes(t, 0, "--version")
	if !strings.Contains(out, "hermes version") {
		t.Fatalf("--version = %q", out)
	}
	_, stderr := hermes(t, 2, "serve", "--no-such-flag")
	if !strings.Contains(stderr, "unknown flag") {
		t.Fatalf("unknown flag stderr = %q", stderr)
	}
}

var _ = http.StatusOK
