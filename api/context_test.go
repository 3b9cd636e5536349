package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/api"
	"hermes/commands"
	"hermes/domain"
	"hermes/projections"
	"hermes/projections/sessions"
	"hermes/projections/transcripts"
)

// cxSettings is the context configuration of the context tests: Telegram
// and Discord connected, a Telegram home channel, PII redaction on.
func cxSettings() api.ContextSettings {
	return api.ContextSettings{
		ConnectedPlatforms: []string{"telegram", "discord"},
		HomeChannels:       map[string]domain.HomeChannel{"telegram": {ChatID: "-1002285219667", Name: "Ops Room"}},
		HermesHome:         "~/.hermes",
		RedactPII:          true,
	}
}

// cxServer is hermes serve with context settings: a SQLite event store,
// the lane and transcript read models fed by a running runner, and the API
// on a loopback HTTP server, all on a manual clock.
type cxServer struct {
	t       *testing.T
	clock   *api.ManualClock
	store   *sqlite.Store
	runner  *projections.Runner
	reader  *transcripts.Reader
	lanes   *sessions.Projection
	http    *httptest.Server
	handler *commands.Handler
}

func newCXServer(t *testing.T) *cxServer {
	t.Helper()
	dir := t.TempDir()
	s := &cxServer{t: t, clock: api.NewManualClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))}
	var err error
	if s.store, err = sqlite.Open(filepath.Join(dir, "events.db"), sqlite.WithClock(s.clock.Now)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.store.Close() })
	if s.lanes, err = sessions.Open(filepath.Join(dir, "lanes.db"), sessions.Exports{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.lanes.Close() })
	state, err := transcripts.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { state.Close() })
	s.runner = projections.NewRunner(s.store, s.lanes, state)
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.runner.CatchUp(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if s.reader, err = transcripts.OpenReader(filepath.Join(dir, "state.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.reader.Close() })
	done := make(chan error, 1)
	go func() { done <- s.runner.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runner.Run() = %v", err)
		}
	})
	s.start()
	return s
}

// start serves the API with a new commands.Handler, whose empty cache
// replays every lane from the store: what a restarted process sees.
func (s *cxServer) start() {
	s.t.Helper()
	if s.http != nil {
		s.http.Close()
	}
	s.handler = commands.NewHandler(s.store, commands.DefaultConfig(),
		commands.WithClock(s.clock.Now), commands.WithDirectory(s.lanes))
	srv := api.New(api.Deps{
		Commands: s.handler, Store: s.store, Runner: s.runner, Lanes: s.lanes, Transcripts: s.reader,
		Clock: s.clock, ResumeFreshness: time.Hour, Context: cxSettings(),
	})
	srv.SetReady(true)
	s.http = httptest.NewServer(srv.Handler())
	hs := s.http
	s.t.Cleanup(hs.Close)
}

