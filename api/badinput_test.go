package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// badInput is one hostile or mistaken request. A rejected request answers
// the error shape with the code of its status and changes nothing; a few
// rows (search junk) are not errors at all and answer 200.
type badInput struct {
	name    string
	method  string
	path    string
	body    any
	header  map[string]string
	noAuth  bool
	status  int
	code    string                             // "" for a 2xx row
	check   func(t *testing.T, body []byte)    // extra check of a 2xx row
	prepare func(t *testing.T, h *harness) any // a body built on the harness
}

func emptyResults(t *testing.T, body []byte) {
	t.Helper()
	var got struct {
		Results *[]json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(body, &got); err != nil || got.Results == nil || len(*got.Results) != 0 {
		t.Errorf("body = %s, want {\"results\": []}", body)
	}
}

// TestBadInput is the table of what a client can get wrong. Every row
// asserts the status, error.code, the documented error shape, and that the
// event log did not move (Head before == after). A token is configured, so
// the auth rows are real; every other row sends it.
func TestBadInput(t *testing.T) {
	const token = "s3cret-token"
	h := newHarness(t, withToken(token))
	first := h.resolve(dm("1"))
	key, sid := first.Entry.SessionKey, first.Entry.SessionID
	other := h.resolve(dm("2")).Entry.SessionID
	h.appendMessage(sid, "user", "hello there")
	h.appendMessage(sid, "assistant", "general kenobi")
	h.call("PUT", transcript(other, "/title"), map[string]string{"title": "Taken"}, http.StatusOK, nil)

	validSource := map[string]any{"platform": "telegram", "chat_id": "9"}
	long := strings.Repeat("x", 1025)
	twoMiB := `{"source":{"platform":"telegram","chat_id":"` + strings.Repeat("x", 2<<20) + `"}}`
	unknownID := "20990101_000000_00000000"
	at := start.Format(time.RFC3339)

	rows := []badInput{
		// Auth (a token is configured).
		{name: "missing token", method: "POST", path: "/v1/sessions/resolve", body: map[string]any{"source": validSource}, noAuth: true, status: 401, code: "unauthorized"},
		{name: "wrong token", method: "POST", path: "/v1/sessions/resolve", body: map[string]any{"source": validSource}, header: map[string]string{"Authorization": "Bearer wrong"}, status: 401, code: "unauthorized"},
		{name: "token with another scheme", method: "POST", path: "/v1/sessions/resolve", body: map[string]any{"source": validSource}, header: map[string]string{"Authorization": "Basic " + token}, status: 401, code: "unauthorized"},
		{name: "token prefix", method: "POST", path: "/v1/sessions/resolve", body: map[string]any{"source": validSource}, header: map[string]string{"Authorization": "Bearer " + token[:5]}, status: 401, code: "unauthorized"},
		{name: "missing token on a read", method: "GET", path: "/v1/events", noAuth: true, status: 401, code: "unauthorized"},
		{name: "missing token on the clock", method: "POST", path: "/v1/clock", body: map[string]string{"advance": "1h"}, noAuth: true, status: 401, code: "unauthorized"},
		{name: "missing token on the metrics", method: "GET", path: "/metrics", noAuth: true, status: 401, code: "unauthorized"},
		{name: "missing token on the OpenAPI document", method: "GET", path: "/openapi.json", noAuth: true, status: 401, code: "unauthorized"},

		// Bodies.
		{name: "malformed JSON", method: "POST", path: "/v1/sessions/resolve", body: `{"source":`, status: 400, code: "invalid_argument"},
		{name: "not JSON", method: "POST", path: "/v1/sessions/resolve", body: `hello`, status: 400, code: "invalid_argument"},
		{name: "JSON array", method: "POST", path: "/v1/sessions/resolve", body: `[]`, status: 400, code: "invalid_argument"},
		{name: "trailing data", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":"telegram","chat_id":"9"}} {}`, status: 400, code: "invalid_argument"},
		{name: "empty body", method: "POST", path: "/v1/sessions/resolve", body: ``, status: 400, code: "invalid_argument"},
		{name: "wrong type: platform a number", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":1,"chat_id":"9"}}`, status: 400, code: "invalid_argument"},
		{name: "wrong type: force_new a string", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":"telegram","chat_id":"9"},"force_new":"yes"}`, status: 400, code: "invalid_argument"},
		{name: "wrong type: source a string", method: "POST", path: "/v1/sessions/resolve", body: `{"source":"telegram:9"}`, status: 400, code: "invalid_argument"},
		{name: "unknown field", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":"telegram","chat_id":"9"},"bogus":1}`, status: 400, code: "invalid_argument"},
		{name: "unknown field in source", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":"telegram","chat_id":"9","bogus":1}}`, status: 400, code: "invalid_argument"},
		{name: "missing source", method: "POST", path: "/v1/sessions/resolve", body: `{}`, status: 400, code: "invalid_argument"},
		{name: "missing platform", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"chat_id":"9"}}`, status: 400, code: "invalid_argument"},
		{name: "empty platform", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":"","chat_id":"9"}}`, status: 400, code: "invalid_argument"},
		{name: "missing chat_id", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":"telegram"}}`, status: 400, code: "invalid_argument"},
		{name: "null chat_id", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":"telegram","chat_id":null}}`, status: 400, code: "invalid_argument"},
		{name: "missing platform, empty chat_id", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"chat_id":""}}`, status: 400, code: "invalid_argument"},
		{name: "bad chat_type", method: "POST", path: "/v1/sessions/resolve", body: `{"source":{"platform":"telegram","chat_id":"9","chat_type":"room"}}`, status: 400, code: "invalid_argument"},
		{name: "source field over 1024 bytes", method: "POST", path: "/v1/sessions/resolve", body: map[string]any{"source": map[string]string{"platform": "telegram", "chat_id": long}}, status: 400, code: "invalid_argument"},
		{name: "2 MiB body", method: "POST", path: "/v1/sessions/resolve", body: twoMiB, status: 413, code: "payload_too_large"},
		{name: "2 MiB body, chunked", method: "POST", path: "/v1/sessions/resolve", prepare: func(*testing.T, *harness) any { return io.MultiReader(strings.NewReader(twoMiB)) }, status: 413, code: "payload_too_large"},
		{name: "2 MiB message", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","content":"` + strings.Repeat("y", 2<<20) + `"}`, status: 413, code: "payload_too_large"},

		// Lanes.
		{name: "unknown session key", method: "GET", path: lane("agent:main:telegram:dm:nobody", ""), status: 404, code: "not_found"},
		{name: "touch an unknown lane", method: "POST", path: lane("agent:main:telegram:dm:nobody", "/touch"), status: 404, code: "not_found"},
		{name: "start a turn on an unknown lane", method: "POST", path: lane("agent:main:telegram:dm:nobody", "/turns/start"), status: 404, code: "not_found"},
		{name: "suspend an unknown lane", method: "POST", path: lane("agent:main:telegram:dm:nobody", "/suspend"), status: 404, code: "not_found"},
		{name: "unknown session_id", method: "GET", path: "/v1/sessions?session_id=" + unknownID, status: 404, code: "not_found"},
		{name: "negative last_prompt_tokens", method: "POST", path: lane(key, "/touch"), body: `{"last_prompt_tokens":-1}`, status: 400, code: "invalid_argument"},
		{name: "negative input_tokens", method: "POST", path: lane(key, "/turns"), body: `{"input_tokens":-5}`, status: 400, code: "invalid_argument"},
		{name: "negative output_tokens", method: "POST", path: lane(key, "/turns"), body: `{"output_tokens":-1}`, status: 400, code: "invalid_argument"},
		{name: "negative cache_read_tokens", method: "POST", path: lane(key, "/turns"), body: `{"cache_read_tokens":-1}`, status: 400, code: "invalid_argument"},
		{name: "negative cache_write_tokens", method: "POST", path: lane(key, "/turns"), body: `{"cache_write_tokens":-1}`, status: 400, code: "invalid_argument"},
		{name: "negative estimated_cost_usd", method: "POST", path: lane(key, "/turns"), body: `{"estimated_cost_usd":-0.5}`, status: 400, code: "invalid_argument"},
		{name: "negative last_prompt_tokens on a turn", method: "POST", path: lane(key, "/turns"), body: `{"last_prompt_tokens":-1}`, status: 400, code: "invalid_argument"},
		{name: "token count a string", method: "POST", path: lane(key, "/turns"), body: `{"input_tokens":"ten"}`, status: 400, code: "invalid_argument"},
		{name: "token count a fraction", method: "POST", path: lane(key, "/turns"), body: `{"input_tokens":1.5}`, status: 400, code: "invalid_argument"},
		{name: "token count beyond int64", method: "POST", path: lane(key, "/turns"), body: `{"input_tokens":99999999999999999999}`, status: 400, code: "invalid_argument"},
		{name: "turn_id over 200 bytes", method: "POST", path: lane(key, "/turns/start"), body: map[string]string{"turn_id": strings.Repeat("t", 201)}, status: 400, code: "invalid_argument"},
		{name: "resume reason too long", method: "POST", path: lane(key, "/resume-pending"), body: `{"reason":"` + strings.Repeat("x", 201) + `"}`, status: 400, code: "invalid_argument"},
		{name: "resume reason a number", method: "POST", path: lane(key, "/resume-pending"), body: `{"reason":3}`, status: 400, code: "invalid_argument"},
		{name: "negative active-process count", method: "PUT", path: lane(key, "/active-processes"), body: `{"count":-1}`, status: 400, code: "invalid_argument"},
		{name: "active-process count a string", method: "PUT", path: lane(key, "/active-processes"), body: `{"count":"two"}`, status: 400, code: "invalid_argument"},
		{name: "active-process count a fraction", method: "PUT", path: lane(key, "/active-processes"), body: `{"count":1.5}`, status: 400, code: "invalid_argument"},
		{name: "active-process count missing", method: "PUT", path: lane(key, "/active-processes"), body: `{}`, status: 400, code: "invalid_argument"},
		{name: "active-process count null", method: "PUT", path: lane(key, "/active-processes"), body: `{"count":null}`, status: 400, code: "invalid_argument"},
		{name: "switch to ../x", method: "POST", path: lane(key, "/switch"), body: `{"session_id":"../x"}`, status: 400, code: "invalid_argument"},
		{name: "switch without a body", method: "POST", path: lane(key, "/switch"), status: 400, code: "invalid_argument"},
		{name: "reset display_name over 1024 bytes", method: "POST", path: lane(key, "/reset"), body: map[string]string{"display_name": long}, status: 400, code: "invalid_argument"},
		{name: "negative active_minutes", method: "GET", path: "/v1/sessions?active_minutes=-5", status: 400, code: "invalid_argument"},
		{name: "active_minutes not a number", method: "GET", path: "/v1/sessions?active_minutes=ten", status: 400, code: "invalid_argument"},
		{name: "negative max_age_seconds", method: "POST", path: "/v1/recovery/suspend-recently-active", body: `{"max_age_seconds":-1}`, status: 400, code: "invalid_argument"},
		{name: "prune-entries without max_age_days", method: "POST", path: "/v1/maintenance/prune-entries", body: `{}`, status: 400, code: "invalid_argument"},
		{name: "max_age_days over 100 years", method: "POST", path: "/v1/maintenance/prune-entries", body: `{"max_age_days":36501}`, status: 400, code: "invalid_argument"},

		// Keys in the path. A key escape that is valid for the URL is
		// decoded once: %25zz is the key "%zz", legal and unknown. A key
		// that decodes to nothing or to more than 1024 bytes is refused.
		{name: "key %25zz", method: "GET", path: "/v1/sessions/%25zz", status: 404, code: "not_found"},
		{name: "key %25zz, touched", method: "POST", path: "/v1/sessions/%25zz/touch", status: 404, code: "not_found"},
		{name: "empty key", method: "POST", path: "/v1/sessions//touch", status: 400, code: "invalid_argument"},
		{name: "key over 1024 bytes", method: "POST", path: lane(long, "/touch"), status: 400, code: "invalid_argument"},

		// Events and time travel.
		{name: "events limit 0", method: "GET", path: "/v1/events?limit=0", status: 400, code: "invalid_argument"},
		{name: "events limit 1001", method: "GET", path: "/v1/events?limit=1001", status: 400, code: "invalid_argument"},
		{name: "events limit not a number", method: "GET", path: "/v1/events?limit=all", status: 400, code: "invalid_argument"},
		{name: "negative from_position", method: "GET", path: "/v1/events?from_position=-1", status: 400, code: "invalid_argument"},
		{name: "negative from_position, following", method: "GET", path: "/v1/events?follow=1&from_position=-1", status: 400, code: "invalid_argument"},
		{name: "lane events limit 5000", method: "GET", path: lane(key, "/events?limit=5000"), status: 400, code: "invalid_argument"},
		{name: "lane events from_version not a number", method: "GET", path: lane(key, "/events?from_version=first"), status: 400, code: "invalid_argument"},
		{name: "events of an unknown lane", method: "GET", path: lane("agent:main:telegram:dm:nobody", "/events"), status: 404, code: "not_found"},
		{name: "state without at_version or at_time", method: "GET", path: lane(key, "/state"), status: 400, code: "invalid_argument"},
		{name: "state with both", method: "GET", path: lane(key, "/state?at_version=1&at_time="+url.QueryEscape(at)), status: 400, code: "invalid_argument"},
		{name: "at_version not a number", method: "GET", path: lane(key, "/state?at_version=latest"), status: 400, code: "invalid_argument"},
		{name: "at_time not RFC 3339", method: "GET", path: lane(key, "/state?at_time=yesterday"), status: 400, code: "invalid_argument"},
		{name: "at_version past the end", method: "GET", path: lane(key, "/state?at_version=99"), status: 404, code: "not_found"},
		{name: "state of an unknown lane", method: "GET", path: lane("agent:main:telegram:dm:nobody", "/state?at_version=1"), status: 404, code: "not_found"},

		// Session ids in the path.
		{name: "../ in a session id, percent-encoded", method: "GET", path: "/v1/transcripts/..%2F..%2Fetc/messages", status: 400, code: "invalid_argument"},
		{name: "../ in a session id, appended to", method: "POST", path: "/v1/transcripts/..%2F..%2Fetc/messages", body: `{"role":"user","content":"x"}`, status: 400, code: "invalid_argument"},
		{name: "../ in a session id, titled", method: "PUT", path: "/v1/transcripts/..%2Fetc/title", body: `{"title":"x"}`, status: 400, code: "invalid_argument"},
		{name: ".. as a session id", method: "GET", path: "/v1/transcripts/../messages", status: 400, code: "invalid_argument"},
		{name: "%2E%2E as a session id", method: "DELETE", path: "/v1/transcripts/%2E%2E", status: 400, code: "invalid_argument"},
		{name: "backslash in a session id", method: "GET", path: "/v1/transcripts/..%5C..%5Cwindows/export", status: 400, code: "invalid_argument"},
		{name: "drive letter session id", method: "GET", path: "/v1/transcripts/C:evil/lineage", status: 400, code: "invalid_argument"},
		{name: "control character in a session id", method: "GET", path: "/v1/transcripts/a%00b", status: 400, code: "invalid_argument"},
		{name: "unknown session id", method: "GET", path: transcript(unknownID, "/messages"), status: 404, code: "not_found"},
		{name: "message to an unknown session", method: "POST", path: transcript(unknownID, "/messages"), body: `{"role":"user","content":"x"}`, status: 404, code: "not_found"},
		{name: "lineage of an unknown session", method: "GET", path: transcript(unknownID, "/lineage"), status: 404, code: "not_found"},
		{name: "export of an unknown session", method: "GET", path: transcript(unknownID, "/export"), status: 404, code: "not_found"},

		// Transcripts.
		{name: "bad role", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"wizard","content":"x"}`, status: 400, code: "invalid_argument"},
		{name: "missing role", method: "POST", path: transcript(sid, "/messages"), body: `{"content":"x"}`, status: 400, code: "invalid_argument"},
		{name: "negative token_count", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","content":"x","token_count":-1}`, status: 400, code: "invalid_argument"},
		{name: "unknown message field", method: "POST", path: transcript(sid, "/messages"), body: `{"role":"user","content":"x","mood":"happy"}`, status: 400, code: "invalid_argument"},
		{name: "rewrite without messages", method: "PUT", path: transcript(sid, "/messages"), body: `{}`, status: 400, code: "invalid_argument"},
		{name: "rewrite with a bad role", method: "PUT", path: transcript(sid, "/messages"), body: `{"messages":[{"role":"user","content":"a"},{"role":"ghost"}]}`, status: 400, code: "invalid_argument"},
		{name: "title collision", method: "PUT", path: transcript(sid, "/title"), body: `{"title":"Taken"}`, status: 409, code: "conflict"},
		{name: "title collision after sanitising", method: "PUT", path: transcript(sid, "/title"), body: `{"title":"  Taken\u200b "}`, status: 409, code: "conflict"},
		{name: "title over 100 characters", method: "PUT", path: transcript(sid, "/title"), body: map[string]string{"title": strings.Repeat("t", 101)}, status: 400, code: "invalid_argument"},
		{name: "title missing", method: "PUT", path: transcript(sid, "/title"), body: `{}`, status: 400, code: "invalid_argument"},
		{name: "title a number", method: "PUT", path: transcript(sid, "/title"), body: `{"title":7}`, status: 400, code: "invalid_argument"},
		{name: "rewind n over 10000", method: "POST", path: transcript(sid, "/rewind"), body: `{"n":10001}`, status: 400, code: "invalid_argument"},
		{name: "rewind n a string", method: "POST", path: transcript(sid, "/rewind"), body: `{"n":"all"}`, status: 400, code: "invalid_argument"},
		{name: "unknown message format", method: "GET", path: transcript(sid, "/messages?format=xml"), status: 400, code: "invalid_argument"},
		{name: "include_inactive not a boolean", method: "GET", path: transcript(sid, "/messages?include_inactive=maybe"), status: 400, code: "invalid_argument"},
		{name: "a session its own parent", method: "PATCH", path: transcript(sid, ""), body: map[string]string{"parent_session_id": sid}, status: 400, code: "invalid_argument"},
		{name: "an unknown parent", method: "PATCH", path: transcript(sid, ""), body: map[string]string{"parent_session_id": unknownID}, status: 404, code: "not_found"},
		{name: "negative metadata tokens", method: "PATCH", path: transcript(sid, ""), body: `{"input_tokens":-1}`, status: 400, code: "invalid_argument"},
		{name: "end without a reason", method: "POST", path: transcript(sid, "/end"), body: `{}`, status: 400, code: "invalid_argument"},
		{name: "end reason over 64 bytes", method: "POST", path: transcript(sid, "/end"), body: map[string]string{"reason": strings.Repeat("r", 65)}, status: 400, code: "invalid_argument"},
		{name: "titles/resolve without a title", method: "GET", path: "/v1/titles/resolve", status: 400, code: "invalid_argument"},
		{name: "titles/next without a title", method: "GET", path: "/v1/titles/next?title=", status: 400, code: "invalid_argument"},
		{name: "unknown title", method: "GET", path: "/v1/titles/resolve?title=Nope", status: 404, code: "not_found"},
		{name: "prune-sessions without older_than_days", method: "POST", path: "/v1/maintenance/prune-sessions", body: `{"source":"telegram"}`, status: 400, code: "invalid_argument"},
		{name: "negative older_than_days", method: "POST", path: "/v1/maintenance/prune-sessions", body: `{"older_than_days":-1}`, status: 400, code: "invalid_argument"},

		// Search: limits are checked; junk queries are not errors.
		{name: "search limit 0", method: "GET", path: "/v1/search?q=hello&limit=0", status: 400, code: "invalid_argument"},
		{name: "search limit 501", method: "GET", path: "/v1/search?q=hello&limit=501", status: 400, code: "invalid_argument"},
		{name: "search negative offset", method: "GET", path: "/v1/search?q=hello&offset=-1", status: 400, code: "invalid_argument"},
		{name: "search unknown order", method: "GET", path: "/v1/search?q=hello&order=newest", status: 400, code: "invalid_argument"},
		{name: "search recent order", method: "GET", path: "/v1/search?q=hello&order=recent", status: 200},
		{name: "search rank order", method: "GET", path: "/v1/search?q=hello&order=rank", status: 200},
		{name: "search query over 4096 bytes", method: "GET", path: "/v1/search?q=" + strings.Repeat("q", 4097), status: 400, code: "invalid_argument"},
		{name: "recent limit 0", method: "GET", path: "/v1/transcripts/recent?limit=0", status: 400, code: "invalid_argument"},
		{name: "recent limit 1001", method: "GET", path: "/v1/transcripts/recent?limit=1001", status: 400, code: "invalid_argument"},
		{name: `FTS junk "`, method: "GET", path: "/v1/search?q=" + url.QueryEscape(`"`), status: 200, check: emptyResults},
		{name: "FTS junk ***", method: "GET", path: "/v1/search?q=" + url.QueryEscape("***"), status: 200, check: emptyResults},
		{name: "FTS junk a AND OR b", method: "GET", path: "/v1/search?q=" + url.QueryEscape("a AND OR b"), status: 200, check: emptyResults},
		{name: "FTS junk NEAR(", method: "GET", path: "/v1/search?q=" + url.QueryEscape("NEAR(hello"), status: 200, check: emptyResults},
		{name: "FTS junk column filter", method: "GET", path: "/v1/search?q=" + url.QueryEscape("content:zzz OR {x y}: ^q"), status: 200, check: emptyResults},
		// An invalid escape in the query string is not a request-line error:
		// url.ParseQuery drops the pair, so q is empty.
		{name: "invalid escape in q", method: "GET", path: "/v1/search?q=%zz", status: 200, check: emptyResults},

		// The clock.
		{name: "clock backwards", method: "POST", path: "/v1/clock", body: map[string]string{"now": start.Add(-time.Hour).Format(time.RFC3339)}, status: 400, code: "invalid_argument"},
		{name: "negative advance", method: "POST", path: "/v1/clock", body: `{"advance":"-1h"}`, status: 400, code: "invalid_argument"},
		{name: "advance not a duration", method: "POST", path: "/v1/clock", body: `{"advance":"soon"}`, status: 400, code: "invalid_argument"},
		{name: "now and advance", method: "POST", path: "/v1/clock", body: `{"now":"` + at + `","advance":"1h"}`, status: 400, code: "invalid_argument"},
		{name: "clock neither", method: "POST", path: "/v1/clock", body: `{}`, status: 400, code: "invalid_argument"},
		{name: "now not a time", method: "POST", path: "/v1/clock", body: `{"now":"tomorrow"}`, status: 400, code: "invalid_argument"},

		// Routing.
		{name: "unknown route", method: "GET", path: "/v1/nowhere", status: 404, code: "not_found"},
		{name: "unknown route outside /v1", method: "GET", path: "/admin", status: 404, code: "not_found"},
		{name: "method not allowed", method: "DELETE", path: "/v1/sessions/resolve", status: 405, code: "invalid_argument"},
	}

	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			h := h.with(t)
			body := row.body
			if row.prepare != nil {
				body = row.prepare(t, h)
			}
			before := h.head()
			r := h.send(request{method: row.method, path: row.path, body: body, header: row.header, noAuth: row.noAuth})
			if after := h.head(); after != before {
				t.Errorf("%s %s: head = %d after, %d before, want the log unchanged", row.method, row.path, after, before)
			}
			if r.status != row.status {
				t.Fatalf("%s %s = %d %s, want %d", row.method, row.path, r.status, r.body, row.status)
			}
			if row.code == "" {
				if row.check != nil {
					row.check(t, r.body)
				}
				return
			}
			code, err := errorBody(r)
			if err != nil {
				t.Fatalf("%s %s: body %s is not the error shape: %v", row.method, row.path, r.body, err)
			}
			if code != row.code {
				t.Errorf("%s %s = error.code %q, want %q", row.method, row.path, code, row.code)
			}
			if row.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s = 401 without WWW-Authenticate", row.method, row.path)
			}
		})
	}
}

