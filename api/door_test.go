package api_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// lockedBuffer is a log sink the server writes from its handlers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// doorRow is one finding of issue [V] ("no input can brick hermes"): the
// requests in given are accepted first (each must answer 2xx), then the
// request under test is refused with status and code, and appends nothing.
type doorRow struct {
	name   string
	given  []request
	method string
	path   string
	body   any
	status int
	code   string
}

// TestValidationAtTheDoor is the table of the findings of [V], over real
// HTTP: every row is refused at the door, answering the error shape, and
// the log's head does not move. Afterwards the routes that the findings
// used to break (the session, recent, export, the log) still answer 200
// with valid UTF-8, and valid requests are still accepted.
func TestValidationAtTheDoor(t *testing.T) {
	logs := &lockedBuffer{}
	h := newHarness(t, withLog(slog.New(slog.NewTextHandler(logs, nil))))
	first := h.resolve(dm("1"))
	key, sid := first.Entry.SessionKey, first.Entry.SessionID
	h.appendMessage(sid, "user", "hello there")
	h.appendMessage(sid, "assistant", "general kenobi")
	// Each row that adds up its own totals gets a fresh lane or session.
	fresh := func(chat string) (string, string) {
		r := h.resolve(dm(chat))
		return r.Entry.SessionKey, r.Entry.SessionID
	}
	sumKey, _ := fresh("sum-cost")
	tokKey, _ := fresh("sum-tokens")
	totKey, _ := fresh("sum-total")
	_, patchTok := fresh("patch-tokens")
	_, patchCost := fresh("patch-cost")

	const maxInt64 = "9223372036854775807"
	const maxTokens = 1 << 53
	title50K := strings.Repeat("T", 50<<10)

	rows := []doorRow{
		// 1. The poison pill: a cost that makes the lane's sum +Inf.
		{name: "turn cost 1e308", method: "POST", path: lane(key, "/turns"), body: `{"estimated_cost_usd":1e308}`, status: 400, code: "invalid_argument"},
		{name: "turn cost 1e308 again", method: "POST", path: lane(key, "/turns"), body: `{"estimated_cost_usd":1e308}`, status: 400, code: "invalid_argument"},
		{name: "turn cost past 1e9", method: "POST", path: lane(key, "/turns"), body: `{"estimated_cost_usd":1000000000.5}`, status: 400, code: "invalid_argument"},
		{name: "turn costs whose sum passes 1e9",
			given:  []request{{method: "POST", path: lane(sumKey, "/turns"), body: `{"estimated_cost_usd":6e8}`}},
			method: "POST", path: lane(sumKey, "/turns"), body: `{"estimated_cost_usd":6e8}`, status: 400, code: "invalid_argument"},

		// 4. Token totals that wrapped.
		{name: "turn input_tokens max int64", method: "POST", path: lane(key, "/turns"), body: `{"input_tokens":` + maxInt64 + `}`, status: 400, code: "invalid_argument"},
		{name: "turn output_tokens past 2^53", method: "POST", path: lane(key, "/turns"), body: fmt.Sprintf(`{"output_tokens":%d}`, maxTokens+1), status: 400, code: "invalid_argument"},
		{name: "turn tokens whose sum passes 2^53",
			given:  []request{{method: "POST", path: lane(tokKey, "/turns"), body: fmt.Sprintf(`{"cache_read_tokens":%d}`, maxTokens)}},
			method: "POST", path: lane(tokKey, "/turns"), body: `{"cache_read_tokens":1}`, status: 400, code: "invalid_argument"},
		{name: "turn total_tokens would pass 2^53",
			given:  []request{{method: "POST", path: lane(totKey, "/turns"), body: fmt.Sprintf(`{"input_tokens":%d}`, maxTokens)}},
			method: "POST", path: lane(totKey, "/turns"), body: `{"output_tokens":1}`, status: 400, code: "invalid_argument"},
		{name: "touch last_prompt_tokens past 2^53", method: "POST", path: lane(key, "/touch"), body: fmt.Sprintf(`{"last_prompt_tokens":%d}`, maxTokens+1), status: 400, code: "invalid_argument"},

		// 2. Metadata sums that broke recent and export.
		{name: "PATCH input_tokens max int64", method: "PATCH", path: transcript(sid, ""), body: `{"input_tokens":` + maxInt64 + `}`, status: 400, code: "invalid_argument"},
		{name: "PATCH input_tokens max int64 again", method: "PATCH", path: transcript(sid, ""), body: `{"input_tokens":` + maxInt64 + `}`, status: 400, code: "invalid_argument"},
		{name: "PATCH tokens whose sum passes 2^53",
			given:  []request{{method: "PATCH", path: transcript(patchTok, ""), body: fmt.Sprintf(`{"input_tokens":%d}`, maxTokens)}},
			method: "PATCH", path: transcript(patchTok, ""), body: `{"input_tokens":1}`, status: 400, code: "invalid_argument"},
		{name: "PATCH api_call_count past 2^53", method: "PATCH", path: transcript(sid, ""), body: fmt.Sprintf(`{"api_call_count":%d}`, maxTokens+1), status: 400, code: "invalid_argument"},
		{name: "PATCH estimated_cost_usd 1e308", method: "PATCH", path: transcript(sid, ""), body: `{"estimated_cost_usd":1e308}`, status: 400, code: "invalid_argument"},
		{name: "PATCH actual_cost_usd negative", method: "PATCH", path: transcript(sid, ""), body: `{"actual_cost_usd":-1}`, status: 400, code: "invalid_argument"},
		{name: "PATCH costs whose sum passes 1e9",
			given:  []request{{method: "PATCH", path: transcript(patchCost, ""), body: `{"actual_cost_usd":6e8}`}},
			method: "PATCH", path: transcript(patchCost, ""), body: `{"actual_cost_usd":6e8}`, status: 400, code: "invalid_argument"},
		{name: "PATCH model with NUL", method: "PATCH", path: transcript(sid, ""), body: `{"model":"gpt\u0000"}`, status: 400, code: "invalid_argument"},

		// 3. Invalid UTF-8 and lone surrogates.
		{name: "content with invalid UTF-8", method: "POST", path: transcript(sid, "/messages"), body: "{\"role\":\"user\",\"content\":\"a\xff\xfeb\"}", status: 400, code: "invalid_argument"},
		{name: "content with a lone high surrogate", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","content":"\ud800"}`, status: 400, code: "invalid_argument"},
		{name: "content with a lone low surrogate", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","content":"x\uDC00y"}`, status: 400, code: "invalid_argument"},
		{name: "content with a high surrogate before a letter", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","content":"\ud800\u0041"}`, status: 400, code: "invalid_argument"},
		{name: "content with two high surrogates", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","content":"\ud800\ud800"}`, status: 400, code: "invalid_argument"},
		{name: "lone surrogate deep in raw content", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","content":[{"type":"text","text":"\udfff"}]}`, status: 400, code: "invalid_argument"},
		{name: "lone surrogate in a queued message", method: "POST", path: lane(key, "/queue"), body: `{"kind":"queue","message":{"text":"\ud800"}}`, status: 400, code: "invalid_argument"},
		{name: "invalid UTF-8 in a chat name", method: "POST", path: "/v1/sessions/resolve", body: "{\"source\":{\"platform\":\"telegram\",\"chat_id\":\"9\",\"chat_name\":\"\xc3\"}}", status: 400, code: "invalid_argument"},
		{name: "invalid UTF-8 in a key", method: "GET", path: "/v1/sessions/agent%3Amain%FF", status: 400, code: "invalid_argument"},
		{name: "invalid UTF-8 in a title query", method: "GET", path: "/v1/titles/resolve?title=%FF", status: 400, code: "invalid_argument"},
		{name: "invalid UTF-8 in a search query", method: "GET", path: "/v1/search?q=%FE", status: 400, code: "invalid_argument"},

		// 4. NUL where a string becomes a key or an identifier.
		{name: "NUL in chat_id", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":"telegram","chat_id":"9\u0000"}}`, status: 400, code: "invalid_argument"},
		{name: "NUL in platform", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":"tele\u0000gram","chat_id":"9"}}`, status: 400, code: "invalid_argument"},
		{name: "NUL in user_id", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":"telegram","chat_id":"9","user_id":"\u0000"}}`, status: 400, code: "invalid_argument"},
		{name: "NUL in thread_id", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":"telegram","chat_id":"9","thread_id":"t\u0000"}}`, status: 400, code: "invalid_argument"},
		{name: "NUL in a key", method: "POST", path: "/v1/sessions/agent%3Amain%00/touch", status: 400, code: "invalid_argument"},
		{name: "NUL in a turn id", method: "POST", path: lane(key, "/turns/start"), body: `{"turn_id":"t\u0000"}`, status: 400, code: "invalid_argument"},
		{name: "NUL in an end reason", method: "POST", path: transcript(sid, "/end"), body: `{"reason":"done\u0000"}`, status: 400, code: "invalid_argument"},
		{name: "NUL in a resume reason", method: "POST", path: lane(key, "/resume-pending"), body: `{"reason":"x\u0000"}`, status: 400, code: "invalid_argument"},
		{name: "an empty resume reason", method: "POST", path: lane(key, "/resume-pending"), body: `{"reason":""}`, status: 400, code: "invalid_argument"},
		{name: "NUL in a tool name", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"tool","content":"x","tool_name":"t\u0000"}`, status: 400, code: "invalid_argument"},

		// 4. Duplicate names: encoding/json keeps the last one.
		{name: "duplicate role", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","role":"system","content":"x"}`, status: 400, code: "invalid_argument"},
		{name: "duplicate role, other case", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","Role":"user","content":"x"}`, status: 400, code: "invalid_argument"},
		{name: "duplicate role, escaped", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","\u0072ole":"user","content":"x"}`, status: 400, code: "invalid_argument"},
		{name: "duplicate chat_id in source", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":"telegram","chat_id":"9","chat_id":"10"}}`, status: 400, code: "invalid_argument"},
		{name: "duplicate source", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":"telegram","chat_id":"9"},"source":{"platform":"telegram","chat_id":"10"}}`, status: 400, code: "invalid_argument"},
		{name: "duplicate name in raw content", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","content":[{"type":"text","type":"image"}]}`, status: 400, code: "invalid_argument"},
		{name: "duplicate estimated_cost_usd", method: "POST", path: lane(key, "/turns"), body: `{"estimated_cost_usd":0,"estimated_cost_usd":1e308}`, status: 400, code: "invalid_argument"},
		{name: "duplicate n", method: "POST", path: transcript(sid, "/rewind"), body: `{"n":1,"n":2}`, status: 400, code: "invalid_argument"},

		// Strict decoding: trailing data that More does not see, a body
		// that is not an object.
		{name: "trailing ]", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","content":"x"}]`, status: 400, code: "invalid_argument"},
		{name: "trailing }", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","content":"x"} }`, status: 400, code: "invalid_argument"},
		{name: "null body", method: "POST", path: lane(key, "/turns"), body: `null`, status: 400, code: "invalid_argument"},
		{name: "misspelt field", method: "POST", path: lane(key, "/turns"), body: `{"input_token":5}`, status: 400, code: "invalid_argument"},

		// 4. n >= 1.
		{name: "rewind n 0", method: "POST", path: transcript(sid, "/rewind"), body: `{"n":0}`, status: 400, code: "invalid_argument"},
		{name: "rewind n -1", method: "POST", path: transcript(sid, "/rewind"), body: `{"n":-1}`, status: 400, code: "invalid_argument"},

		// 4. Routes that take no body accept only none or {}.
		{name: "garbage on clear", method: "POST", path: transcript(sid, "/clear"), body: `garbage`, status: 400, code: "invalid_argument"},
		{name: "a field on clear", method: "POST", path: transcript(sid, "/clear"), body: `{"all":true}`, status: 400, code: "invalid_argument"},
		{name: "garbage on delete", method: "DELETE", path: transcript(sid, ""), body: `garbage`, status: 400, code: "invalid_argument"},
		{name: "garbage on restart", method: "POST", path: "/v1/admin/restart", body: `garbage`, status: 400, code: "invalid_argument"},
		{name: "garbage on DELETE resume-pending", method: "DELETE", path: lane(key, "/resume-pending"), body: `garbage`, status: 400, code: "invalid_argument"},
		{name: "garbage on suspend", method: "POST", path: lane(key, "/suspend"), body: `garbage`, status: 400, code: "invalid_argument"},
		{name: "garbage on queue/next", method: "POST", path: lane(key, "/queue/next"), body: `[1]`, status: 400, code: "invalid_argument"},

		// Other bounds.
		{name: "active processes past a million", method: "PUT", path: lane(key, "/active-processes"), body: `{"count":1000001}`, status: 400, code: "invalid_argument"},
		{name: "switch without a session id", method: "POST", path: lane(key, "/switch"), body: `{}`, status: 400, code: "invalid_argument"},
		{name: "clock advance past 100 years", method: "POST", path: "/v1/clock", body: `{"advance":"876001h"}`, status: 400, code: "invalid_argument"},
		{name: "prune-sessions source over 1024 bytes", method: "POST", path: "/v1/maintenance/prune-sessions", body: map[string]any{"older_than_days": 1, "source": strings.Repeat("s", 1025)}, status: 400, code: "invalid_argument"},

		// 5. Query parameters.
		{name: "titles/resolve with a 50 KB title", method: "GET", path: "/v1/titles/resolve?title=" + title50K, status: 400, code: "invalid_argument"},
		{name: "titles/next with a 50 KB title", method: "GET", path: "/v1/titles/next?title=" + title50K, status: 400, code: "invalid_argument"},
		{name: "title query with NUL", method: "GET", path: "/v1/titles/next?title=a%00", status: 400, code: "invalid_argument"},
		{name: "export source over 1024 bytes", method: "GET", path: "/v1/export?source=" + strings.Repeat("s", 1025), status: 400, code: "invalid_argument"},
		{name: "search role over 1024 bytes", method: "GET", path: "/v1/search?q=x&role=" + strings.Repeat("r", 1025), status: 400, code: "invalid_argument"},
		{name: "search with 101 sources", method: "GET", path: "/v1/search?q=x&source=" + strings.Repeat("s,", 101), status: 400, code: "invalid_argument"},
		{name: "session_id query over 1024 bytes", method: "GET", path: "/v1/sessions?session_id=" + strings.Repeat("1", 1025), status: 400, code: "invalid_argument"},
	}

	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			h := h.with(t)
			for _, g := range row.given {
				if r := h.send(g); r.status/100 != 2 {
					t.Fatalf("given %s %s = %d %s, want 2xx", g.method, g.path, r.status, r.body)
				}
			}
			before := h.head()
			r := h.send(request{method: row.method, path: row.path, body: row.body})
			if after := h.head(); after != before {
				t.Errorf("%s %s: head = %d after, %d before, want the log unchanged", row.method, row.path, after, before)
			}
			if r.status != row.status {
				t.Fatalf("%s %s = %d %s, want %d", row.method, row.path, r.status, r.body, row.status)
			}
			code, err := errorBody(r)
			if err != nil {
				t.Fatalf("%s %s: body %s is not the error shape: %v", row.method, row.path, r.body, err)
			}
			if code != row.code {
				t.Errorf("%s %s = error.code %q, want %q", row.method, row.path, code, row.code)
			}
			if !utf8.Valid(r.body) {
				t.Errorf("%s %s: answer is not valid UTF-8: %q", row.method, row.path, r.body)
			}
		})
	}

	if strings.Contains(logs.String(), title50K[:1024]) {
		t.Errorf("the log holds the 50 KB title:\n%.2000s", logs.String())
	}

	// What the findings broke answers, in valid UTF-8.
	for _, path := range []string{
		lane(key, ""), lane(sumKey, ""), transcript(sid, ""), transcript(patchTok, ""), transcript(patchCost, ""),
		"/v1/transcripts/recent", "/v1/export", "/v1/events", "/v1/stats/tokens", transcript(sid, "/export"),
	} {
		r := h.do("GET", path, nil)
		if r.status != http.StatusOK || !utf8.Valid(r.body) || len(bytes.TrimSpace(r.body)) == 0 {
			t.Errorf("GET %s = %d %.300q, want 200 with a valid UTF-8 body", path, r.status, r.body)
		}
	}

	// Valid requests are still accepted.
	for _, ok := range []request{
		{method: "POST", path: lane(key, "/turns"), body: `{"input_tokens":10,"output_tokens":5,"estimated_cost_usd":0.25}`},
		{method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","content":"smile \ud83d\ude00, caf\u00e9, 日本"}`},
		{method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`},
		{method: "PATCH", path: transcript(sid, ""), body: `{"input_tokens":3,"estimated_cost_usd":0.01,"model":"gpt"}`},
		{method: "POST", path: transcript(sid, "/rewind"), body: `{"n":1}`},
		{method: "POST", path: transcript(sid, "/rewind")},
		{method: "DELETE", path: lane(key, "/resume-pending")},
		{method: "DELETE", path: lane(key, "/resume-pending"), body: `{}`},
		{method: "POST", path: transcript(sid, "/clear"), body: ` { } `},
		{method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":"telegram","chat_id":"ünï","chat_name":"Ça va \ud83d\ude00"}}`},
		{method: "GET", path: "/v1/titles/next?title=" + url.QueryEscape("Plan ünï")},
	} {
		if r := h.send(ok); r.status/100 != 2 {
			t.Errorf("%s %s %v = %d %s, want 2xx", ok.method, ok.path, ok.body, r.status, r.body)
		}
	}
}

// doorRoutes are the routes that take a body (or must refuse one), on a
// lane and a session of the fuzz harness.
func doorRoutes(key, sid string) []request {
	return []request{
		{method: "POST", path: "/v1/sessions/resolve"},
		{method: "POST", path: lane(key, "/touch")},
		{method: "POST", path: lane(key, "/turns/start")},
		{method: "POST", path: lane(key, "/turns")},
		{method: "POST", path: lane(key, "/reset")},
		{method: "POST", path: lane(key, "/switch")},
		{method: "POST", path: lane(key, "/suspend")},
		{method: "POST", path: lane(key, "/resume-pending")},
		{method: "DELETE", path: lane(key, "/resume-pending")},
		{method: "PUT", path: lane(key, "/active-processes")},
		{method: "POST", path: lane(key, "/queue")},
		{method: "POST", path: lane(key, "/queue/next")},
		{method: "DELETE", path: lane(key, "/queue")},
		{method: "POST", path: lane(key, "/notice/ack")},
		{method: "POST", path: transcript(sid, "/messages")},
		{method: "PUT", path: transcript(sid, "/messages")},
		{method: "POST", path: transcript(sid, "/rewind")},
		{method: "PUT", path: transcript(sid, "/title")},
		{method: "PATCH", path: transcript(sid, "")},
		{method: "POST", path: transcript(sid, "/clear")},
		{method: "POST", path: transcript(sid, "/end")},
		{method: "DELETE", path: transcript(sid, "")},
		{method: "POST", path: "/v1/recovery/suspend-recently-active"},
		{method: "POST", path: "/v1/maintenance/prune-entries"},
		{method: "POST", path: "/v1/maintenance/prune-sessions"},
		{method: "POST", path: "/v1/admin/restart"},
	}
}

// FuzzRefusalChangesNothing sends arbitrary bodies to every route that
// takes one, over real HTTP: no answer is a 500, every answer is valid
// UTF-8, and a refusal (4xx, 5xx) appends nothing.
func FuzzRefusalChangesNothing(f *testing.F) {
	h := newHarness(f)
	first := h.resolve(dm("1"))
	h.appendMessage(first.Entry.SessionID, "user", "hello there")
	routes := doorRoutes(first.Entry.SessionKey, first.Entry.SessionID)
	seeds := []string{
		`{"estimated_cost_usd":1e308}`, `{"input_tokens":9223372036854775807}`,
		"{\"role\":\"user\",\"content\":\"a\xff\xfeb\"}", `{"role":"user","content":"\ud800"}`,
		`{"source":{"platform":"telegram","chat_id":"9\u0000"}}`, `{"role":"user","role":"system","content":"x"}`,
		`{"n":0}`, `{"n":-1}`, `garbage`, `{}`, ``,
	}
	for i := range routes {
		for _, s := range seeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		h := h.with(t)
		rq := routes[int(which)%len(routes)]
		rq.body = body
		before := h.head()
		r := h.send(rq)
		if r.status == http.StatusInternalServerError {
			t.Fatalf("%s %s %q = 500 %s", rq.method, rq.path, body, r.body)
		}
		if !utf8.Valid(r.body) {
			t.Fatalf("%s %s %q: answer %q is not valid UTF-8", rq.method, rq.path, body, r.body)
		}
		if r.status < 400 {
			return
		}
		if after := h.head(); after != before {
			t.Fatalf("%s %s %q = %d, head %d after, %d before: a refusal appended", rq.method, rq.path, body, r.status, after, before)
		}
		if _, err := errorBody(r); err != nil {
			t.Fatalf("%s %s %q = %d %s: not the error shape: %v", rq.method, rq.path, body, r.status, r.body, err)
		}
	})
}
