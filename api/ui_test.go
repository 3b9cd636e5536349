package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/api"
	"hermes/commands"
	"hermes/domain"
	"hermes/events"
	"hermes/projections"
	"hermes/projections/sessions"
	"hermes/projections/transcripts"
)

// uiStart is where the web UI tests' clock begins: the day of the issue's
// example ("idle: last activity 2030-05-10 11:00, idle_minutes 60, …").
var uiStart = time.Date(2030, 5, 10, 10, 0, 0, 0, time.UTC)

// uiConfig resets idle lanes after 60 minutes, and never Discord ones.
func uiConfig() commands.Config {
	cfg := commands.DefaultConfig()
	cfg.Policies = domain.ResetPolicies{
		Default:    domain.ResetPolicy{Mode: domain.ResetIdle, IdleMinutes: 60, Notify: true},
		ByPlatform: map[string]domain.ResetPolicy{"discord": {Mode: domain.ResetNone}},
	}
	return cfg
}

// newUIHarness is newHarness (harness_test.go) with the commands
// configured by cfg and the clock at uiStart: the same wiring as hermes
// serve, a real HTTP server on 127.0.0.1.
func newUIHarness(t *testing.T, token string, cfg commands.Config) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), clock: api.NewManualClock(uiStart), token: token}
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	if h.raw, err = sqlite.Open(filepath.Join(h.dir, "events.db"), sqlite.WithClock(h.clock.Now)); err != nil {
		t.Fatalf("sqlite.Open() = %v", err)
	}
	t.Cleanup(func() { h.raw.Close() })
	if h.lanes, err = sessions.Open(filepath.Join(h.dir, "lanes.db"), sessions.Exports{}); err != nil {
		t.Fatalf("sessions.Open() = %v", err)
	}
	t.Cleanup(func() { h.lanes.Close() })
	state, err := transcripts.Open(filepath.Join(h.dir, "state.db"))
	if err != nil {
		t.Fatalf("transcripts.Open() = %v", err)
	}
	t.Cleanup(func() { state.Close() })
	h.runner = projections.NewRunner(h.raw, h.lanes, state)
	if err := h.runner.CatchUp(ctx, nil); err != nil {
		t.Fatalf("runner.CatchUp() = %v", err)
	}
	reader, err := transcripts.OpenReader(filepath.Join(h.dir, "state.db"))
	if err != nil {
		t.Fatalf("transcripts.OpenReader() = %v", err)
	}
	t.Cleanup(func() { reader.Close() })
	h.store = h.raw
	handler := commands.NewHandler(h.store, cfg, commands.WithClock(h.clock.Now), commands.WithDirectory(h.lanes))
	h.server = api.New(api.Deps{
		Commands: handler, Store: h.store, Runner: h.runner, Lanes: h.lanes, Transcripts: reader,
		Clock: h.clock, Token: token, ResumeFreshness: time.Hour,
	})
	runnerDone := make(chan error, 1)
	go func() { runnerDone <- h.runner.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-runnerDone; err != nil {
			t.Errorf("runner.Run() = %v", err)
		}
	})
	h.http = httptest.NewServer(h.server.Handler())
	t.Cleanup(func() {
		h.http.CloseClientConnections() // the page's event stream
		h.http.Close()
	})
	h.server.SetReady(true)
	return h
}

// uiStory is what seedUI made.
type uiStory struct {
	key            string // the lane reset by the idle rule
	oldSID, newSID string
	resetVersion   uint64
	word           string // in the old session's transcript
	others         []string
}

