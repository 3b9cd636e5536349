package api_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawRequest writes head (the request line and headers, without the blank
// line) and then body to a fresh TCP connection to h, all of it before
// reading anything, the way Python's urllib does; then it reads the
// answer. conn is left open for the caller (closed by t.Cleanup).
//
// The client's send buffer is fixed at 64 KiB: on loopback the kernel
// would otherwise grow it to megabytes and swallow the whole body, so the
// client would never be left writing into a connection the server has
// stopped reading, which is what happens over a real network.
func (h *harness) rawRequest(head string, body []byte) (resp *http.Response, data []byte, conn net.Conn, err error) {
	h.t.Helper()
	conn, err = net.Dial("tcp", h.http.Listener.Addr().String())
	if err != nil {
		h.t.Fatalf("dial: %v", err)
	}
	if err := conn.(*net.TCPConn).SetWriteBuffer(64 << 10); err != nil {
		h.t.Fatalf("SetWriteBuffer: %v", err)
	}
	h.t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(30 * time.Second)) // a hang fails, not blocks
	if _, err := io.WriteString(conn, head+"\r\n\r\n"); err != nil {
		return nil, nil, conn, fmt.Errorf("write head: %w", err)
	}
	if _, err := conn.Write(body); err != nil {
		return nil, nil, conn, fmt.Errorf("write body: %w", err)
	}
	return readAnswer(conn)
}

func readAnswer(conn net.Conn) (*http.Response, []byte, net.Conn, error) {
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, nil, conn, fmt.Errorf("read answer: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, nil, conn, fmt.Errorf("read answer body: %w", err)
	}
	return resp, data, conn, nil
}

// chunked encodes body in 64 KiB chunks, with the last chunk.
func chunked(body []byte) []byte {
	var b bytes.Buffer
	for len(body) > 0 {
		n := min(len(body), 64<<10)
		fmt.Fprintf(&b, "%x\r\n", n)
		b.Write(body[:n])
		b.WriteString("\r\n")
		body = body[n:]
	}
	b.WriteString("0\r\n\r\n")
	return b.Bytes()
}

// wantError requires status and the JSON error shape with code.
func wantError(t *testing.T, resp *http.Response, data []byte, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d %s, want %d", resp.StatusCode, data, status)
	}
	got, err := errorBody(response{status: resp.StatusCode, header: resp.Header, body: data})
	if err != nil || got != code {
		t.Fatalf("body %s: code %q, %v; want the error shape with code %q", data, got, err, code)
	}
}

// TestOversizedBodyWrittenBeforeReading: a client that writes a 2 MiB
// body completely before it reads gets the JSON 413, every time, whether
// the length was declared (refused before reading) or the body came
// chunked (refused by the reader at the limit). Without the lingering
// close the server closed the connection on the unread rest and the
// kernel reset it: the client saw "connection reset by peer".
func TestOversizedBodyWrittenBeforeReading(t *testing.T) {
	h := newHarness(t)
	before := h.head()
	body := bytes.Repeat([]byte("x"), 2<<20)
	const path = "/v1/sessions/resolve"
	for _, tt := range []struct {
		name string
		head string
		body []byte
	}{
		{
			name: "declared length",
			head: fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d", path, len(body)),
			body: body,
		},
		{
			name: "chunked",
			head: fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked", path),
			body: chunked(body),
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := h.with(t)
			for i := range 50 {
				resp, data, conn, err := h.rawRequest(tt.head, tt.body)
				if err != nil {
					t.Fatalf("attempt %d: %v, want the 413", i+1, err)
				}
				wantError(t, resp, data, http.StatusRequestEntityTooLarge, "payload_too_large")
				conn.Close()
			}
		})
	}
	if after := h.head(); after != before {
		t.Fatalf("log head moved from %d to %d", before, after)
	}
}

