package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
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
	"hermes/events"
	"hermes/projections"
	"hermes/projections/sessions"
	"hermes/projections/transcripts"
)

// start is where every harness clock begins: mid-morning, so neither the
// 04:00 daily boundary nor the 24h idle window is near.
var start = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// harness is a hermes serve as node.Open wires it: a SQLite event
// store in a temporary directory (stamped by the manual clock), the lane
// and transcript read models fed by a running projections.Runner, a
// separate state.db reader for the queries, the commands.Handler on the
// manual clock, and the API behind a real HTTP server on 127.0.0.1.
type harness struct {
	t      testing.TB
	dir    string
	clock  *api.ManualClock
	raw    *sqlite.Store
	store  events.Store // raw, instrumented by the metrics
	lanes  *sessions.Projection
	state  *transcripts.Projection
	runner *projections.Runner
	server *api.Server
	http   *httptest.Server
	token  string
}

type harnessOptions struct {
	token    string
	notReady bool
	restart  func()
	browser  api.BrowserPolicy // withBrowser, browser_test.go
	// bodyReadTimeout is api.Deps.BodyReadTimeout.
	bodyReadTimeout time.Duration
	log             *slog.Logger
	follow          followLimits         // withFollowLimits, follow_test.go
	maxConns        int                  // withMaxConnections, follow_test.go
	backoff         *projections.Backoff // withBackoff, storagefull_test.go
	rebuild         api.Rebuilder        // withRebuilder, rebuild_test.go
}

type option func(*harnessOptions)

func withToken(tok string) option { return func(o *harnessOptions) { o.token = tok } }
func notReady() option            { return func(o *harnessOptions) { o.notReady = true } }
func withRestart(f func()) option { return func(o *harnessOptions) { o.restart = f } }

func withBodyReadTimeout(d time.Duration) option {
	return func(o *harnessOptions) { o.bodyReadTimeout = d }
}

// withLog gives the server a logger (none: the log is discarded).
func withLog(l *slog.Logger) option { return func(o *harnessOptions) { o.log = l } }

