package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// envelope is the API's event envelope.
type envelope struct {
	Stream        string          `json:"stream"`
	Version       uint64          `json:"version"`
	Position      uint64          `json:"position"`
	ID            string          `json:"id"`
	Type          string          `json:"type"`
	SchemaVersion int             `json:"schema_version"`
	Time          time.Time       `json:"time"`
	Data          json.RawMessage `json:"data"`
	Metadata      json.RawMessage `json:"metadata"`
}

type eventList struct {
	Events []envelope `json:"events"`
}

// laneHistory makes a lane of three events an hour apart: created at
// start, touched at +1h, suspended at +2h.
func laneHistory(h *harness) string {
	h.t.Helper()
	key := h.resolve(dm("tt")).Entry.SessionKey
	h.clock.Set(start.Add(time.Hour))
	h.call("POST", lane(key, "/touch"), map[string]int{"last_prompt_tokens": 9}, http.StatusOK, nil)
	h.clock.Set(start.Add(2 * time.Hour))
	h.call("POST", lane(key, "/suspend"), nil, http.StatusOK, nil)
	return key
}

func TestLaneEvents(t *testing.T) {
	h := newHarness(t)
	key := laneHistory(h)
	h.resolve(dm("other"))

	tests := []struct {
		query        string
		wantVersions []uint64
		wantTypes    []string
	}{
		{"", []uint64{1, 2, 3}, []string{"lane.session_created.v1", "lane.touched.v1", "lane.suspended.v2"}},
		{"?from_version=2", []uint64{2, 3}, nil},
		{"?from_version=2&limit=1", []uint64{2}, nil},
		{"?from_version=9", nil, nil},
	}
	for _, tc := range tests {
		var got eventList
		h.call("GET", lane(key, "/events"+tc.query), nil, http.StatusOK, &got)
		var versions []uint64
		var types []string
		for _, e := range got.Events {
			versions = append(versions, e.Version)
			types = append(types, e.Type)
			if e.Stream != "lane-"+key {
				t.Errorf("event stream = %q, want lane-%s", e.Stream, key)
			}
			if e.ID == "" || e.Position == 0 || !strings.HasSuffix(e.Type, fmt.Sprintf(".v%d", e.SchemaVersion)) || len(e.Data) == 0 || e.Time.IsZero() {
				t.Errorf("envelope = %+v, want id, position, schema_version of the type, data and time", e)
			}
		}
		if fmt.Sprint(versions) != fmt.Sprint(tc.wantVersions) {
			t.Errorf("GET events%s = versions %v, want %v", tc.query, versions, tc.wantVersions)
		}
		if tc.wantTypes != nil && fmt.Sprint(types) != fmt.Sprint(tc.wantTypes) {
			t.Errorf("GET events%s = types %v, want %v", tc.query, types, tc.wantTypes)
		}
		if got.Events == nil {
			t.Errorf("GET events%s = events null, want an array", tc.query)
		}
	}
	h.call("GET", lane("agent:main:telegram:dm:nobody", "/events"), nil, http.StatusNotFound, nil)
}

func TestAllEvents(t *testing.T) {
	h := newHarness(t)
	laneHistory(h)
	h.resolve(dm("other"))
	head := h.head()

	tests := []struct {
		query string
		want  []uint64
	}{
		{"", []uint64{1, 2, 3, 4}},
		{"?from_position=0", []uint64{1, 2, 3, 4}},
		{"?from_position=3", []uint64{3, 4}},
		{"?from_position=2&limit=2", []uint64{2, 3}},
		{fmt.Sprintf("?from_position=%d", head+1), nil},
	}
	for _, tc := range tests {
		var got eventList
		h.call("GET", "/v1/events"+tc.query, nil, http.StatusOK, &got)
		var positions []uint64
		for _, e := range got.Events {
			positions = append(positions, e.Position)
		}
		if fmt.Sprint(positions) != fmt.Sprint(tc.want) {
			t.Errorf("GET /v1/events%s = positions %v, want %v", tc.query, positions, tc.want)
		}
	}
}