// seedUI plays the story the UI tests look at: a Telegram DM talks from
// 10:00 to 11:00 (a turn, messages, one exchange rewound), is silent for
// 90 minutes and gets a new session by the idle rule at 12:30; beside it a
// suspended lane, a resume-pending one and a Discord group.
func seedUI(h *harness) uiStory {
	h.t.Helper()
	clock := func(d string) { h.call("POST", "/v1/clock", map[string]string{"advance": d}, http.StatusOK, nil) }
	alice := source{Platform: "telegram", ChatID: "4242", ChatType: "dm", ChatName: "Alice", UserID: "u4242", UserName: "Alice"}
	st := uiStory{word: "turquoise"}
	r := h.resolve(alice)
	st.key, st.oldSID = r.Entry.SessionKey, r.Entry.SessionID

	others := []source{
		{Platform: "discord", ChatID: "guild-7", ChatType: "group", ChatName: "Ops room", UserID: "bob", UserName: "Bob"},
		{Platform: "telegram", ChatID: "555", ChatType: "dm", ChatName: "Carol", UserID: "u555", UserName: "Carol"},
		{Platform: "whatsapp", ChatID: "3161234", ChatType: "dm", ChatName: "Dave", UserID: "3161234", UserName: "Dave"},
	}
	for _, src := range others {
		st.others = append(st.others, h.resolve(src).Entry.SessionKey)
	}

	clock("59m")
	h.call("POST", lane(st.key, "/turns/start"), map[string]string{"turn_id": "t1"}, http.StatusOK, nil)
	h.appendMessage(st.oldSID, "user", "Please remember that my favourite colour is turquoise.")
	h.appendMessage(st.oldSID, "assistant", "Noted: your favourite colour is turquoise.")
	h.appendMessage(st.oldSID, "user", "What is 2 + 2?")
	h.appendMessage(st.oldSID, "assistant", "5")
	h.call("POST", transcript(st.oldSID, "/rewind"), map[string]int{"n": 1}, http.StatusOK, nil)
	clock("1m") // 11:00
	h.call("POST", lane(st.key, "/turns"), map[string]any{"turn_id": "t1", "input_tokens": 120, "output_tokens": 40, "estimated_cost_usd": 0.0021}, http.StatusOK, nil)

	clock("20m")
	h.call("POST", lane(st.others[1], "/suspend"), map[string]any{}, http.StatusOK, nil)
	h.call("POST", lane(st.others[2], "/resume-pending"), map[string]string{"reason": "restart_timeout"}, http.StatusOK, nil)

	clock("70m") // 12:30: 90 minutes after the last activity
	r = h.resolve(alice)
	if r.ResetReason == nil || *r.ResetReason != "idle" {
		h.t.Fatalf("resolve at 12:30 = %+v, want an idle reset", r)
	}
	st.newSID = r.Entry.SessionID
	st.resetVersion = r.Entry.Version
	h.appendMessage(st.newSID, "user", "Hello again, do you remember me?")
	h.resolve(others[0]) // Discord: mode none, never reset
	return st
}

// timelineJSON is the part of the timeline the tests read.
type timelineJSON struct {
	SessionKey string `json:"session_key"`
	Total      uint64 `json:"total"`
	TimeZone   string `json:"time_zone"`
	Items      []struct {
		Version  uint64            `json:"version"`
		Type     string            `json:"type"`
		Category string            `json:"category"`
		Summary  string            `json:"summary"`
		Changes  []api.FieldChange `json:"changes"`
		Entry    json.RawMessage   `json:"entry"`
		Reset    *struct {
			Kind              string  `json:"kind"`
			Reason            *string `json:"reason"`
			SessionID         string  `json:"session_id"`
			PreviousSessionID *string `json:"previous_session_id"`
			HadActivity       bool    `json:"had_activity"`
			Why               string  `json:"why"`
		} `json:"reset"`
		NextReset struct {
			Reason *string    `json:"reason"`
			At     *time.Time `json:"at"`
			Why    string     `json:"why"`
		} `json:"next_reset"`
	} `json:"items"`
}

