package api_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"hermes/api"
)

func withBrowser(p api.BrowserPolicy) option { return func(o *harnessOptions) { o.browser = p } }

// browserRow is one request a web page (or a DNS-rebinding page) could make
// a browser send, or one a legitimate client sends.
type browserRow struct {
	name   string
	method string
	path   string
	// body is sent as is; chunked sends it without a Content-Length.
	body    string
	chunked bool
	// host, when set, is the Host header; otherwise the listener's
	// 127.0.0.1:port.
	host   string
	header map[string]string
	status int
	code   string // "" for a row that passes the browser rules
}

// sendRaw sends exactly the headers of the row: no Content-Type unless the
// row has one, no token.
func (h *harness) sendRaw(row browserRow) response {
	h.t.Helper()
	var body io.Reader
	if row.body != "" {
		body = strings.NewReader(row.body)
		if row.chunked {
			body = io.MultiReader(body) // of unknown length: sent chunked
		}
	}
	req, err := http.NewRequest(row.method, h.url(row.path), body)
	if err != nil {
		h.t.Fatalf("http.NewRequest(%s, %s) = %v", row.method, row.path, err)
	}
	if row.host != "" {
		req.Host = row.host
	}
	for k, v := range row.header {
		req.Header.Set(k, v)
	}
	resp, err := h.http.Client().Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", row.method, row.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: read body: %v", row.method, row.path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// TestBrowserRules is finding 6 of issue [V] over real HTTP: on the default
// setup (loopback, no token) a page from another origin could prune every
// ended transcript with a text/plain POST, restart the gateway, and read
// /v1/export through DNS rebinding. Each refused row answers the error shape
// with its code, appends nothing, does not restart, and leaves the ended
// transcript in place; the last step shows the same prune, sent as a client
// sends it, does delete it.
func TestBrowserRules(t *testing.T) {
	var restarts atomic.Int32
	h := newHarness(t, withRestart(func() { restarts.Add(1) }), withBrowser(api.BrowserPolicy{
		Addr:           "hermes.internal:8642",
		AllowedHosts:   []string{"Gateway.LAN", "[fd00::7]"},
		AllowedOrigins: []string{"http://ui.example:3000"},
	}))
	sid := h.resolve(dm("1")).Entry.SessionID
	h.appendMessage(sid, "user", "a private conversation")
	h.call("POST", transcript(sid, "/end"), map[string]string{"reason": "user_exit"}, http.StatusOK, nil)
	h.call("POST", "/v1/clock", map[string]string{"advance": "1m"}, http.StatusOK, nil)

	self := h.http.Listener.Addr().String()
	const (
		prune   = `{"older_than_days":0}`
		resolve = `{"source":{"platform":"telegram","chat_id":"1"}}`
		evil    = "http://evil.example"
	)
	text := map[string]string{"Content-Type": "text/plain"}
	jsonFrom := func(origin, site string) map[string]string {
		m := map[string]string{"Content-Type": "application/json"}
		if origin != "" {
			m["Origin"] = origin
		}
		if site != "" {
			m["Sec-Fetch-Site"] = site
		}
		return m
	}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for k, v := range m {
			out[k] = v
		}
		return out
	}

	rows := []browserRow{
		// Bodies a page can send without a CORS preflight.
		{name: "prune as text/plain", method: "POST", path: "/v1/maintenance/prune-sessions", body: prune, header: text, status: 415, code: "unsupported_media_type"},
		{name: "prune as a form", method: "POST", path: "/v1/maintenance/prune-sessions", body: "older_than_days=0", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, status: 415, code: "unsupported_media_type"},
		{name: "prune as multipart", method: "POST", path: "/v1/maintenance/prune-sessions", body: "--b\r\n\r\n" + prune + "\r\n--b--\r\n", header: map[string]string{"Content-Type": "multipart/form-data; boundary=b"}, status: 415, code: "unsupported_media_type"},
		{name: "prune without a Content-Type", method: "POST", path: "/v1/maintenance/prune-sessions", body: prune, status: 415, code: "unsupported_media_type"},
		{name: "prune as text/plain, chunked", method: "POST", path: "/v1/maintenance/prune-sessions", body: prune, chunked: true, header: text, status: 415, code: "unsupported_media_type"},
		{name: "prune as application/jsonx", method: "POST", path: "/v1/maintenance/prune-sessions", body: prune, header: map[string]string{"Content-Type": "application/jsonx"}, status: 415, code: "unsupported_media_type"},
		{name: "prune as a malformed media type", method: "POST", path: "/v1/maintenance/prune-sessions", body: prune, header: map[string]string{"Content-Type": "application/json;;"}, status: 415, code: "unsupported_media_type"},
		{name: "restart as text/plain", method: "POST", path: "/v1/admin/restart", body: "{}", header: text, status: 415, code: "unsupported_media_type"},

		// Cross-origin requests, whatever their body.
		{name: "prune from a foreign Origin, text/plain", method: "POST", path: "/v1/maintenance/prune-sessions", body: prune, header: with(text, "Origin", evil), status: 403, code: "forbidden"},
		{name: "prune from a foreign Origin, JSON", method: "POST", path: "/v1/maintenance/prune-sessions", body: prune, header: jsonFrom(evil, ""), status: 403, code: "forbidden"},
		{name: "prune cross-site", method: "POST", path: "/v1/maintenance/prune-sessions", body: prune, header: jsonFrom("", "cross-site"), status: 403, code: "forbidden"},
		{name: "prune same-site (another port)", method: "POST", path: "/v1/maintenance/prune-sessions", body: prune, header: jsonFrom("http://127.0.0.1:1", "same-site"), status: 403, code: "forbidden"},
		{name: "prune from Origin null", method: "POST", path: "/v1/maintenance/prune-sessions", body: prune, header: jsonFrom("null", ""), status: 403, code: "forbidden"},
		{name: "restart from a foreign Origin", method: "POST", path: "/v1/admin/restart", header: map[string]string{"Origin": evil, "Sec-Fetch-Site": "cross-site"}, status: 403, code: "forbidden"},
		{name: "resolve from a foreign Origin", method: "POST", path: "/v1/sessions/resolve", body: resolve, header: jsonFrom(evil, "cross-site"), status: 403, code: "forbidden"},
		{name: "delete from a foreign Origin", method: "DELETE", path: transcript(sid, ""), header: map[string]string{"Origin": evil}, status: 403, code: "forbidden"},
		{name: "export read cross-site", method: "GET", path: "/v1/export", header: map[string]string{"Sec-Fetch-Site": "cross-site"}, status: 403, code: "forbidden"},
		{name: "title probe from a foreign Origin", method: "GET", path: "/v1/titles/resolve?title=x", header: map[string]string{"Origin": evil}, status: 403, code: "forbidden"},
		{name: "CORS preflight", method: "OPTIONS", path: "/v1/maintenance/prune-sessions", header: map[string]string{"Origin": evil, "Sec-Fetch-Site": "cross-site", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}, status: 403, code: "forbidden"},

		// Host names that are not hermes': DNS rebinding.
		{name: "export under a rebound name", method: "GET", path: "/v1/export", host: "evil.example:8642", status: 403, code: "forbidden"},
		{name: "same-origin under a rebound name", method: "POST", path: "/v1/maintenance/prune-sessions", body: prune, host: "evil.example:8642", header: jsonFrom("http://evil.example:8642", "same-origin"), status: 403, code: "forbidden"},
		{name: "healthz under a rebound name", method: "GET", path: "/healthz", host: "evil.example", status: 403, code: "forbidden"},
		{name: "a loopback-looking name", method: "GET", path: "/v1/export", host: "127.0.0.1.evil.example", status: 403, code: "forbidden"},
		{name: "localhost as a subdomain", method: "GET", path: "/v1/export", host: "localhost.evil.example:1", status: 403, code: "forbidden"},
		{name: "unknown route under a rebound name", method: "GET", path: "/nowhere", host: "evil.example", status: 403, code: "forbidden"},

		// What passes.
		{name: "JSON with a charset", method: "POST", path: "/v1/sessions/resolve", body: resolve, header: map[string]string{"Content-Type": "application/json; charset=utf-8"}, status: 200},
		{name: "JSON in capitals", method: "POST", path: "/v1/sessions/resolve", body: resolve, header: map[string]string{"Content-Type": "Application/JSON"}, status: 200},
		{name: "JSON chunked", method: "POST", path: "/v1/sessions/resolve", body: resolve, chunked: true, header: map[string]string{"Content-Type": "application/json"}, status: 200},
		{name: "no body needs no Content-Type", method: "POST", path: "/v1/clock", status: 400, code: "invalid_argument"},
		{name: "same origin by Origin", method: "POST", path: "/v1/sessions/resolve", body: resolve, header: jsonFrom("http://"+self, ""), status: 200},
		{name: "same origin by Sec-Fetch-Site", method: "POST", path: "/v1/sessions/resolve", body: resolve, header: jsonFrom("http://"+self, "same-origin"), status: 200},
		{name: "typed into the address bar", method: "GET", path: "/v1/export", header: map[string]string{"Sec-Fetch-Site": "none"}, status: 200},
		{name: "an allowed origin", method: "POST", path: "/v1/sessions/resolve", body: resolve, header: jsonFrom("http://ui.example:3000", "cross-site"), status: 200},
		{name: "an allowed origin reading", method: "GET", path: "/v1/export", header: map[string]string{"Origin": "http://ui.example:3000"}, status: 200},
		{name: "localhost with a port", method: "GET", path: "/healthz", host: "localhost:9", status: 200},
		{name: "LOCALHOST", method: "GET", path: "/healthz", host: "LOCALHOST", status: 200},
		{name: "127.0.0.0/8", method: "GET", path: "/healthz", host: "127.8.9.10:80", status: 200},
		{name: "::1", method: "GET", path: "/healthz", host: "[::1]:8642", status: 200},
		{name: "::1 without a port", method: "GET", path: "/healthz", host: "[::1]", status: 200},
		{name: "an allowed host, any case and port", method: "GET", path: "/healthz", host: "gateway.lan:1234", status: 200},
		{name: "an allowed IPv6 host", method: "GET", path: "/healthz", host: "[fd00::7]:8642", status: 200},
		{name: "the listen host", method: "GET", path: "/healthz", host: "hermes.internal:8642", status: 200},
		{name: "the listen host, another port", method: "GET", path: "/healthz", host: "hermes.internal", status: 200},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			h := h.with(t)
			before := h.head()
			r := h.sendRaw(row)
			if r.status != row.status {
				t.Fatalf("%s %s = %d %s, want %d", row.method, row.path, r.status, r.body, row.status)
			}
			if row.code == "" {
				return
			}
			code, err := errorBody(r)
			if err != nil {
				t.Fatalf("%s %s: body %s is not the error shape: %v", row.method, row.path, r.body, err)
			}
			if code != row.code {
				t.Errorf("%s %s = error.code %q, want %q", row.method, row.path, code, row.code)
			}
			if after := h.head(); after != before {
				t.Errorf("head = %d after, %d before, want the log unchanged", after, before)
			}
			for k := range r.header {
				if strings.HasPrefix(k, "Access-Control-") {
					t.Errorf("%s %s answers %s: %q, want no CORS header", row.method, row.path, k, r.header.Get(k))
				}
			}
		})
	}
	if n := restarts.Load(); n != 0 {
		t.Errorf("restart requested %d times, want 0", n)
	}
	h.call("GET", transcript(sid, ""), nil, http.StatusOK, nil)
	// The attack would have worked: the same prune, sent as a client sends
	// it, deletes the ended transcript.
	var pruned struct {
		Deleted int `json:"deleted"`
	}
	h.call("POST", "/v1/maintenance/prune-sessions", map[string]int{"older_than_days": 0}, http.StatusOK, &pruned)
	if pruned.Deleted != 1 {
		t.Errorf("prune-sessions as a client = %d deleted, want 1", pruned.Deleted)
	}
	h.call("GET", transcript(sid, ""), nil, http.StatusNotFound, nil)
}

