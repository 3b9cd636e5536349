package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// TestPoisonLog: hermes starts and serves on a log an older build wrote
// with the events of issue [V] (testdata/poison/README.md): sums that
// overflow, costs that become infinite, invalid UTF-8, a lone surrogate and
// a NUL in a session key. Every read answers 200 with valid JSON in valid
// UTF-8, sessions.json is written, verify lists the clamped values and
// passes, and a restart works.
func TestPoisonLog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	home := t.TempDir()
	poison, err := os.ReadFile(filepath.Join("testdata", "poison", "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, "hermes"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "hermes", "events.db"), poison, 0o600); err != nil {
		t.Fatal(err)
	}

	s := startServer(t, home, nil)
	servesValidJSON(t, s)
	nulLaneListed(t, s)
	sessionsJSON := filepath.Join(home, "sessions", "sessions.json")
	data := waitForFile(t, s, sessionsJSON)
	var entries map[string]any
	if err := json.Unmarshal(data, &entries); err != nil || !utf8.Valid(data) {
		t.Fatalf("sessions.json is not valid JSON in UTF-8 (%v):\n%s", err, data)
	}
	if _, ok := entries["agent:main:telegram:dm:777"]; !ok {
		t.Errorf("sessions.json has no entry for the poisoned lane:\n%s", data)
	}
	if !strings.Contains(s.stderr.String(), `msg="clamped an event value" projection=sessions.v4 stream=lane-agent:main:telegram:dm:777 position=13 field=estimated_cost_usd rule=quarantined`) {
		t.Errorf("no log line for the quarantined cost of position 13:\n%s", s.stderr.String())
	}
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("hermes serve exited %d:\n%s", code, s.stderr.String())
	}

	out, _ := hermes(t, 0, "projections", "verify", "--home", home)
	for _, want := range []string{
		`clamped: position 7 "transcript-20261123_213415_6862bdb9" transcripts.v3 input_tokens saturated`,
		`clamped: position 10 "transcript-20261123_213415_6862bdb9" transcripts.v3 estimated_cost_usd quarantined`,
		`clamped: position 12 "lane-agent:main:telegram:dm:777" sessions.v4 output_tokens saturated`,
		`clamped: position 14 "lane-agent:main:telegram:dm:777" sessions.v4 estimated_cost_usd quarantined`,
		"11 event values were clamped or quarantined",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("projections verify output lacks %q:\n%s", want, out)
		}
	}

	s = startServer(t, home, nil)
	servesValidJSON(t, s)
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("hermes serve exited %d after a restart:\n%s", code, s.stderr.String())
	}
}

// servesValidJSON checks that the reads the poison used to break answer 200
// with valid JSON in valid UTF-8.
func servesValidJSON(t *testing.T, s *server) {
	t.Helper()
	for _, path := range []string{
		"/v1/sessions/agent:main:telegram:dm:777",
		"/v1/sessions",
		"/v1/transcripts/recent",
		"/v1/transcripts/20261123_213415_6862bdb9",
		"/v1/transcripts/20261123_213415_6862bdb9/messages",
		"/v1/export",
		"/v1/events",
		"/v1/events?from_position=3&limit=3",
	} {
		resp, err := http.Get("http://" + s.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d %s", path, resp.StatusCode, body)
			continue
		}
		if !utf8.Valid(body) {
			t.Errorf("GET %s: body is not valid UTF-8: %q", path, body)
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Errorf("GET %s: body is not JSON (%v): %q", path, err, body)
		}
		if bytes.Contains(bytes.ToLower(body), []byte(`\ud800`)) {
			t.Errorf("GET %s: body holds a lone surrogate escape: %s", path, body)
		}
	}
}

// nulLaneListed checks that the lane an older build created with a NUL in
// its key is still served, in the listing: the door now refuses such a key
// in a path (400), so the listing is how it is reached.
func nulLaneListed(t *testing.T, s *server) {
	t.Helper()
	resp, err := http.Get("http://" + s.addr + "/v1/sessions/agent:main:telegram:dm:nul%00x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET of the NUL key by path = %d, want 400 (refused at the door)", resp.StatusCode)
	}
	resp, err = http.Get("http://" + s.addr + "/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Sessions []struct {
			SessionKey string `json:"session_key"`
		} `json:"sessions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Sessions {
		if e.SessionKey == "agent:main:telegram:dm:nul\x00x" {
			return
		}
	}
	t.Errorf("GET /v1/sessions does not list the lane with a NUL in its key: %+v", list.Sessions)
}

// waitForFile waits for the exporter to write path.
func waitForFile(t *testing.T, s *server, path string) []byte {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			return data
		}
		select {
		case <-s.done:
			t.Fatalf("hermes serve exited (%d) before writing %s:\n%s", s.exit, path, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written after 30s:\n%s", path, s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