// newHarness starts a server; everything is released by t.Cleanup.
func newHarness(t testing.TB, opts ...option) *harness {
	t.Helper()
	var o harnessOptions
	for _, f := range opts {
		f(&o)
	}
	h := &harness{t: t, dir: t.TempDir(), clock: api.NewManualClock(start), token: o.token}
	if o.rebuild == nil {
		o.rebuild = &trackedRebuilder{tracker: projections.NewRebuildTracker(h.clock.Now), atOnce: true}
	}
	ctx, cancel := context.WithCancel(context.Background())

	var err error
	h.raw, err = sqlite.Open(filepath.Join(h.dir, "events.db"), sqlite.WithClock(h.clock.Now))
	if err != nil {
		t.Fatalf("sqlite.Open() = %v, want nil", err)
	}
	t.Cleanup(func() { h.raw.Close() })
	h.lanes, err = sessions.Open(filepath.Join(h.dir, "lanes.db"), sessions.Exports{})
	if err != nil {
		t.Fatalf("sessions.Open() = %v, want nil", err)
	}
	t.Cleanup(func() { h.lanes.Close() })
	state, err := transcripts.Open(filepath.Join(h.dir, "state.db"))
	if err != nil {
		t.Fatalf("transcripts.Open() = %v, want nil", err)
	}
	t.Cleanup(func() { state.Close() })
	h.state = state
	h.runner = projections.NewRunner(h.raw, h.lanes, state)
	h.runner.SetBarrier(api.StaleAfter)
	if o.backoff != nil {
		h.runner.SetBackoff(*o.backoff)
	}
	if o.log != nil {
		h.runner.SetLogger(o.log)
	}
	if err := h.runner.CatchUp(ctx, nil); err != nil {
		t.Fatalf("runner.CatchUp() = %v, want nil", err)
	}
	reader, err := transcripts.OpenReader(filepath.Join(h.dir, "state.db"))
	if err != nil {
		t.Fatalf("transcripts.OpenReader() = %v, want nil", err)
	}
	t.Cleanup(func() { reader.Close() })

	metrics := api.NewMetrics()
	h.store = metrics.InstrumentStore(h.raw)
	handler := commands.NewHandler(h.store, commands.DefaultConfig(),
		commands.WithClock(h.clock.Now), commands.WithDirectory(h.lanes), commands.WithSnapshots(h.raw, 0))
	metrics.Observe(h.runner, h.lanes)
	h.server = api.New(api.Deps{
		Commands:        handler,
		Store:           h.store,
		Runner:          h.runner,
		Lanes:           h.lanes,
		Transcripts:     reader,
		Assigned:        state,
		Clock:           h.clock,
		Token:           o.token,
		Metrics:         metrics,
		ResumeFreshness: time.Hour,
		Restart:         o.restart,
		Rebuild:         o.rebuild,
		Browser:         o.browser,
		BodyReadTimeout: o.bodyReadTimeout,
		Log:             o.log,

		MaxFollowers:         o.follow.max,
		FollowerBufferBytes:  o.follow.bufferBytes,
		FollowerWriteTimeout: o.follow.writeTimeout,
	})

	runnerDone := make(chan error, 1)
	go func() { runnerDone <- h.runner.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-runnerDone; err != nil {
			t.Errorf("runner.Run() = %v, want nil", err)
		}
	})

	h.http = httptest.NewUnstartedServer(h.server.Handler())
	if o.maxConns > 0 {
		h.http.Listener = api.LimitConnections(h.http.Config, h.http.Listener, o.maxConns)
	}
	h.http.Start()
	t.Cleanup(func() {
		// A following client may still hold a stream open: cut it, so
		// Close does not wait for it.
		h.http.CloseClientConnections()
		h.http.Close()
	})
	if !o.notReady {
		h.server.SetReady(true)
	}
	return h
}

// with is the harness reporting to t (a subtest's), so that its helpers
// fail the test that called them.
func (h *harness) with(t testing.TB) *harness {
	c := *h
	c.t = t
	return &c
}

// response is an answer read in full.
type response struct {
	status int
	header http.Header
	body   []byte
}

// request is one call; body is a string or []byte sent as is, an
// io.Reader sent chunked, or any other value sent as JSON; nil sends no
// body.
type request struct {
	method string
	path   string
	body   any
	header map[string]string
	// noAuth leaves out the harness token.
	noAuth bool
}

func (h *harness) url(path string) string { return h.http.URL + path }

