package main

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// upstreamHermes is hermes-agent at 5e01a5db beside the repository
// (../shared/upstream), the Hermes whose homes the import reads. Outside CI
// a checkout without it skips the test; in CI its absence fails.
func upstreamHermes(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "upstream", "hermes-agent-5e01a5db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gateway", "session.py")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Hermes' source is not at %s: CI runs with ../shared beside the repository", dir)
		}
		t.Skipf("Hermes' source is not at %s (../shared beside the repository): skipped", dir)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	return dir
}

// realHermesLane is one lane for testdata/realhermes/make_home.py.
type realHermesLane struct {
	Source          map[string]string `json:"source"`
	Messages        [][2]string       `json:"messages,omitempty"`
	RestartFailures int               `json:"restart_failures,omitempty"`
}

// writeRealHermesHome writes a Hermes home at dir with Hermes' own
// SessionStore and SessionDB and returns each lane's session key.
func writeRealHermesHome(t *testing.T, dir string, lanes []realHermesLane) []string {
	t.Helper()
	spec, err := json.Marshal(lanes)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", filepath.Join("testdata", "realhermes", "make_home.py"), upstreamHermes(t), dir, string(spec))
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("make_home.py: %v\n%s", err, stderr)
	}
	var made struct {
		Keys []string `json:"keys"`
	}
	if err := json.Unmarshal(out, &made); err != nil {
		t.Fatalf("make_home.py printed %q: %v", out, err)
	}
	return made.Keys
}

// TestImportCarriesRealHermesRestartCounts: a home written by Hermes with
// .restart_failure_counts {A: 2, B: 1}. The import carries both counts
// (the summary and events tail say so), hermes serve exports them, and
// the next stop that cuts A's turn is A's third consecutive one: the start
// after it suspends A as a stuck loop, while B, which that stop did not cut,
// loses its count, as in Hermes.
func TestImportCarriesRealHermesRestartCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	src := filepath.Join(t.TempDir(), "hermes-home")
	keys := writeRealHermesHome(t, src, []realHermesLane{
		{Source: map[string]string{"platform": "telegram", "chat_id": "-1002285219667", "chat_type": "group", "thread_id": "17585", "user_id": "7"},
			Messages: [][2]string{{"user", "summarise the thread"}}, RestartFailures: 2},
		{Source: map[string]string{"platform": "discord", "chat_id": "d1", "chat_type": "dm", "user_id": "9"},
			Messages: [][2]string{{"user", "hello"}}, RestartFailures: 1},
		{Source: map[string]string{"platform": "slack", "chat_id": "C1", "chat_type": "channel", "user_id": "U1"}},
	})
	a, b := keys[0], keys[1]
	if a != "agent:main:telegram:group:-1002285219667:17585" {
		t.Fatalf("Hermes keyed the forum topic %q", a)
	}
	home := t.TempDir()
	out, _ := hermes(t, 0, "import", src, "--home", home)
	if !strings.Contains(out, "restart failure counts: 2 lanes") {
		t.Fatalf("the import summary does not carry both counts:\n%s", out)
	}
	if tail, _ := hermes(t, 0, "events", "tail", "--home", home, a); !strings.Contains(tail, "lane.imported.v1  imported from Hermes") || !strings.Contains(tail, "2 interrupted restarts") {
		t.Fatalf("events tail of %s does not show the imported count:\n%s", a, tail)
	}

	s := startServer(t, home, drainNow)
	if got, want := restartCounts(t, home), `{"`+b+`":1,"`+a+`":2}`; got != want {
		t.Fatalf(".restart_failure_counts after the first start = %q, want %q", got, want)
	}
	if e := laneEntry(s, a); e.Suspended {
		t.Fatalf("lane %s suspended at a count of 2", a)
	}
	s.must("POST", "/v1/sessions/"+url.PathEscape(a)+"/turns/start", map[string]any{}, nil)
	stopDrained(t, s) // cuts A's turn: its third consecutive interrupted restart

	s = startServer(t, home, drainNow)
	e := laneEntry(s, a)
	if !e.Suspended {
		t.Fatalf("lane %s not suspended after three consecutive interrupted restarts (two in Hermes, one in hermes)\n%s", a, s.stderr.String())
	}
	if e := laneEntry(s, b); e.Suspended {
		t.Fatalf("lane %s suspended", b)
	}
	if got := restartCounts(t, home); got != "" {
		t.Fatalf(".restart_failure_counts = %q, want none (A's went with its suspension, B's with the stop that did not cut it)", got)
	}
	stopDrained(t, s)
	tail, _ := hermes(t, 0, "events", "tail", "--home", home, a)
	if !strings.Contains(tail, "{interrupted_restarts: 2 → 3}") || !strings.Contains(tail, "suspended: stuck_loop") {
		t.Fatalf("events tail of %s does not explain the suspension from the imported count:\n%s", a, tail)
	}
}
