package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// followLimits are the event stream limits of a harness (api.Deps); zero
// fields keep the defaults.
type followLimits struct {
	max          int
	bufferBytes  int
	writeTimeout time.Duration
}

func withFollowLimits(l followLimits) option {
	return func(o *harnessOptions) { o.follow = l }
}

// withMaxConnections puts the harness behind api.LimitConnections.
func withMaxConnections(n int) option { return func(o *harnessOptions) { o.maxConns = n } }

// follow opens GET /v1/events?follow=1<query> with the given headers; the
// stream is cut by t.Cleanup, or by the returned cancel.
func (h *harness) follow(query string, header map[string]string) (*http.Response, context.CancelFunc) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", h.url("/v1/events?follow=1"+query), nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := h.http.Client().Do(req)
	if err != nil {
		cancel()
		h.t.Fatalf("GET /v1/events?follow=1%s: %v", query, err)
	}
	stop := func() {
		cancel()
		resp.Body.Close()
	}
	h.t.Cleanup(stop)
	return resp, stop
}

// metric is the value of an unlabelled metric of GET /metrics.
func (h *harness) metric(name string) float64 {
	h.t.Helper()
	r := h.call("GET", "/metrics", nil, http.StatusOK, nil)
	for line := range strings.SplitSeq(string(r.body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				h.t.Fatalf("metric %s = %q: %v", name, v, err)
			}
			return f
		}
	}
	h.t.Fatalf("GET /metrics has no %s", name)
	return 0
}

