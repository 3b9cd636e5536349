package api_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRawRequests sends malformed and unusual requests over raw TCP (item 8
// of issue [V]). Those that reach hermes' router answer the JSON error
// shape. The others are refused by net/http while it parses the request,
// before any handler runs: Go writes its own plain-text answer (it has no
// hook for it), so hermes cannot make them JSON. Those rows pin Go's
// answer, so that a Go release that changes it is noticed here and in the
// README's security section, which lists them. Nothing is appended either
// way.
func TestRawRequests(t *testing.T) {
	h := newHarness(t)
	sid := h.resolve(dm("1")).Entry.SessionID
	big := strings.Repeat("a", 2<<20)
	const json400 = "invalid_argument"
	tests := []struct {
		name string
		raw  string
		// status is the answer; code is the JSON error code, or "" for
		// one of Go's own answers, whose body is goBody (text/plain, but
		// 417 has neither body nor Content-Type).
		status int
		code   string
		goBody string
	}{
		// Refused by net/http before routing: not JSON.
		{name: "invalid escape in the path", raw: "POST /v1/sessions/%zz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", status: 400, goBody: "400 Bad Request"},
		{name: "invalid escape in a transcript path", raw: "POST /v1/transcripts/" + sid + "%/end HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", status: 400, goBody: "400 Bad Request"},
		{name: "space in the path", raw: "GET /a b HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", status: 400, goBody: "400 Bad Request"},
		{name: "control byte in the path", raw: "GET /a\x7fb HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", status: 400, goBody: "400 Bad Request"},
		{name: "relative path", raw: "GET healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", status: 400, goBody: "400 Bad Request"},
		{name: "malformed request line", raw: "GARBAGE\r\n\r\n", status: 400, goBody: "400 Bad Request"},
		{name: "HTTP/0.9", raw: "GET /\r\n\r\n", status: 400, goBody: "400 Bad Request"},
		{name: "invalid method", raw: "G@T /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", status: 400, goBody: "400 Bad Request"},
		{name: "malformed version", raw: "GET /healthz HTTP/x\r\nHost: 127.0.0.1\r\n\r\n", status: 400, goBody: "400 Bad Request"},
		{name: "control byte in a header value", raw: "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bad: a\x01b\r\n\r\n", status: 400, goBody: "400 Bad Request"},
		{name: "NUL in a header value", raw: "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bad: a\x00b\r\n\r\n", status: 400, goBody: "400 Bad Request"},
		{name: "space in a header name", raw: "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Name: x\r\n\r\n", status: 400, goBody: "400 Bad Request: invalid header name"},
		{name: "header line without a colon", raw: "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nNoColon\r\n\r\n", status: 400, goBody: "400 Bad Request"},
		{name: "first header line indented", raw: "GET /healthz HTTP/1.1\r\n Host: 127.0.0.1\r\n\r\n", status: 400, goBody: "400 Bad Request"},
		{name: "negative Content-Length", raw: "POST /v1/sessions/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -1\r\n\r\n", status: 400, goBody: "400 Bad Request"},
		{name: "non-numeric Content-Length", raw: "POST /v1/sessions/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ten\r\n\r\n", status: 400, goBody: "400 Bad Request"},
		{name: "two Content-Lengths", raw: "POST /v1/sessions/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", status: 400, goBody: "400 Bad Request"},
		{name: "HTTP/1.1 without Host", raw: "GET /healthz HTTP/1.1\r\n\r\n", status: 400, goBody: "400 Bad Request: missing required Host header"},
		{name: "two Hosts", raw: "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: localhost\r\n\r\n", status: 400, goBody: "400 Bad Request"},
		{name: "malformed Host", raw: "GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n", status: 400, goBody: "400 Bad Request: malformed Host header"},
		{name: "TLS on the plain port", raw: "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + strings.Repeat("\x00", 40) + "\r\n\r\n", status: 400, goBody: "400 Bad Request"},
		{name: "2 MiB header", raw: "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + big + "\r\n\r\n", status: 431, goBody: "431 Request Header Fields Too Large"},
		{name: "2 MiB path", raw: "GET /" + big + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", status: 431, goBody: "431 Request Header Fields Too Large"},
		{name: "gzip transfer coding", raw: "POST /v1/sessions/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip\r\n\r\n", status: 501, goBody: "Unsupported transfer encoding"},
		{name: "identity transfer coding", raw: "POST /v1/sessions/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: identity\r\n\r\n", status: 501, goBody: "Unsupported transfer encoding"},
		{name: "HTTP/2.0 request line", raw: "GET /healthz HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n", status: 505, goBody: "505 HTTP Version Not Supported: unsupported protocol version"},
		{name: "HTTP/3.7 request line", raw: "GET /healthz HTTP/3.7\r\nHost: 127.0.0.1\r\n\r\n", status: 505, goBody: "505 HTTP Version Not Supported: unsupported protocol version"},
		{name: "unknown Expect", raw: "POST /v1/sessions/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 200-ok\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", status: 417, goBody: ""},

		// Reach the router: JSON.
		{name: "absolute-form naming another host", raw: "GET http://evil.example/v1/export HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", status: 403, code: "forbidden"},
		{name: "invalid escape in Host", raw: "GET /healthz HTTP/1.1\r\nHost: %zz\r\n\r\n", status: 403, code: "forbidden"},
		{name: "malformed chunked body", raw: "POST /v1/sessions/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", status: 400, code: json400},
		{name: "body over the limit", raw: "POST /v1/sessions/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\n\r\n{}", status: 413, code: "payload_too_large"},
		{name: "text/plain body", raw: "POST /v1/sessions/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}", status: 415, code: "unsupported_media_type"},
		{name: "asterisk target", raw: "GET * HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", status: 404, code: "not_found"},
		// net/http hands the h2 preface on with a body of unknown length.
		{name: "HTTP/2 preface", raw: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", status: 415, code: "unsupported_media_type"},
		{name: "unknown route", raw: "GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", status: 404, code: "not_found"},
		{name: "wrong method", raw: "DELETE /v1/sessions/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", status: 405, code: json400},
		{name: "HTTP/1.0 without Host", raw: "GET /v1/nowhere HTTP/1.0\r\n\r\n", status: 404, code: "not_found"},
		{name: "bare LF line ends", raw: "GET /v1/nowhere HTTP/1.1\nHost: 127.0.0.1\n\n", status: 404, code: "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.with(t)
			before := h.head()
			status, header, body := rawRoundTrip(t, h.http.Listener.Addr().String(), tt.raw)
			if status != tt.status {
				t.Fatalf("status = %d %q, want %d", status, body, tt.status)
			}
			if tt.code != "" {
				code, err := errorBody(response{status: status, header: header, body: body})
				if err != nil {
					t.Fatalf("body %q is not the error shape: %v", body, err)
				}
				if code != tt.code {
					t.Errorf("error.code = %q, want %q", code, tt.code)
				}
			} else {
				// net/http's own answer. If Go starts letting servers
				// answer these in JSON, use it and update the README.
				ct := header.Get("Content-Type")
				wantCT := "text/plain; charset=utf-8"
				if tt.status == http.StatusExpectationFailed {
					wantCT = ""
				}
				if ct != wantCT || string(body) != tt.goBody || json.Valid(body) {
					t.Errorf("answer = %q %q, want net/http's own %q %q", ct, body, wantCT, tt.goBody)
				}
			}
			if after := h.head(); after != before {
				t.Errorf("head = %d after, %d before, want the log unchanged", after, before)
			}
		})
	}
}

// rawRoundTrip writes raw on a new connection and reads one answer.
func rawRoundTrip(t *testing.T, addr, raw string) (int, http.Header, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	// The server may answer before it read everything (a 431): write
	// concurrently so neither side blocks.
	go io.WriteString(conn, raw)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, resp.Header, body
}