func TestTimeline(t *testing.T) {
	h := newUIHarness(t, "", uiConfig())
	st := seedUI(h)
	var tl timelineJSON
	h.call("GET", lane(st.key, "/timeline"), nil, http.StatusOK, &tl)
	if tl.SessionKey != st.key || tl.Total != uint64(len(tl.Items)) || tl.TimeZone != "UTC" {
		t.Fatalf("timeline = key %q, total %d, %d items, zone %q", tl.SessionKey, tl.Total, len(tl.Items), tl.TimeZone)
	}
	// Every entry is what time travel answers for its version.
	for _, it := range tl.Items {
		r := h.call("GET", lane(st.key, fmt.Sprintf("/state?at_version=%d", it.Version)), nil, http.StatusOK, nil)
		if !jsonEqual(t, r.body, it.Entry) {
			t.Errorf("v%d entry = %s, /state?at_version = %s", it.Version, it.Entry, r.body)
		}
	}
	byType := map[string]int{}
	for i, it := range tl.Items {
		byType[it.Type] = i
	}
	reset := tl.Items[byType[events.TypeSessionAutoReset]]
	if reset.Version != st.resetVersion || reset.Category != "session" || reset.Reset == nil {
		t.Fatalf("auto-reset item = %+v, want version %d with a reset", reset, st.resetVersion)
	}
	wantWhy := "idle: last activity 2030-05-10 11:00, idle_minutes 60, reset at 12:00:00.000001; applied by the message at 2030-05-10 12:30"
	if r := reset.Reset; r.Kind != "auto_reset" || *r.Reason != "idle" || *r.PreviousSessionID != st.oldSID || r.SessionID != st.newSID || !r.HadActivity || r.Why != wantWhy {
		t.Errorf("reset = %+v, want auto_reset idle %s → %s, why %q", *r, st.oldSID, st.newSID, wantWhy)
	}
	if want := fmt.Sprintf("auto-reset: idle — %s replaced %s (had activity: true)", st.newSID, st.oldSID); reset.Summary != want {
		t.Errorf("summary = %q, want %q (the events tail text)", reset.Summary, want)
	}
	changed := map[string]api.FieldChange{}
	for _, c := range reset.Changes {
		changed[c.Field] = c
	}
	if c := changed["session_id"]; string(c.Before) != `"`+st.oldSID+`"` || string(c.After) != `"`+st.newSID+`"` {
		t.Errorf("session_id change = %+v, want %s → %s", c, st.oldSID, st.newSID)
	}
	before := tl.Items[reset.Version-2] // the turn completed at 11:00
	if before.Category != "turn" || before.NextReset.Why != "idle: last activity 2030-05-10 11:00, idle_minutes 60, reset at 12:00:00.000001" ||
		!before.NextReset.At.Equal(time.Date(2030, 5, 10, 12, 0, 0, 1000, time.UTC)) {
		t.Errorf("item before the reset = %s %+v", before.Type, before.NextReset)
	}

	// Pages: from_version and limit.
	var page timelineJSON
	h.call("GET", lane(st.key, "/timeline?from_version=2&limit=2"), nil, http.StatusOK, &page)
	if len(page.Items) != 2 || page.Items[0].Version != 2 || page.Total != tl.Total {
		t.Errorf("page from 2, limit 2 = %d items from v%d, total %d", len(page.Items), page.Items[0].Version, page.Total)
	}
	h.call("GET", lane("agent:main:telegram:dm:nobody", "/timeline"), nil, http.StatusNotFound, nil)
	h.call("GET", lane(st.key, "/timeline?limit=0"), nil, http.StatusBadRequest, nil)
}