// TestBrowserRulesBeforeAuth: with a token, a cross-origin request is still
// refused as cross-origin (the token does not make a page's request safe:
// a page cannot read it, but the rules do not depend on that).
func TestBrowserRulesBeforeAuth(t *testing.T) {
	const token = "0123456789abcdef"
	h := newHarness(t, withToken(token))
	before := h.head()
	for _, tt := range []struct {
		name   string
		header map[string]string
		host   string
		status int
	}{
		{"foreign origin with the token", map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer " + token, "Content-Type": "application/json"}, "", 403},
		{"rebound host with the token", map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"}, "evil.example", 403},
		{"text/plain with the token", map[string]string{"Authorization": "Bearer " + token, "Content-Type": "text/plain"}, "", 415},
		{"JSON without the token", map[string]string{"Content-Type": "application/json"}, "", 401},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := h.with(t).sendRaw(browserRow{method: "POST", path: "/v1/maintenance/prune-sessions", body: `{"older_than_days":0}`, host: tt.host, header: tt.header})
			if r.status != tt.status {
				t.Fatalf("status = %d %s, want %d", r.status, r.body, tt.status)
			}
			if _, err := errorBody(r); err != nil {
				t.Errorf("body %s is not the error shape: %v", r.body, err)
			}
		})
	}
	if after := h.head(); after != before {
		t.Errorf("head = %d after, %d before, want the log unchanged", after, before)
	}
}