// TestTimeTravel reads the lane as it was, by version and by time.
func TestTimeTravel(t *testing.T) {
	h := newHarness(t)
	key := laneHistory(h)

	tests := []struct {
		query         string
		wantVersion   uint64
		wantSuspended bool
		wantPrompt    int64
		wantUpdated   time.Time
	}{
		{"?at_version=1", 1, false, 0, start},
		{"?at_version=2", 2, false, 9, start.Add(time.Hour)},
		// A suspension does not move updated_at.
		{"?at_version=3", 3, true, 9, start.Add(time.Hour)},
		{"?at_time=" + start.Format(time.RFC3339), 1, false, 0, start},
		{"?at_time=" + start.Add(90*time.Minute).Format(time.RFC3339Nano), 2, false, 9, start.Add(time.Hour)},
		{"?at_time=" + strings.ReplaceAll(start.Add(5*time.Hour).In(time.FixedZone("X", 3600)).Format(time.RFC3339), "+", "%2B"), 3, true, 9, start.Add(time.Hour)},
	}
	for _, tc := range tests {
		var got entry
		h.call("GET", lane(key, "/state"+tc.query), nil, http.StatusOK, &got)
		if got.Version != tc.wantVersion || got.Suspended != tc.wantSuspended || got.LastPromptTokens != tc.wantPrompt || !got.UpdatedAt.Equal(tc.wantUpdated) {
			t.Errorf("GET state%s = version %d, suspended %v, prompt %d, updated %v, want %d, %v, %d, %v",
				tc.query, got.Version, got.Suspended, got.LastPromptTokens, got.UpdatedAt, tc.wantVersion, tc.wantSuspended, tc.wantPrompt, tc.wantUpdated)
		}
	}
	// Before the lane existed, and past its last version: 404.
	for _, q := range []string{"?at_time=" + start.Add(-time.Second).Format(time.RFC3339), "?at_version=4", "?at_version=0"} {
		h.call("GET", lane(key, "/state"+q), nil, http.StatusNotFound, nil)
	}
}

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	id    string
	event string
	data  string
}

// sseReader reads events from a text/event-stream body, skipping comments.
type sseReader struct{ sc *bufio.Scanner }

func newSSEReader(r *bufio.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	return &sseReader{sc: sc}
}

func (r *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	seen := false
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "":
			if seen {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.id, seen = line[4:], true
		case strings.HasPrefix(line, "event: "):
			ev.event, seen = line[7:], true
		case strings.HasPrefix(line, "data: "):
			ev.data, seen = ev.data+line[6:], true
		default:
			return ev, fmt.Errorf("unexpected line %q", line)
		}
	}
	if err := r.sc.Err(); err != nil {
		return ev, err
	}
	return ev, fmt.Errorf("stream ended")
}

// readEvents reads n events and checks they are the log's positions
// from, from+1, … in order, with id = position and event = type.
func readEvents(t *testing.T, r *sseReader, from uint64, n int) []envelope {
	t.Helper()
	var out []envelope
	for i := range n {
		ev, err := r.next()
		if err != nil {
			t.Fatalf("event %d of %d: %v", i+1, n, err)
		}
		var env envelope
		if err := json.Unmarshal([]byte(ev.data), &env); err != nil {
			t.Fatalf("event %d: decode %q: %v", i+1, ev.data, err)
		}
		want := from + uint64(i)
		if env.Position != want || ev.id != strconv.FormatUint(want, 10) || ev.event != env.Type {
			t.Fatalf("event %d = id %s, event %s, position %d (%s), want id %d, position %d, event = type",
				i+1, ev.id, ev.event, env.Position, env.Type, want, want)
		}
		out = append(out, env)
	}
	return out
}

// TestFollow reads the log as Server-Sent Events: history first, then
// events appended while the stream is open, in position order.
func TestFollow(t *testing.T) {
	h := newHarness(t)
	key := laneHistory(h)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.url("/v1/events?follow=1&from_position=2"), nil)
	resp, err := h.http.Client().Do(req)
	if err != nil {
		t.Fatalf("GET /v1/events?follow=1: %v", err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("GET /v1/events?follow=1 = %d %q, want 200 text/event-stream", resp.StatusCode, ct)
	}
	sse := newSSEReader(bufio.NewReader(resp.Body))
	got := readEvents(t, sse, 2, 2)
	if got[1].Type != "lane.suspended.v2" {
		t.Errorf("second event = %s, want lane.suspended.v2", got[1].Type)
	}

	// Live: what is appended now arrives, in order.
	const live = 25
	for i := range live {
		h.call("POST", "/v1/sessions/resolve", map[string]any{"source": dm(fmt.Sprint("live-", i))}, http.StatusOK, nil)
	}
	h.call("POST", lane(key, "/reset"), nil, http.StatusOK, nil)
	events := readEvents(t, sse, 4, live+1)
	if last := events[live]; last.Type != "lane.session_reset.v1" {
		t.Errorf("last event = %s, want lane.session_reset.v1", last.Type)
	}
	cancel()

	// A client that reconnects with Last-Event-ID resumes after it.
	req, _ = http.NewRequest("GET", h.url("/v1/events?follow=1"), nil)
	req.Header.Set("Last-Event-ID", "20")
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	resp2, err := h.http.Client().Do(req.WithContext(ctx2))
	if err != nil {
		t.Fatalf("GET /v1/events?follow=1 with Last-Event-ID: %v", err)
	}
	defer resp2.Body.Close()
	readEvents(t, newSSEReader(bufio.NewReader(resp2.Body)), 21, 5)
}