// The two read routes of the web UI reflect a write at once, as every GET
// of /v1 must (readroutes_test.go).
func init() {
	readCases["/v1/lanes"] = func(h *harness, n int) readCheck {
		key := h.resolve(dm(fmt.Sprint("ui-lanes-", n))).Entry.SessionKey
		return readCheck{path: "/v1/lanes?limit=500", status: 200, has: `"session_key":"` + key + `"`}
	}
	readCases["/v1/sessions/{key}/timeline"] = func(h *harness, n int) readCheck {
		res := h.resolve(dm("ui-timeline"))
		var e entry
		h.call("POST", lane(res.Entry.SessionKey, "/touch"), map[string]int{"last_prompt_tokens": n}, 200, &e)
		return readCheck{path: lane(res.Entry.SessionKey, "/timeline"), status: 200, has: fmt.Sprintf(`"version":%d,`, e.Version)}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("decode %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}

func TestSearchLanes(t *testing.T) {
	h := newUIHarness(t, "", uiConfig())
	st := seedUI(h)
	type page struct {
		Lanes []struct {
			SessionKey string    `json:"session_key"`
			UpdatedAt  time.Time `json:"updated_at"`
		} `json:"lanes"`
		Total     int      `json:"total"`
		Head      uint64   `json:"head"`
		Platforms []string `json:"platforms"`
		ChatTypes []string `json:"chat_types"`
	}
	keys := func(query string) []string {
		t.Helper()
		var p page
		h.call("GET", "/v1/lanes"+query, nil, http.StatusOK, &p)
		var out []string
		for _, l := range p.Lanes {
			out = append(out, l.SessionKey)
		}
		return out
	}
	var all page
	h.call("GET", "/v1/lanes", nil, http.StatusOK, &all)
	if all.Total != 4 || len(all.Lanes) != 4 || all.Head != h.head() {
		t.Fatalf("all lanes = %+v, want 4 and head %d", all, h.head())
	}
	for i := 1; i < len(all.Lanes); i++ {
		if all.Lanes[i].UpdatedAt.After(all.Lanes[i-1].UpdatedAt) {
			t.Errorf("lanes not sorted by activity: %+v", all.Lanes)
		}
	}
	if strings.Join(all.Platforms, ",") != "discord,telegram,whatsapp" || strings.Join(all.ChatTypes, ",") != "dm,group" {
		t.Errorf("platforms %v, chat types %v", all.Platforms, all.ChatTypes)
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"?state=recently_reset", []string{st.key}},
		{"?state=suspended", []string{st.others[1]}},
		{"?state=resume_pending", []string{st.others[2]}},
		{"?platform=discord", []string{st.others[0]}},
		{"?chat_type=group", []string{st.others[0]}},
		{"?q=ALICE", []string{st.key}},
		{"?q=" + st.newSID, []string{st.key}},
		{"?q=" + st.oldSID, []string{st.key}}, // the session it replaced
		{"?q=4242&state=suspended", nil},
		{"?limit=1&offset=3", []string{all.Lanes[3].SessionKey}},
	} {
		if got := keys(tt.query); strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("GET /v1/lanes%s = %v, want %v", tt.query, got, tt.want)
		}
	}
	for _, q := range []string{"?state=gone", "?limit=0", "?limit=501", "?offset=-1", "?min_position=x"} {
		h.call("GET", "/v1/lanes"+q, nil, http.StatusBadRequest, nil)
	}
	// min_position beyond the head waits for the head, not forever.
	h.call("GET", "/v1/lanes?min_position=999999", nil, http.StatusOK, nil)
}

func TestUIFiles(t *testing.T) {
	h := newUIHarness(t, "s3cret", uiConfig())
	for _, tt := range []struct{ path, contentType string }{
		{"/ui/", "text/html; charset=utf-8"},
		{"/ui", "text/html; charset=utf-8"},
		{"/ui/index.html", "text/html; charset=utf-8"},
		{"/ui/app.js", "text/javascript; charset=utf-8"},
		{"/ui/app.css", "text/css; charset=utf-8"},
		{"/ui/favicon.svg", "image/svg+xml"},
	} {
		// The files need no token: they hold no data.
		r := h.send(request{method: "GET", path: tt.path, noAuth: true})
		if r.status != http.StatusOK || r.header.Get("Content-Type") != tt.contentType {
			t.Errorf("GET %s = %d %q, want 200 %q", tt.path, r.status, r.header.Get("Content-Type"), tt.contentType)
		}
		for name, want := range map[string]string{
			"X-Content-Type-Options": "nosniff",
			"X-Frame-Options":        "DENY",
			"Cache-Control":          "no-cache",
			"Referrer-Policy":        "no-referrer",
		} {
			if got := r.header.Get(name); got != want {
				t.Errorf("GET %s: %s = %q, want %q", tt.path, name, got, want)
			}
		}
		csp := r.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", tt.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP %q allows unsafe sources", tt.path, csp)
		}
		if r.header.Get("Set-Cookie") != "" {
			t.Errorf("GET %s sets a cookie", tt.path)
		}
		// Revalidation answers 304 while the file is unchanged.
		etag := r.header.Get("ETag")
		again := h.send(request{method: "GET", path: tt.path, noAuth: true, header: map[string]string{"If-None-Match": etag}})
		if etag == "" || again.status != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match %q = %d, want 304", tt.path, etag, again.status)
		}
	}
	// The page has no inline script or style, so the CSP needs none.
	page := h.send(request{method: "GET", path: "/ui/", noAuth: true})
	for _, bad := range []*regexp.Regexp{regexp.MustCompile(`<script>|<style|style=|\son[a-z]+=`), regexp.MustCompile(`https?://`)} {
		if m := bad.Find(page.body); m != nil {
			t.Errorf("index.html contains %q", m)
		}
	}
	if r := h.send(request{method: "GET", path: "/ui/secrets.txt", noAuth: true}); r.status != http.StatusNotFound {
		t.Errorf("GET /ui/secrets.txt = %d, want 404", r.status)
	}
	// The data behind the page does need the token.
	for _, p := range []string{"/v1/lanes", lane("agent:main:telegram:dm:1", "/timeline")} {
		if r := h.send(request{method: "GET", path: p, noAuth: true}); r.status != http.StatusUnauthorized {
			t.Errorf("GET %s without the token = %d, want 401", p, r.status)
		}
	}
	// And another origin cannot load the page into its own.
	r := h.send(request{method: "GET", path: "/ui/", noAuth: true, header: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}})
	if r.status != http.StatusForbidden {
		t.Errorf("cross-site GET /ui/ = %d, want 403", r.status)
	}
}