func (s *cxServer) call(method, path string, body any, want int, out any) []byte {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.http.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Client().Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	if resp.StatusCode != want {
		s.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			s.t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
	return data
}

// cxContext is the answer of GET context.
type cxContext struct {
	SessionKey  string  `json:"session_key"`
	SessionID   string  `json:"session_id"`
	Prompt      string  `json:"prompt"`
	Notice      *string `json:"notice"`
	Note        *string `json:"note"`
	Message     string  `json:"message"`
	ResetReason *string `json:"reset_reason"`
	Version     uint64  `json:"version"`
}

type cxEntry struct {
	SessionID       string  `json:"session_id"`
	WasAutoReset    bool    `json:"was_auto_reset"`
	AutoResetReason *string `json:"auto_reset_reason"`
	Version         uint64  `json:"version"`
}

func cxPath(key, suffix string) string { return "/v1/sessions/" + url.PathEscape(key) + suffix }

func (s *cxServer) resolve(src domain.SessionSource) cxEntry {
	s.t.Helper()
	var out struct {
		Entry       cxEntry `json:"entry"`
		ResetReason *string `json:"reset_reason"`
	}
	s.call("POST", "/v1/sessions/resolve", map[string]any{"source": src}, http.StatusOK, &out)
	return out.Entry
}

func (s *cxServer) context(key string, query url.Values) cxContext {
	s.t.Helper()
	path := cxPath(key, "/context")
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	var out cxContext
	s.call("GET", path, nil, http.StatusOK, &out)
	return out
}

var cxAlice = domain.SessionSource{Platform: "telegram", ChatID: "12345", ChatType: "dm", UserID: "u1"}

const cxAliceKey = "agent:main:telegram:dm:12345"

func TestContext_Prompt(t *testing.T) {
	s := newCXServer(t)
	entry := s.resolve(cxAlice)
	got := s.context(cxAliceKey, nil)
	want := domain.SessionContextPrompt(cxAlice, domain.DefaultKeyOptions(), cxSettings())
	if got.Prompt != want {
		t.Errorf("prompt =\n%s\nwant\n%s", got.Prompt, want)
	}
	for _, line := range []string{
		"**Source:** Telegram (DM with user_bb82030dbc2b)",
		"**User ID:** user_bb82030dbc2b",
		"**Connected Platforms:** local (files on this machine), discord: Connected ✓, telegram: Connected ✓",
		"  - telegram: Ops Room (ID: d7e77f26eb67)",
		"- `\"origin\"` → Back to this chat (5994471abb01)",
	} {
		if !strings.Contains(got.Prompt, line+"\n") {
			t.Errorf("prompt has no line %q:\n%s", line, got.Prompt)
		}
	}
	if got.SessionID != entry.SessionID || got.SessionKey != cxAliceKey || got.Notice != nil || got.Note != nil || got.ResetReason != nil || got.Message != "" {
		t.Errorf("context of a new lane = %+v, want no notice, note or message", got)
	}
	// Redaction is for the prompt only: the stored source keeps its ids.
	var stored struct {
		Origin domain.SessionSource `json:"origin"`
	}
	s.call("GET", cxPath(cxAliceKey, ""), nil, http.StatusOK, &stored)
	if stored.Origin.UserID != "u1" || stored.Origin.ChatID != "12345" {
		t.Errorf("stored origin = %+v, want the raw ids", stored.Origin)
	}
}

func TestContext_NoticeDeliveredOnce(t *testing.T) {
	s := newCXServer(t)
	s.resolve(cxAlice)
	s.call("POST", cxPath(cxAliceKey, "/turns"), map[string]any{"input_tokens": 10, "output_tokens": 5}, http.StatusOK, nil)
	s.clock.Set(s.clock.Now().Add(25 * time.Hour))
	reset := s.resolve(cxAlice)

	wantNotice := "◐ Session automatically reset (inactive for 24h). Conversation history cleared.\nUse /resume to browse and restore a previous session.\nAdjust reset timing in config.yaml under session_reset."
	wantNote := "[System note: The user's previous session expired due to inactivity. This is a fresh conversation with no prior context.]"
	for i := range 2 { // reading does not consume
		got := s.context(cxAliceKey, nil)
		if got.Notice == nil || *got.Notice != wantNotice || got.Note == nil || *got.Note != wantNote || got.ResetReason == nil || *got.ResetReason != "idle" {
			t.Fatalf("read %d: context = %+v, want the idle notice and note", i, got)
		}
		if got.SessionID != reset.SessionID {
			t.Fatalf("read %d: session %s, want %s", i, got.SessionID, reset.SessionID)
		}
	}

	// A restart before delivery loses nothing.
	s.start()
	if got := s.context(cxAliceKey, nil); got.Notice == nil {
		t.Fatalf("after a restart the undelivered notice is gone: %+v", got)
	}

	var acked cxEntry
	s.call("POST", cxPath(cxAliceKey, "/notice/ack"), nil, http.StatusOK, &acked)
	if acked.WasAutoReset || acked.AutoResetReason != nil || acked.Version != reset.Version+1 {
		t.Fatalf("ack = %+v, want the flags cleared at version %d", acked, reset.Version+1)
	}
	var again cxEntry
	s.call("POST", cxPath(cxAliceKey, "/notice/ack"), map[string]any{}, http.StatusOK, &again)
	if again.Version != acked.Version {
		t.Fatalf("second ack moved the lane to version %d, want %d (no event)", again.Version, acked.Version)
	}
	if got := s.context(cxAliceKey, nil); got.Notice != nil || got.Note != nil || got.ResetReason != nil {
		t.Fatalf("context after ack = %+v, want nothing pending", got)
	}
	// And after a restart that replays the lane from the store.
	s.start()
	if got := s.context(cxAliceKey, nil); got.Notice != nil || got.Note != nil || got.ResetReason != nil {
		t.Fatalf("context after ack and a restart = %+v, want nothing pending", got)
	}
}

func TestContext_AckForAnotherSession(t *testing.T) {
	s := newCXServer(t)
	first := s.resolve(cxAlice)
	s.call("POST", cxPath(cxAliceKey, "/suspend"), nil, http.StatusOK, nil)
	s.clock.Set(s.clock.Now().Add(time.Second))
	second := s.resolve(cxAlice)
	var e cxEntry
	s.call("POST", cxPath(cxAliceKey, "/notice/ack"), map[string]any{"session_id": first.SessionID}, http.StatusOK, &e)
	if !e.WasAutoReset || e.Version != second.Version {
		t.Fatalf("ack for %s = %+v, want the notice of %s still pending", first.SessionID, e, second.SessionID)
	}
	got := s.context(cxAliceKey, nil)
	if got.Notice == nil || !strings.Contains(*got.Notice, "(previous session was stopped or interrupted)") {
		t.Fatalf("context = %+v, want the suspended notice", got)
	}
	s.call("POST", cxPath(cxAliceKey, "/notice/ack"), map[string]any{"session_id": "../etc"}, http.StatusBadRequest, nil)
	s.call("POST", cxPath(cxAliceKey, "/notice/ack"), map[string]any{"session_id": second.SessionID}, http.StatusOK, &e)
	if e.WasAutoReset {
		t.Fatalf("ack for the current session left the notice pending: %+v", e)
	}
}

func TestContext_RecoveryNote(t *testing.T) {
	s := newCXServer(t)
	entry := s.resolve(cxAlice)
	msgs := "/v1/transcripts/" + url.PathEscape(entry.SessionID) + "/messages"
	s.call("POST", msgs, map[string]any{"role": "user", "content": "run the migration"}, http.StatusOK, nil)
	s.call("POST", cxPath(cxAliceKey, "/resume-pending"), map[string]any{"reason": "restart_timeout"}, http.StatusOK, nil)

	got := s.context(cxAliceKey, url.Values{"message": {"where were we?"}})
	wantFull := domain.ResumeRecoveryNote("restart_timeout", "where were we?", true)
	if got.Message != wantFull {
		t.Errorf("message =\n%q\nwant\n%q", got.Message, wantFull)
	}
	if got.Note == nil || *got.Note+"\n\nwhere were we?" != wantFull {
		t.Errorf("note = %v, want the recovery note alone", got.Note)
	}
	if !strings.HasPrefix(got.Message, "[System note: The previous turn was interrupted by a gateway restart; the gateway is now back online.") {
		t.Errorf("message = %q", got.Message)
	}

	// The startup auto-resume turn has no message: report and ask.
	got = s.context(cxAliceKey, nil)
	if want := domain.ResumeRecoveryNote("restart_timeout", "", true); got.Message != want || got.Note == nil || *got.Note != want {
		t.Errorf("auto-resume context = %+v, want the interactive recovery note %q", got, want)
	}

	// Past the freshness window (the transcript's last row and the mark
	// both older than an hour), no note.
	s.clock.Set(s.clock.Now().Add(2 * time.Hour))
	if got := s.context(cxAliceKey, url.Values{"message": {"hi"}}); got.Note != nil || got.Message != "hi" {
		t.Errorf("stale resume context = %+v, want no note", got)
	}
}

func TestContext_RecoveryNoteOnNonInteractivePlatform(t *testing.T) {
	s := newCXServer(t)
	src := domain.SessionSource{Platform: "api_server", ChatID: "conn-1", ChatType: "dm"}
	s.resolve(src)
	key := "agent:main:api_server:dm:conn-1"
	s.call("POST", cxPath(key, "/resume-pending"), map[string]any{"reason": "shutdown_timeout"}, http.StatusOK, nil)
	got := s.context(key, nil)
	if want := domain.ResumeRecoveryNote("shutdown_timeout", "", false); got.Message != want || !strings.Contains(want, "CONTINUE the interrupted task to completion") {
		t.Errorf("message = %q, want %q", got.Message, want)
	}
}

func TestContext_PendingToolOutputNote(t *testing.T) {
	s := newCXServer(t)
	entry := s.resolve(cxAlice)
	msgs := "/v1/transcripts/" + url.PathEscape(entry.SessionID) + "/messages"
	s.call("POST", msgs, map[string]any{"role": "user", "content": "deploy the app"}, http.StatusOK, nil)
	s.call("POST", msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "function": map[string]any{"name": "terminal", "arguments": "{}"}}}}, http.StatusOK, nil)
	s.call("POST", msgs, map[string]any{"role": "tool", "tool_call_id": "c1", "content": "deployed"}, http.StatusOK, nil)

	got := s.context(cxAliceKey, url.Values{"message": {"what happened?"}})
	if got.Note == nil || *got.Note != domain.PendingToolOutputNote || got.Message != domain.PendingToolOutputNote+"\n\nwhat happened?" {
		t.Errorf("context = %+v, want the pending-tool-output note", got)
	}
	s.clock.Set(s.clock.Now().Add(time.Hour + time.Second))
	if got := s.context(cxAliceKey, url.Values{"message": {"what happened?"}}); got.Note != nil {
		t.Errorf("context with a stale tool tail = %+v, want no note", got)
	}
}

