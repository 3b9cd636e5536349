package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHealthAndReadiness(t *testing.T) {
	h := newHarness(t, notReady())
	status := func(path string) (int, string) {
		t.Helper()
		var body struct {
			Status string `json:"status"`
		}
		r := h.do("GET", path, nil)
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatalf("GET %s: decode %s: %v", path, r.body, err)
		}
		return r.status, body.Status
	}
	steps := []struct {
		name       string
		do         func()
		path       string
		wantStatus int
		wantBody   string
	}{
		{"healthz while starting", func() {}, "/healthz", 200, "ok"},
		{"readyz while starting", func() {}, "/readyz", 503, "starting"},
		{"readyz when ready", func() { h.server.SetReady(true) }, "/readyz", 200, "ready"},
		{"readyz while draining", func() { h.server.SetDraining(true) }, "/readyz", 503, "draining"},
		{"healthz while draining", func() {}, "/healthz", 200, "ok"},
		{"readyz after the drain is called off", func() { h.server.SetDraining(false) }, "/readyz", 200, "ready"},
	}
	for _, s := range steps {
		s.do()
		if code, body := status(s.path); code != s.wantStatus || body != s.wantBody {
			t.Errorf("%s: GET %s = %d %q, want %d %q", s.name, s.path, code, body, s.wantStatus, s.wantBody)
		}
	}
}

// TestTokenLeavesOnlyTheProbesOpen: with api.token set, /healthz and
// /readyz answer without it (a probe has none); /metrics and /openapi.json
// with it (TestBadInput has their 401s), as every /v1 route. Every answer,
// JSON, text and errors alike, says X-Content-Type-Options: nosniff.
func TestTokenLeavesOnlyTheProbesOpen(t *testing.T) {
	h := newHarness(t, withToken("tok"))
	for _, rq := range []request{
		{method: "GET", path: "/healthz", noAuth: true},
		{method: "GET", path: "/readyz", noAuth: true},
		{method: "GET", path: "/metrics"},
		{method: "GET", path: "/openapi.json"},
		{method: "GET", path: "/v1/transcripts/recent"},
	} {
		r := h.send(rq)
		if r.status != http.StatusOK {
			t.Errorf("GET %s (token sent: %t) = %d %s, want 200", rq.path, !rq.noAuth, r.status, r.body)
		}
		if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options = %q, want nosniff", rq.path, got)
		}
	}
	for _, rq := range []request{
		{method: "GET", path: "/v1/transcripts/recent", noAuth: true},
		{method: "GET", path: "/v1/no-such-route"},
		{method: "POST", path: "/v1/sessions/resolve", body: `{"source":{}}`},
	} {
		r := h.send(rq)
		if r.status/100 != 4 || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s = %d, X-Content-Type-Options %q, want a 4xx with nosniff", rq.method, rq.path, r.status, r.header.Get("X-Content-Type-Options"))
		}
	}
}

func TestMetrics(t *testing.T) {
	h := newHarness(t)
	key := h.resolve(dm("1")).Entry.SessionKey
	h.resolve(dm("2"))
	h.call("GET", lane(key, ""), nil, http.StatusOK, nil)
	r := h.do("GET", "/metrics", nil)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics = %d %q, want 200 text/plain", r.status, r.header.Get("Content-Type"))
	}
	text := string(r.body)
	for _, want := range []string{
		`hermes_appends_total{outcome="ok"} 2`,
		"hermes_append_duration_seconds_bucket",
		"hermes_append_duration_seconds_count 2",
		"hermes_projection_lag_events 0",
		"hermes_lanes 2",
		`hermes_http_requests_total{code="200",method="POST",route="/v1/sessions/resolve"} 2`,
		`hermes_http_requests_total{code="200",method="GET",route="/v1/sessions/{key}"} 1`,
		"hermes_http_request_duration_seconds_bucket",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("GET /metrics has no %q:\n%s", want, text)
		}
	}
}

func TestClock(t *testing.T) {
	h := newHarness(t)
	type answer struct {
		Now time.Time `json:"now"`
	}
	later := start.Add(3 * time.Hour)
	tests := []struct {
		name       string
		body       any
		wantStatus int
		wantNow    time.Time
	}{
		{"now", map[string]string{"now": later.Format(time.RFC3339Nano)}, 200, later},
		{"now, same instant", map[string]string{"now": later.Format(time.RFC3339Nano)}, 200, later},
		{"advance", map[string]string{"advance": "90s"}, 200, later.Add(90 * time.Second)},
		{"advance zero", map[string]string{"advance": "0s"}, 200, later.Add(90 * time.Second)},
		{"now in another zone", map[string]string{"now": later.Add(time.Hour).In(time.FixedZone("CET", 3600)).Format(time.RFC3339)}, 200, later.Add(time.Hour)},
		{"backwards", map[string]string{"now": start.Format(time.RFC3339)}, 400, later.Add(time.Hour)},
		{"negative advance", map[string]string{"advance": "-1h"}, 400, later.Add(time.Hour)},
	}
	for _, tc := range tests {
		var got answer
		r := h.do("POST", "/v1/clock", tc.body)
		if r.status != tc.wantStatus {
			t.Errorf("%s: POST /v1/clock %v = %d %s, want %d", tc.name, tc.body, r.status, r.body, tc.wantStatus)
		}
		if r.status == 200 {
			h.call("POST", "/v1/clock", map[string]string{"advance": "0s"}, 200, &got)
			if !got.Now.Equal(tc.wantNow) || got.Now.Location() != time.UTC {
				t.Errorf("%s: clock = %v, want %v in UTC", tc.name, got.Now, tc.wantNow)
			}
		}
		if now := h.clock.Now(); !now.Equal(tc.wantNow) {
			t.Errorf("%s: clock.Now() = %v, want %v", tc.name, now, tc.wantNow)
		}
	}
	// The handler uses the clock: a lane resolved now is stamped with it.
	e := h.resolve(dm("1")).Entry
	if !e.CreatedAt.Equal(later.Add(time.Hour)) {
		t.Errorf("created_at = %v, want the manual clock's %v", e.CreatedAt, later.Add(time.Hour))
	}
}

func TestRestart(t *testing.T) {
	h := newHarness(t)
	r := h.do("POST", "/v1/admin/restart", nil)
	if code, err := errorBody(r); r.status != http.StatusServiceUnavailable || code != "unavailable" || err != nil {
		t.Errorf("POST /v1/admin/restart without a restart hook = %d %q (%v), want 503 unavailable", r.status, code, err)
	}

	asked := make(chan struct{}, 1)
	h2 := newHarness(t, withRestart(func() { asked <- struct{}{} }))
	var got struct {
		Status string `json:"status"`
	}
	h2.call("POST", "/v1/admin/restart", nil, http.StatusAccepted, &got)
	select {
	case <-asked:
	default:
		t.Errorf("POST /v1/admin/restart = %q, and the restart hook was not called", got.Status)
	}
}