// TestInvalidEscapeInRequestLine sends a request line whose path has an
// invalid percent-escape (%zz) over raw TCP. Go's net/http parses the
// request line (url.ParseRequestURI) before any handler runs and answers a
// plain-text "400 Bad Request" itself, closing the connection: no router,
// middleware or handler of hermes sees the request, so the JSON error shape
// cannot be produced there. An escape that is valid for the URL but makes
// a bad key takes the JSON path instead (TestBadInput, "key %25zz").
func TestInvalidEscapeInRequestLine(t *testing.T) {
	h := newHarness(t, withToken("tok"))
	h.resolve(dm("1"))
	for _, path := range []string{"/v1/sessions/%zz", "/v1/sessions/agent%3Amain%zz/touch", "/v1/transcripts/%/messages"} {
		t.Run(path, func(t *testing.T) {
			h := h.with(t)
			before := h.head()
			conn, err := net.Dial("tcp", h.http.Listener.Addr().String())
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: hermes\r\nAuthorization: Bearer tok\r\nContent-Length: 2\r\n\r\n{}", path)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("read response: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("POST %s = %d %s, want 400", path, resp.StatusCode, body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") || json.Valid(body) {
				t.Errorf("POST %s = %q %s, want net/http's plain-text answer", path, ct, body)
			}
			if after := h.head(); after != before {
				t.Errorf("head = %d after, %d before, want the log unchanged", after, before)
			}
		})
	}
}
