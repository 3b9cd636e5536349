package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The queue's semantics over HTTP (catalogue §5): the worked example, the
// empty-slot edge case, clearing on reset, the cap, TTL, idempotent takes.
// api/queue_test.go holds the contract-level checks.

// queueAnswer is GET …/queue.
type queueAnswer struct {
	Depth    int              `json:"depth"`
	Slot     *queueEntryJSON  `json:"slot"`
	Overflow []queueEntryJSON `json:"overflow"`
}

type queueEntryJSON struct {
	ItemID    string          `json:"item_id"`
	Kind      string          `json:"kind"`
	Text      string          `json:"text"`
	Message   json.RawMessage `json:"message"`
	QueuedAt  time.Time       `json:"queued_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	ExpiresAt time.Time       `json:"expires_at"`
}

type queueEnqueued struct {
	Depth  int    `json:"depth"`
	ItemID string `json:"item_id"`
}

type queueTaken struct {
	ItemID  string          `json:"item_id"`
	Text    string          `json:"text"`
	Kind    string          `json:"kind"`
	Message json.RawMessage `json:"message"`
}

// queueShapeJSON is the queue as texts: slot ("" when free), overflow, depth.
type queueShapeJSON struct {
	Slot     string
	Overflow []string
	Depth    int
}

// queueLane resolves a lane for chat. The queue endpoints read the log, not
// the read model, so before teardown it waits for the read model to catch
// up: a runner cancelled in the middle of a batch reports an error.
func (h *harness) queueLane(chat string) string {
	h.t.Helper()
	key := h.resolve(dm(chat)).Entry.SessionKey
	h.t.Cleanup(func() { h.do("GET", lane(key, ""), nil) })
	return key
}

func (h *harness) queueShape(key string) queueShapeJSON {
	h.t.Helper()
	var q queueAnswer
	h.call("GET", lane(key, "/queue"), nil, http.StatusOK, &q)
	s := queueShapeJSON{Depth: q.Depth, Overflow: []string{}}
	if q.Slot != nil {
		s.Slot = q.Slot.Text
	}
	for _, it := range q.Overflow {
		s.Overflow = append(s.Overflow, it.Text)
	}
	return s
}

func (h *harness) queueEnqueue(key, kind, text string) queueEnqueued {
	h.t.Helper()
	var out queueEnqueued
	h.call("POST", lane(key, "/queue"), map[string]any{"text": text, "kind": kind}, http.StatusOK, &out)
	return out
}

// queueTake takes the next item; "" when the answer is 204.
func (h *harness) queueTake(key string) string {
	h.t.Helper()
	r := h.do("POST", lane(key, "/queue/next"), nil)
	switch r.status {
	case http.StatusNoContent:
		if len(r.body) != 0 {
			h.t.Errorf("POST /queue/next = 204 with body %q, want none", r.body)
		}
		return ""
	case http.StatusOK:
		var tk queueTaken
		if err := json.Unmarshal(r.body, &tk); err != nil {
			h.t.Fatalf("decode %s: %v", r.body, err)
		}
		return tk.Text
	}
	h.t.Fatalf("POST /queue/next = %d %s", r.status, r.body)
	return ""
}

// TestQueueWorkedExample is catalogue §5's worked example over HTTP.
func TestQueueWorkedExample(t *testing.T) {
	h := newHarness(t)
	key := h.queueLane("q1")
	ids := map[string]string{}
	steps := []struct {
		name string
		do   func() string // returns what ran
		runs string
		want queueShapeJSON
	}{
		{"enqueue A", func() string { ids["A"] = h.queueEnqueue(key, "queue", "A").ItemID; return "" }, "", queueShapeJSON{"A", []string{}, 1}},
		{"enqueue B", func() string { ids["B"] = h.queueEnqueue(key, "queue", "B").ItemID; return "" }, "", queueShapeJSON{"A", []string{"B"}, 2}},
		{"enqueue C", func() string { ids["C"] = h.queueEnqueue(key, "queue", "C").ItemID; return "" }, "", queueShapeJSON{"A", []string{"B", "C"}, 3}},
		{"turn ends: A runs, B staged", func() string { return h.queueTake(key) }, "A", queueShapeJSON{"B", []string{"C"}, 2}},
		{"turn ends: B runs, C staged", func() string { return h.queueTake(key) }, "B", queueShapeJSON{"C", []string{}, 1}},
		{"turn ends: C runs", func() string { return h.queueTake(key) }, "C", queueShapeJSON{"", []string{}, 0}},
		{"nothing queued: 204", func() string { return h.queueTake(key) }, "", queueShapeJSON{"", []string{}, 0}},
	}
	for _, st := range steps {
		if got := st.do(); got != st.runs {
			t.Errorf("%s: runs %q, want %q", st.name, got, st.runs)
		}
		if diff := cmp.Diff(st.want, h.queueShape(key)); diff != "" {
			t.Errorf("%s: queue mismatch (-want +got):\n%s", st.name, diff)
		}
	}
	if len(ids) != 3 || ids["A"] == ids["B"] || !strings.HasPrefix(ids["A"], "q_") {
		t.Errorf("item ids = %v, want three distinct q_… ids", ids)
	}

	// The queue is on the lane stream.
	var evs struct {
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
	}
	h.call("GET", lane(key, "/events"), nil, http.StatusOK, &evs)
	var types []string
	for _, e := range evs.Events {
		types = append(types, e.Type)
	}
	want := []string{"lane.session_created.v1",
		"lane.queue_item_added.v1", "lane.queue_item_added.v1", "lane.queue_item_added.v1",
		"lane.queue_item_taken.v1", "lane.queue_item_taken.v1", "lane.queue_item_taken.v1"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("lane events (-want +got):\n%s", diff)
	}
}

// TestQueueEmptySlotEdgeCase: the slot item expired (TTL) while X and Y wait
// in the overflow: X runs and Y is not staged.
func TestQueueEmptySlotEdgeCase(t *testing.T) {
	h := newHarness(t)
	key := h.queueLane("q2")
	h.queueEnqueue(key, "queue", "W")
	h.clock.Set(start.Add(2 * time.Hour))
	h.queueEnqueue(key, "queue", "X")
	h.queueEnqueue(key, "queue", "Y")
	h.clock.Set(start.Add(24*time.Hour + time.Second))

	var q queueAnswer
	h.call("GET", lane(key, "/queue"), nil, http.StatusOK, &q)
	if q.Depth != 2 || q.Slot != nil || len(q.Overflow) != 2 {
		t.Fatalf("GET /queue after W went stale = %+v, want depth 2, no slot, X and Y waiting", q)
	}
	if want := start.Add(26 * time.Hour); !q.Overflow[0].ExpiresAt.Equal(want) {
		t.Errorf("X expires_at = %v, want %v", q.Overflow[0].ExpiresAt, want)
	}
	if got := h.queueTake(key); got != "X" {
		t.Fatalf("take = %q, want X", got)
	}
	if diff := cmp.Diff(queueShapeJSON{"", []string{"Y"}, 1}, h.queueShape(key)); diff != "" {
		t.Errorf("after X ran (-want +got):\n%s", diff)
	}
	if got := h.queueTake(key); got != "Y" {
		t.Errorf("take = %q, want Y", got)
	}
}

// TestQueueClearedOnReset: /new discards the overflow and keeps the slot;
// DELETE …/queue clears the rest.
func TestQueueClearedOnReset(t *testing.T) {
	h := newHarness(t)
	key := h.queueLane("q3")
	for _, text := range []string{"A", "B", "C"} {
		h.queueEnqueue(key, "queue", text)
	}
	h.call("POST", lane(key, "/reset"), nil, http.StatusOK, nil)
	if diff := cmp.Diff(queueShapeJSON{"A", []string{}, 1}, h.queueShape(key)); diff != "" {
		t.Errorf("after /new (-want +got):\n%s", diff)
	}
	h.queueEnqueue(key, "queue", "D")
	var cleared struct {
		Cleared int `json:"cleared"`
	}
	h.call("DELETE", lane(key, "/queue"), nil, http.StatusOK, &cleared)
	if cleared.Cleared != 2 {
		t.Errorf("DELETE /queue cleared = %d, want 2", cleared.Cleared)
	}
	h.call("DELETE", lane(key, "/queue"), nil, http.StatusOK, &cleared)
	if cleared.Cleared != 0 {
		t.Errorf("DELETE /queue on an empty queue cleared = %d, want 0", cleared.Cleared)
	}
	if got := h.queueTake(key); got != "" {
		t.Errorf("take after clear = %q, want 204", got)
	}
}

// TestQueueCap: the 33rd item is refused with 409 conflict and changes
// nothing.
func TestQueueCap(t *testing.T) {
	h := newHarness(t)
	key := h.queueLane("q4")
	for i := range 32 {
		if got := h.queueEnqueue(key, "queue", fmt.Sprint(i+1)).Depth; got != i+1 {
			t.Fatalf("enqueue %d: depth %d", i+1, got)
		}
	}
	before := h.head()
	for _, kind := range []string{"queue", "followup"} {
		r := h.do("POST", lane(key, "/queue"), map[string]any{"text": "33", "kind": kind})
		code, err := errorBody(r)
		if r.status != http.StatusConflict || err != nil || code != "conflict" || !strings.Contains(string(r.body), `"queue full (32 items)"`) {
			t.Errorf("33rd %s = %d %s, want 409 conflict \"queue full (32 items)\"", kind, r.status, r.body)
		}
	}
	if h.head() != before {
		t.Errorf("a refused enqueue appended events")
	}
	h.queueTake(key)
	h.queueEnqueue(key, "queue", "33")
}

func TestQueueFollowupReplaces(t *testing.T) {
	h := newHarness(t)
	key := h.queueLane("q5")
	first := h.queueEnqueue(key, "followup", "fix that bug")
	second := h.queueEnqueue(key, "followup", "actually the other one")
	if second.Depth != 1 || second.ItemID == first.ItemID {
		t.Errorf("second follow-up = %+v, want depth 1 and a new item (interrupt mode replaces)", second)
	}
	var tk queueTaken
	h.call("POST", lane(key, "/queue/next"), nil, http.StatusOK, &tk)
	if tk.ItemID != second.ItemID || tk.Text != "actually the other one" || tk.Kind != "followup" || string(tk.Message) != "null" {
		t.Errorf("taken = %+v, want the second follow-up with message null", tk)
	}
}

func TestQueueMessageRoundTrip(t *testing.T) {
	h := newHarness(t)
	key := h.queueLane("q6")
	h.call("POST", lane(key, "/queue"), map[string]any{"kind": "queue", "message": map[string]any{"media_urls": []string{"a.png"}}}, http.StatusOK, nil)
	var q queueAnswer
	h.call("GET", lane(key, "/queue"), nil, http.StatusOK, &q)
	if q.Slot == nil || string(q.Slot.Message) != `{"media_urls":["a.png"]}` || !q.Slot.QueuedAt.Equal(start) {
		t.Errorf("GET /queue slot = %+v", q.Slot)
	}
	var tk queueTaken
	h.call("POST", lane(key, "/queue/next"), map[string]any{}, http.StatusOK, &tk)
	if string(tk.Message) != `{"media_urls":["a.png"]}` || tk.Text != "" {
		t.Errorf("taken = %+v", tk)
	}
}

func TestQueueIdempotentTake(t *testing.T) {
	h := newHarness(t)
	key := h.queueLane("q7")
	h.queueEnqueue(key, "queue", "A")
	take := func(idem string) response {
		return h.send(request{method: "POST", path: lane(key, "/queue/next"), header: map[string]string{"Idempotency-Key": idem}})
	}
	first, retry := take("k1"), take("k1")
	if first.status != http.StatusOK || retry.status != http.StatusOK || string(first.body) != string(retry.body) {
		t.Errorf("take, retried = %d %s, %d %s, want the same item twice", first.status, first.body, retry.status, retry.body)
	}
	if r := take("k2"); r.status != http.StatusNoContent {
		t.Errorf("a new take = %d %s, want 204", r.status, r.body)
	}
	enq := func() response {
		return h.send(request{method: "POST", path: lane(key, "/queue"), body: map[string]any{"text": "B", "kind": "queue"},
			header: map[string]string{"Idempotency-Key": "e1"}})
	}
	a, b := enq(), enq()
	if string(a.body) != string(b.body) || h.queueShape(key).Depth != 1 {
		t.Errorf("enqueue, retried = %s, %s, depth %d, want the same answer and depth 1", a.body, b.body, h.queueShape(key).Depth)
	}
}

func TestQueueDrainingKeepsItems(t *testing.T) {
	h := newHarness(t)
	key := h.queueLane("q8")
	h.server.SetDraining(true)
	h.queueEnqueue(key, "queue", "A")
	r := h.do("POST", lane(key, "/queue/next"), nil)
	if code, _ := errorBody(r); r.status != http.StatusServiceUnavailable || code != "unavailable" {
		t.Errorf("take while draining = %d %s, want 503 unavailable", r.status, r.body)
	}
	h.server.SetDraining(false)
	if got := h.queueTake(key); got != "A" {
		t.Errorf("take after the drain = %q, want A", got)
	}
}

func TestQueueRequestLimits(t *testing.T) {
	h := newHarness(t)
	key := h.queueLane("q9")
	missing := "agent:main:telegram:dm:nobody"
	big := strings.Repeat("x", 64<<10+1)
	bigMessage := `{"blob":"` + strings.Repeat("x", 256<<10) + `"}`
	tests := []struct {
		name   string
		method string
		path   string
		body   any
		status int
		code   string
	}{
		{"no body", "POST", lane(key, "/queue"), nil, 400, "invalid_argument"},
		{"text of wrong type", "POST", lane(key, "/queue"), `{"text":1,"kind":"queue"}`, 400, "invalid_argument"},
		{"empty text", "POST", lane(key, "/queue"), `{"text":"","kind":"queue"}`, 400, "invalid_argument"},
		{"null message and no text", "POST", lane(key, "/queue"), `{"kind":"queue","message":null}`, 400, "invalid_argument"},
		{"message a string", "POST", lane(key, "/queue"), `{"text":"a","kind":"queue","message":"x"}`, 400, "invalid_argument"},
		{"trailing data", "POST", lane(key, "/queue"), `{"text":"a","kind":"queue"} {}`, 400, "invalid_argument"},
		{"text over 64 KiB", "POST", lane(key, "/queue"), map[string]any{"text": big, "kind": "queue"}, 413, "payload_too_large"},
		{"message over 256 KiB", "POST", lane(key, "/queue"), `{"kind":"queue","message":` + bigMessage + `}`, 413, "payload_too_large"},
		{"take on a missing lane", "POST", lane(missing, "/queue/next"), nil, 404, "not_found"},
		{"take with a body", "POST", lane(key, "/queue/next"), `{"n":2}`, 400, "invalid_argument"},
		{"clear a missing lane", "DELETE", lane(missing, "/queue"), nil, 404, "not_found"},
		{"clear with a body", "DELETE", lane(key, "/queue"), `{"all":true}`, 400, "invalid_argument"},
	}
	before := h.head()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(tc.method, tc.path, tc.body)
			code, err := errorBody(r)
			if r.status != tc.status || err != nil || code != tc.code {
				t.Errorf("%s %s = %d %.200s (%v), want %d %s", tc.method, tc.path, r.status, r.body, err, tc.status, tc.code)
			}
		})
	}
	if h.head() != before {
		t.Errorf("rejected requests appended events")
	}
	// At the limits exactly, the item is accepted.
	h.call("POST", lane(key, "/queue"), map[string]any{"text": big[1:], "kind": "queue",
		"message": json.RawMessage(`{"blob":"` + strings.Repeat("x", 256<<10-11) + `"}`)}, http.StatusOK, nil)
}