// TestFollowerCap: api.max_followers streams are served; one more is
// refused with 503 unavailable and Retry-After while the others go on, and
// admitted again once one of them closed.
func TestFollowerCap(t *testing.T) {
	const max = 2
	h := newHarness(t, withFollowLimits(followLimits{max: max}))
	h.resolve(dm("cap"))

	var stops []context.CancelFunc
	var streams []*sseReader
	for i := range max {
		resp, stop := h.follow("", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("follower %d of %d = %d, want 200", i+1, max, resp.StatusCode)
		}
		stops = append(stops, stop)
		streams = append(streams, newSSEReader(bufio.NewReader(resp.Body)))
	}
	r := h.do("GET", "/v1/events?follow=1", nil)
	if code, err := errorBody(r); r.status != http.StatusServiceUnavailable || err != nil || code != "unavailable" || r.header.Get("Retry-After") == "" {
		t.Fatalf("follower %d = %d %s (Retry-After %q), want 503 unavailable with Retry-After", max+1, r.status, r.body, r.header.Get("Retry-After"))
	}
	// The admitted streams are still served, and so is everything else.
	h.resolve(dm("cap-2"))
	for _, s := range streams {
		readEvents(t, s, 1, 2)
	}

	stops[0]()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, _ := h.follow("&from_position=2", nil)
		if resp.StatusCode == http.StatusOK {
			readEvents(t, newSSEReader(bufio.NewReader(resp.Body)), 2, 1)
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("no follower admitted after one of %d closed: last status %d", max, resp.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stalledFollower opens an event stream from the start on a raw
// connection that does not read. Its receive buffer is fixed, so the
// kernel does not grow it to tcp_rmem's maximum. It stays above twice the
// loopback MSS (64 KiB): smaller, the receiver would not reopen its window
// once read, and the sender would fall back to zero-window probes with
// exponential backoff.
func stalledFollower(t *testing.T, h *harness, header string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", h.http.Listener.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.(*net.TCPConn).SetReadBuffer(stalledRcvbuf); err != nil {
		t.Fatalf("SetReadBuffer: %v", err)
	}
	fmt.Fprintf(conn, "GET /v1/events?follow=1 HTTP/1.1\r\nHost: %s\r\n%s\r\n", h.http.Listener.Addr(), header)
	return conn
}

const stalledRcvbuf = 256 << 10

// appendUntil appends 128 KiB messages to the transcript until the metric
// of GET /metrics reaches want, and fails when it takes more than the
// kernel can buffer for a stream (tcp_wmem's maximum on the server side
// plus the client's buffer) and then some. Every append and scrape is
// answered meanwhile: a stalled stream holds up no other client.
func appendUntil(t *testing.T, h *harness, sessionID, metric string, want func(float64) bool) {
	t.Helper()
	volume := 4 << 20
	if data, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem"); err == nil {
		if f := strings.Fields(string(data)); len(f) == 3 {
			if n, err := strconv.Atoi(f[2]); err == nil {
				volume = n
			}
		}
	}
	volume += 2*stalledRcvbuf + 4<<20
	const size = 128 << 10
	reasoning := strings.Repeat("r", size)
	for i := range volume / size {
		if want(h.metric(metric)) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		body := fmt.Sprintf(`{"role":"assistant","content":"part %d","reasoning":%q}`, i, reasoning)
		req, _ := http.NewRequestWithContext(ctx, "POST", h.url(transcript(sessionID, "/messages")), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.http.Client().Do(req)
		cancel()
		if err != nil {
			t.Fatalf("append %d while a client is not reading: %v", i+1, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("append %d = %d, want 200", i+1, resp.StatusCode)
		}
	}
	// The volume fills every buffer; a write timeout may still be
	// running (appends are answered faster than it): wait for it.
	deadline := time.Now().Add(30 * time.Second)
	for !want(h.metric(metric)) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes appended and %s is still %v 30s later", volume, metric, h.metric(metric))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFollowSlowClientDropped: a following client that does not read is
// dropped once it is api.follower_buffer_bytes behind, while appends and
// other requests are answered. Once it reads, it finds every event up to
// the drop in order, then a dropped event naming where to resume; resuming
// there, by from_position or Last-Event-ID, continues with no gap.
func TestFollowSlowClientDropped(t *testing.T) {
	const buffer = 512 << 10
	h := newHarness(t, withFollowLimits(followLimits{bufferBytes: buffer}))
	sessionID := h.resolve(dm("slow")).Entry.SessionID
	conn := stalledFollower(t, h, "")
	appendUntil(t, h, sessionID, "hermes_event_streams_dropped_total", func(n float64) bool { return n == 1 })
	head := h.head()

	conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read the stream's response: %v", err)
	}
	// No resp.Body.Close: it would drain; closing conn ends it.
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/events?follow=1 = %d, want 200", resp.StatusCode)
	}
	sse := newSSEReader(bufio.NewReader(resp.Body))
	var last uint64
	for {
		ev, err := sse.next()
		if err != nil {
			t.Fatalf("after event %d: %v, want events then a dropped event", last, err)
		}
		if ev.event == "dropped" {
			var got struct {
				Reason      string `json:"reason"`
				ResumeFrom  uint64 `json:"resume_from"`
				BufferBytes int    `json:"buffer_bytes"`
			}
			if err := json.Unmarshal([]byte(ev.data), &got); err != nil {
				t.Fatalf("dropped event data %q: %v", ev.data, err)
			}
			if got.Reason != "too far behind" || got.ResumeFrom != last+1 || got.BufferBytes != buffer || ev.id != strconv.FormatUint(last, 10) {
				t.Fatalf("dropped event = id %s %s, want id %d, reason too far behind, resume_from %d, buffer_bytes %d", ev.id, ev.data, last, last+1, buffer)
			}
			break
		}
		if ev.id != strconv.FormatUint(last+1, 10) {
			t.Fatalf("event after %d = id %s (%s), want %d", last, ev.id, ev.event, last+1)
		}
		last++
	}
	if last == 0 || last >= head {
		t.Fatalf("dropped after event %d of %d, want in between", last, head)
	}
	if ev, err := sse.next(); err == nil {
		t.Fatalf("after the dropped event = %+v, want the end of the stream", ev)
	}

	for _, resume := range []struct {
		query  string
		header map[string]string
	}{
		{query: fmt.Sprintf("&from_position=%d", last+1)},
		{header: map[string]string{"Last-Event-ID": strconv.FormatUint(last, 10)}},
	} {
		resp, stop := h.follow(resume.query, resume.header)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("resume %+v = %d, want 200", resume, resp.StatusCode)
		}
		readEvents(t, newSSEReader(bufio.NewReader(resp.Body)), last+1, int(head-last))
		stop()
	}
}

// TestFollowStuckClientFreesItsSlot: a peer that never reads again cannot
// hold its stream: the write times out (whether or not the stream was
// dropped first), the stream ends, and its place under api.max_followers
// is free for the next client.
func TestFollowStuckClientFreesItsSlot(t *testing.T) {
	h := newHarness(t, withFollowLimits(followLimits{max: 1, bufferBytes: 512 << 10, writeTimeout: 200 * time.Millisecond}))
	sessionID := h.resolve(dm("stuck")).Entry.SessionID
	stalledFollower(t, h, "")
	deadline := time.Now().Add(30 * time.Second)
	for h.metric("hermes_event_streams") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the stalled stream never opened")
		}
		time.Sleep(10 * time.Millisecond)
	}
	appendUntil(t, h, sessionID, "hermes_event_streams", func(n float64) bool { return n == 0 })

	deadline = time.Now().Add(30 * time.Second)
	for {
		resp, stop := h.follow("", nil)
		status := resp.StatusCode
		stop()
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/events?follow=1 = %d for 30 s after the only stream's client got stuck, want 200 once its write timed out", status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := h.metric("hermes_event_streams"); n > 1 {
		t.Fatalf("hermes_event_streams = %v, want at most 1", n)
	}
}