// TestOversizedBodyNotSentDoesNotHoldTheConnection: the lingering close
// is bounded. A client that declares a huge body and sends none of it, or
// sends it without end, gets the 413 and then the connection is closed
// within the bound (the body read timeout, shortened here, when it is
// below the 2 s linger).
func TestOversizedBodyNotSentDoesNotHoldTheConnection(t *testing.T) {
	const bound = 300 * time.Millisecond
	h := newHarness(t, withBodyReadTimeout(bound))
	before := h.head()
	head := "POST /v1/sessions/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1073741824"
	for _, endless := range []bool{false, true} {
		t.Run(fmt.Sprintf("endless=%v", endless), func(t *testing.T) {
			h := h.with(t)
			start := time.Now()
			resp, data, conn, err := h.rawRequest(head, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantError(t, resp, data, http.StatusRequestEntityTooLarge, "payload_too_large")
			stop := make(chan struct{})
			defer close(stop)
			if endless {
				go func() {
					chunk := bytes.Repeat([]byte("x"), 1024)
					for {
						select {
						case <-stop:
							return
						case <-time.After(10 * time.Millisecond):
						}
						if _, err := conn.Write(chunk); err != nil {
							return
						}
					}
				}()
			}
			// The server closes: the read ends (EOF, or a reset when
			// bytes were still arriving), well before the client's own
			// 30 s deadline.
			_, err = io.Copy(io.Discard, conn)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the server still held the connection after %v", time.Since(start))
			}
			if took := time.Since(start); took > bound+5*time.Second {
				t.Fatalf("the server held the connection for %v, want about %v", took, bound)
			}
		})
	}
	if after := h.head(); after != before {
		t.Fatalf("log head moved from %d to %d", before, after)
	}
}

// TestTrickledBodyIsCutOff: a body that does not arrive within the body
// read timeout is answered 408 request_timeout and the connection closed,
// whether the client trickles it or stops sending.
func TestTrickledBodyIsCutOff(t *testing.T) {
	const bound = 300 * time.Millisecond
	h := newHarness(t, withBodyReadTimeout(bound))
	before := h.head()
	for _, tt := range []struct {
		name    string
		head    string
		trickle bool
	}{
		{name: "trickled", head: "Content-Length: 4096", trickle: true},
		{name: "stalled", head: "Content-Length: 4096"},
		{name: "trickled chunked", head: "Transfer-Encoding: chunked", trickle: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := h.with(t)
			conn, err := net.Dial("tcp", h.http.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			start := time.Now()
			fmt.Fprintf(conn, "POST /v1/sessions/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%s\r\n\r\n", tt.head)
			first := `{"source": {"platform": "telegram", "chat_id": "`
			if strings.Contains(tt.head, "chunked") {
				first = fmt.Sprintf("%x\r\n%s\r\n", len(first), first)
			}
			io.WriteString(conn, first)
			stop := make(chan struct{})
			defer close(stop)
			if tt.trickle {
				go func() {
					for {
						select {
						case <-stop:
							return
						case <-time.After(bound / 10):
						}
						b := "1"
						if strings.Contains(tt.head, "chunked") {
							b = "1\r\n1\r\n"
						}
						if _, err := io.WriteString(conn, b); err != nil {
							return
						}
					}
				}()
			}
			resp, data, _, err := readAnswer(conn)
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			wantError(t, resp, data, http.StatusRequestTimeout, "request_timeout")
			if !resp.Close {
				t.Errorf("the 408 keeps the connection open (Connection: %q)", resp.Header.Get("Connection"))
			}
			if took < bound || took > bound+5*time.Second {
				t.Errorf("answered after %v, want about %v", took, bound)
			}
			if _, err := io.Copy(io.Discard, conn); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatal("the connection stayed open after the 408")
				}
			}
		})
	}
	if after := h.head(); after != before {
		t.Fatalf("log head moved from %d to %d", before, after)
	}
}

// TestBodyReadTimeoutLeavesStreamsAndIdleConnectionsAlone: the body read
// timeout bounds bodies only. An SSE stream open for many times the bound
// keeps delivering, and a keep-alive connection idle between two commands
// for longer than the bound serves the second one.
func TestBodyReadTimeoutLeavesStreamsAndIdleConnectionsAlone(t *testing.T) {
	const bound = 200 * time.Millisecond
	h := newHarness(t, withBodyReadTimeout(bound))
	h.resolve(dm("before"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.url("/v1/events?follow=1&from_position=1"), nil)
	resp, err := h.http.Client().Do(req)
	if err != nil {
		t.Fatalf("GET /v1/events?follow=1: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/events?follow=1 = %d", resp.StatusCode)
	}
	sse := newSSEReader(bufio.NewReader(resp.Body))
	n := len(readEvents(t, sse, 1, int(h.head())))

	for i := range 3 {
		time.Sleep(2 * bound)
		// Over the harness client's pooled connection, idle for 2×bound.
		h.resolve(dm(fmt.Sprint("after-", i)))
		head := h.head()
		n += len(readEvents(t, sse, uint64(n+1), int(head)-n))
	}
}