func (h *harness) send(rq request) response {
	h.t.Helper()
	var body io.Reader
	switch b := rq.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	case io.Reader:
		body = b // of unknown length: sent chunked
	default:
		data, err := json.Marshal(b)
		if err != nil {
			h.t.Fatalf("json.Marshal(%v) = %v", b, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequest(rq.method, h.url(rq.path), body)
	if err != nil {
		h.t.Fatalf("http.NewRequest(%s, %s) = %v", rq.method, rq.path, err)
	}
	if rq.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.token != "" && !rq.noAuth {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	for k, v := range rq.header {
		req.Header.Set(k, v)
	}
	resp, err := h.http.Client().Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", rq.method, rq.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: read body: %v", rq.method, rq.path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

func (h *harness) do(method, path string, body any) response {
	h.t.Helper()
	return h.send(request{method: method, path: path, body: body})
}

// call sends a request, requires status want and decodes the answer into
// out (when not nil).
func (h *harness) call(method, path string, body any, want int, out any) response {
	h.t.Helper()
	r := h.do(method, path, body)
	if r.status != want {
		h.t.Fatalf("%s %s = %d %s, want %d", method, path, r.status, r.body, want)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			h.t.Fatalf("%s %s: decode %s: %v", method, path, r.body, err)
		}
	}
	return r
}

// head is the global position of the last event in the log.
func (h *harness) head() uint64 {
	h.t.Helper()
	n, err := h.raw.Head(context.Background())
	if err != nil {
		h.t.Fatalf("Head() = %v", err)
	}
	return n
}

// entry is the part of the API's SessionEntry the tests look at.
type entry struct {
	SessionKey         string     `json:"session_key"`
	SessionID          string     `json:"session_id"`
	CreatedAt          time.Time  `json:"created_at"`
	UpdatedAt          time.Time  `json:"updated_at"`
	Origin             source     `json:"origin"`
	DisplayName        *string    `json:"display_name"`
	Platform           string     `json:"platform"`
	ChatType           string     `json:"chat_type"`
	InputTokens        int64      `json:"input_tokens"`
	OutputTokens       int64      `json:"output_tokens"`
	CacheReadTokens    int64      `json:"cache_read_tokens"`
	CacheWriteTokens   int64      `json:"cache_write_tokens"`
	TotalTokens        int64      `json:"total_tokens"`
	EstimatedCostUSD   float64    `json:"estimated_cost_usd"`
	LastPromptTokens   int64      `json:"last_prompt_tokens"`
	WasAutoReset       bool       `json:"was_auto_reset"`
	AutoResetReason    *string    `json:"auto_reset_reason"`
	Suspended          bool       `json:"suspended"`
	ResumePending      bool       `json:"resume_pending"`
	ResumeReason       *string    `json:"resume_reason"`
	LastResumeMarkedAt *time.Time `json:"last_resume_marked_at"`
	Version            uint64     `json:"version"`
	PreviousSessionID  *string    `json:"previous_session_id"`
	ActiveProcesses    int        `json:"active_processes"`
	OpenTurnID         *string    `json:"open_turn_id"`
}

type source struct {
	Platform string `json:"platform"`
	ChatID   string `json:"chat_id"`
	ChatName string `json:"chat_name,omitempty"`
	ChatType string `json:"chat_type,omitempty"`
	UserID   string `json:"user_id,omitempty"`
	UserName string `json:"user_name,omitempty"`
	ThreadID string `json:"thread_id,omitempty"`
}

type resolved struct {
	Entry       entry   `json:"entry"`
	Created     bool    `json:"created"`
	ResetReason *string `json:"reset_reason"`
}

// dm is a Telegram DM source; its lane key is agent:main:telegram:dm:<chat>.
func dm(chat string) source {
	return source{Platform: "telegram", ChatID: chat, ChatType: "dm", UserID: "u" + chat, UserName: "User " + chat}
}

func (h *harness) resolve(src source) resolved {
	h.t.Helper()
	var out resolved
	h.call("POST", "/v1/sessions/resolve", map[string]any{"source": src}, http.StatusOK, &out)
	return out
}

// lane is the path of a lane: /v1/sessions/<escaped key><suffix>.
func lane(key, suffix string) string { return "/v1/sessions/" + url.PathEscape(key) + suffix }

// transcript is the path of a transcript: /v1/transcripts/<id><suffix>.
func transcript(id, suffix string) string {
	return "/v1/transcripts/" + url.PathEscape(id) + suffix
}

// errorBody decodes the error shape strictly: exactly {"error": {"code",
// "message"}} with a non-empty message.
func errorBody(r response) (code string, err error) {
	var body struct {
		Error *struct {
			Code    *string `json:"code"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return "", err
	}
	switch {
	case body.Error == nil:
		return "", errors.New("no error object")
	case body.Error.Code == nil || *body.Error.Code == "":
		return "", errors.New("no error.code")
	case body.Error.Message == nil || *body.Error.Message == "":
		return "", errors.New("no error.message")
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return "", errors.New("Content-Type " + ct + ", want application/json")
	}
	return *body.Error.Code, nil
}