func TestContext_SharedSenderPrefix(t *testing.T) {
	s := newCXServer(t)
	thread := domain.SessionSource{Platform: "telegram", ChatID: "-100", ChatName: "Ops", ChatType: "group", ThreadID: "7", UserID: "1", UserName: "Alice"}
	s.resolve(thread)
	key := "agent:main:telegram:group:-100:7"
	q := url.Values{"message": {"hello world"}, "sender": {"Bob"}, "channel_context": {"[Recent channel messages]\n[Carol] hi"}}
	got := s.context(key, q)
	if want := "[Recent channel messages]\n[Carol] hi\n\n[New message]\n[Bob] hello world"; got.Message != want {
		t.Errorf("message = %q, want %q", got.Message, want)
	}
	if !strings.Contains(got.Prompt, "**Session type:** Multi-user thread — messages are prefixed with [sender name]. Multiple users may participate.\n") {
		t.Errorf("prompt has no multi-user line:\n%s", got.Prompt)
	}
	if got := s.context(key, url.Values{"message": {"hi"}}); got.Message != "[Alice] hi" {
		t.Errorf("message without sender = %q, want the origin's name", got.Message)
	}
}

func TestContext_UnknownLane(t *testing.T) {
	s := newCXServer(t)
	s.call("GET", cxPath("agent:main:telegram:dm:nobody", "/context"), nil, http.StatusNotFound, nil)
	s.call("POST", cxPath("agent:main:telegram:dm:nobody", "/notice/ack"), nil, http.StatusNotFound, nil)
	s.call("POST", cxPath(cxAliceKey, "/notice/ack"), map[string]any{"bogus": 1}, http.StatusBadRequest, nil)
}