// TestConnectionCap: with api.max_connections open inside requests (event
// streams), the next connection waits (it is not accepted) and is served
// as soon as one closes.
func TestConnectionCap(t *testing.T) {
	const max = 2
	h := newHarness(t, withMaxConnections(max))
	addr := h.http.Listener.Addr().String()

	var held []net.Conn
	for i := range max {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i+1, err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "GET /v1/events?follow=1 HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d of %d: GET /v1/events?follow=1 = %v, %v, want 200", i+1, max, resp, err)
		}
		held = append(held, conn) // the stream stays open
	}

	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
		resp, err := client.Get(h.url("/healthz"))
		if err != nil {
			done <- result{err: err}
			return
		}
		resp.Body.Close()
		done <- result{status: resp.StatusCode}
	}()
	select {
	case r := <-done:
		t.Fatalf("connection %d answered (%d, %v) while %d streams were open, want it to wait", max+1, r.status, r.err, max)
	case <-time.After(4 * 250 * time.Millisecond): // past idleGrace: streams are never taken over
	}
	held[0].Close()
	select {
	case r := <-done:
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("connection %d after one closed: GET /healthz = %d, %v, want 200", max+1, r.status, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("connection %d not served 30 s after one of %d closed", max+1, max)
	}
}

// TestConnectionCapIsNoLever: connections that send nothing, that stop
// half way through their headers, or that idle between keep-alive
// requests, far more of them than api.max_connections, do not keep a
// client out: each of its requests is served (in place of one of them,
// which is closed) well before its timeout, far shorter than the
// ReadHeaderTimeout that would free them otherwise (here there is none).
func TestConnectionCapIsNoLever(t *testing.T) {
	const max = 4
	h := newHarness(t, withMaxConnections(max))
	addr := h.http.Listener.Addr().String()

	var idle []net.Conn
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		idle = append(idle, conn)
		return conn
	}
	for range 2 { // a request, then idle on keep-alive
		conn := dial()
		fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("keep-alive connection: GET /healthz = %v, %v", resp, err)
		}
	}
	for range 2 { // half a request line
		fmt.Fprint(dial(), "GET /heal")
	}
	silent := make(chan struct{})
	go func() { // far more than the cap, sending nothing
		defer close(silent)
		for range 40 {
			if conn, err := net.Dial("tcp", addr); err == nil {
				t.Cleanup(func() { conn.Close() })
			}
		}
	}()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
	for i := range 5 {
		resp, err := client.Get(h.url("/healthz"))
		if err != nil {
			t.Fatalf("GET /healthz %d behind %d idle connections (cap %d): %v", i+1, len(idle)+40, max, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /healthz %d = %d, want 200", i+1, resp.StatusCode)
		}
	}
	<-silent
	// The idle connections, the oldest, were taken over first: the server
	// closed each.
	closed := 0
	for _, conn := range idle {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(conn); err == nil {
			closed++
		}
	}
	if closed != len(idle) {
		t.Fatalf("%d of the %d idle connections were closed, want all", closed, len(idle))
	}
}
