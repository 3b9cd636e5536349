package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"
)

// message is a transcript row as the API answers it.
type message struct {
	ID        int64           `json:"id"`
	SessionID string          `json:"session_id"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolName  *string         `json:"tool_name"`
	Active    bool            `json:"active"`
}

type messageList struct {
	Messages []message `json:"messages"`
}

// session is a transcript session row.
type session struct {
	ID              string   `json:"id"`
	Source          string   `json:"source"`
	Model           *string  `json:"model"`
	ParentSessionID *string  `json:"parent_session_id"`
	Title           *string  `json:"title"`
	EndedAt         *float64 `json:"ended_at"`
	EndReason       *string  `json:"end_reason"`
	MessageCount    int64    `json:"message_count"`
	InputTokens     int64    `json:"input_tokens"`
	Preview         string   `json:"preview"`
	LastActive      float64  `json:"last_active"`
	Messages        []message
}

func (h *harness) appendMessage(id, role, content string) int64 {
	h.t.Helper()
	var got struct {
		ID int64 `json:"id"`
	}
	h.call("POST", transcript(id, "/messages"), map[string]string{"role": role, "content": content}, http.StatusOK, &got)
	return got.ID
}

func roles(ms []message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Role)
	}
	return out
}

func TestMessages(t *testing.T) {
	h := newHarness(t)
	id := h.resolve(dm("1")).Entry.SessionID

	first := h.appendMessage(id, "user", "hello there")
	second := h.appendMessage(id, "assistant", "hi, how can I help?")
	if second <= first {
		t.Errorf("message ids = %d, %d, want increasing", first, second)
	}
	var tool struct {
		ID int64 `json:"id"`
	}
	h.call("POST", transcript(id, "/messages"), map[string]any{
		"role": "tool", "content": "42", "tool_call_id": "call_1", "tool_name": "calc", "token_count": 3,
	}, http.StatusOK, &tool)

	var got messageList
	h.call("GET", transcript(id, "/messages"), nil, http.StatusOK, &got)
	if r := roles(got.Messages); !slices.Equal(r, []string{"user", "assistant", "tool"}) {
		t.Errorf("GET messages = roles %v, want user, assistant, tool", r)
	}
	if m := got.Messages[0]; m.ID != first || m.SessionID != id || string(m.Content) != `"hello there"` || !m.Active {
		t.Errorf("first message = %+v, want id %d, content \"hello there\", active", m, first)
	}
	if m := got.Messages[2]; m.ToolName == nil || *m.ToolName != "calc" {
		t.Errorf("tool message = %+v, want tool_name calc", m)
	}

	// The OpenAI chat format.
	var conv struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	h.call("GET", transcript(id, "/messages?format=conversation"), nil, http.StatusOK, &conv)
	if len(conv.Messages) != 3 || string(conv.Messages[2]["tool_call_id"]) != `"call_1"` {
		t.Errorf("GET messages?format=conversation = %v, want 3 chat messages, the last with tool_call_id", conv.Messages)
	}
	if _, ok := conv.Messages[0]["id"]; ok {
		t.Errorf("conversation message has an id: %v, want the chat format", conv.Messages[0])
	}

	// Rewrite replaces the transcript.
	var rewritten struct {
		IDs []int64 `json:"ids"`
	}
	h.call("PUT", transcript(id, "/messages"), map[string]any{"messages": []map[string]string{
		{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},
	}}, http.StatusOK, &rewritten)
	if len(rewritten.IDs) != 2 {
		t.Errorf("PUT messages = ids %v, want 2", rewritten.IDs)
	}
	h.call("GET", transcript(id, "/messages"), nil, http.StatusOK, &got)
	if len(got.Messages) != 2 || string(got.Messages[0].Content) != `"one"` {
		t.Errorf("GET messages after rewrite = %+v, want one, two", got.Messages)
	}

	// A session the read model does not know is 404.
	h.call("GET", transcript("20990101_000000_00000000", "/messages"), nil, http.StatusNotFound, nil)
	h.call("POST", transcript("20990101_000000_00000000", "/messages"), map[string]string{"role": "user", "content": "x"}, http.StatusNotFound, nil)
}

func TestRewind(t *testing.T) {
	h := newHarness(t)
	id := h.resolve(dm("1")).Entry.SessionID
	for _, m := range [][2]string{{"user", "first question"}, {"assistant", "a1"}, {"user", "second question"}, {"assistant", "a2"}} {
		h.appendMessage(id, m[0], m[1])
	}
	var got struct {
		RewoundCount int    `json:"rewound_count"`
		TurnsUndone  int    `json:"turns_undone"`
		TargetText   string `json:"target_text"`
	}
	h.call("POST", transcript(id, "/rewind"), map[string]int{"n": 1}, http.StatusOK, &got)
	if got.RewoundCount != 2 || got.TurnsUndone != 1 || got.TargetText != "second question" {
		t.Errorf("rewind n=1 = %+v, want 2 rewound, 1 turn, second question", got)
	}
	var msgs messageList
	h.call("GET", transcript(id, "/messages"), nil, http.StatusOK, &msgs)
	if len(msgs.Messages) != 2 {
		t.Errorf("GET messages after rewind = %d messages, want 2", len(msgs.Messages))
	}
	h.call("GET", transcript(id, "/messages?include_inactive=true"), nil, http.StatusOK, &msgs)
	if len(msgs.Messages) != 4 || msgs.Messages[3].Active {
		t.Errorf("GET messages?include_inactive = %+v, want 4 with the last inactive", msgs.Messages)
	}
	// An empty body rewinds one turn.
	h.call("POST", transcript(id, "/rewind"), nil, http.StatusOK, &got)
	if got.TargetText != "first question" {
		t.Errorf("rewind again = %+v, want first question", got)
	}
	h.call("POST", transcript(id, "/rewind"), nil, http.StatusNotFound, nil)
}

func TestTitles(t *testing.T) {
	h := newHarness(t)
	a := h.resolve(dm("a")).Entry.SessionID
	h.clock.Set(start.Add(time.Minute))
	b := h.resolve(dm("b")).Entry.SessionID

	var set struct {
		SessionID string  `json:"session_id"`
		Title     *string `json:"title"`
	}
	h.call("PUT", transcript(a, "/title"), map[string]string{"title": "  Trip \u200bplanning  "}, http.StatusOK, &set)
	if set.SessionID != a || set.Title == nil || *set.Title != "Trip planning" {
		t.Errorf("PUT title = %+v, want the sanitised title Trip planning", set)
	}
	// Setting a session's own title again is fine.
	h.call("PUT", transcript(a, "/title"), map[string]string{"title": "Trip planning"}, http.StatusOK, nil)
	// Control characters, NUL among them, are stripped as sanitize_title
	// strips them, not refused (upstream's
	// test_sanitize_applied_in_set_session_title).
	h.call("PUT", transcript(b, "/title"), map[string]string{"title": "  hello\u0000 world\u0007  "}, http.StatusOK, &set)
	if set.Title == nil || *set.Title != "hello world" {
		t.Errorf("PUT title with NUL and BEL = %v, want the sanitised title hello world", set.Title)
	}
	var clean struct {
		Title *string `json:"title"`
	}
	h.call("GET", "/v1/titles/sanitize?title="+url.QueryEscape("a\x00b"), nil, http.StatusOK, &clean)
	if clean.Title == nil || *clean.Title != "ab" {
		t.Errorf("GET titles/sanitize of a NUL = %v, want ab", clean.Title)
	}
	h.call("PUT", transcript(b, "/title"), map[string]string{"title": ""}, http.StatusOK, nil)

	var next struct {
		Title string `json:"title"`
	}
	h.call("GET", "/v1/titles/next?title="+url.QueryEscape("Trip planning"), nil, http.StatusOK, &next)
	if next.Title != "Trip planning #2" {
		t.Errorf("GET titles/next = %q, want Trip planning #2", next.Title)
	}
	h.call("PUT", transcript(b, "/title"), map[string]string{"title": next.Title}, http.StatusOK, nil)

	var resolved struct {
		SessionID string `json:"session_id"`
	}
	h.call("GET", "/v1/titles/resolve?title="+url.QueryEscape("Trip planning"), nil, http.StatusOK, &resolved)
	if resolved.SessionID != b {
		t.Errorf("GET titles/resolve = %s, want the newest in the lineage %s", resolved.SessionID, b)
	}
	h.call("GET", "/v1/titles/resolve?title=nothing+like+it", nil, http.StatusNotFound, nil)

	var row session
	h.call("GET", transcript(a, ""), nil, http.StatusOK, &row)
	if row.Title == nil || *row.Title != "Trip planning" {
		t.Errorf("GET transcript = title %v, want Trip planning", row.Title)
	}
	// "" clears the title, and frees it.
	h.call("PUT", transcript(a, "/title"), map[string]string{"title": ""}, http.StatusOK, &set)
	if set.Title != nil {
		t.Errorf("PUT title \"\" = %v, want null", set.Title)
	}
	h.call("PUT", transcript(b, "/title"), map[string]string{"title": "Trip planning"}, http.StatusOK, nil)
}

func TestSearch(t *testing.T) {
	h := newHarness(t)
	tg := h.resolve(dm("1")).Entry.SessionID
	var slack resolved
	h.call("POST", "/v1/sessions/resolve", map[string]any{"source": source{Platform: "slack", ChatID: "C1"}}, http.StatusOK, &slack)
	h.appendMessage(tg, "user", "where is the lighthouse keeper")
	h.appendMessage(tg, "assistant", "the keeper lives by the lighthouse")
	h.appendMessage(slack.Entry.SessionID, "user", "lighthouse photos please")

	type result struct {
		ID        int64  `json:"id"`
		SessionID string `json:"session_id"`
		Role      string `json:"role"`
		Snippet   string `json:"snippet"`
		Source    string `json:"source"`
		Context   []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"context"`
	}
	tests := []struct {
		query string
		want  int
	}{
		{"q=lighthouse", 3},
		{"q=lighthouse&source=slack", 1},
		{"q=lighthouse&exclude_source=slack", 2},
		{"q=lighthouse&role=assistant", 1},
		{"q=lighthouse&limit=1", 1},
		{"q=lighthouse&limit=2&offset=2", 1},
		{"q=keeper", 2},
		{"q=submarine", 0},
		{"q=", 0},
	}
	for _, tc := range tests {
		var got struct {
			Results []result `json:"results"`
		}
		r := h.call("GET", "/v1/search?"+tc.query, nil, http.StatusOK, &got)
		if len(got.Results) != tc.want || got.Results == nil {
			t.Errorf("GET /v1/search?%s = %s, want %d results", tc.query, r.body, tc.want)
		}
		for _, res := range got.Results {
			if res.ID == 0 || res.SessionID == "" || res.Role == "" || res.Source == "" || res.Snippet == "" {
				t.Errorf("GET /v1/search?%s result = %+v, want id, session_id, role, source, snippet", tc.query, res)
			}
		}
	}
}

// TestExportWithoutMessages: a session without messages exports
// "messages": [] (Hermes' export_session), alone and in the export of all.
func TestExportWithoutMessages(t *testing.T) {
	h := newHarness(t)
	id := h.resolve(dm("empty")).Entry.SessionID
	for _, path := range []string{transcript(id, "/export"), "/v1/export"} {
		r := h.call("GET", path, nil, http.StatusOK, nil)
		if !bytes.Contains(r.body, []byte(`"messages":[]`)) || bytes.Contains(r.body, []byte(`"messages":null`)) {
			t.Errorf("GET %s = %s, want \"messages\": []", path, r.body)
		}
	}
}

func TestLineageRecentExport(t *testing.T) {
	h := newHarness(t)
	parent := h.resolve(dm("1")).Entry.SessionID
	h.appendMessage(parent, "user", "first session")
	h.clock.Set(start.Add(time.Minute))
	var reset entry
	h.call("POST", lane("agent:main:telegram:dm:1", "/reset"), nil, http.StatusOK, &reset)
	child := reset.SessionID
	h.appendMessage(child, "user", "second session")

	var row session
	h.call("PATCH", transcript(child, ""), map[string]any{"parent_session_id": parent, "model": "gpt-test", "input_tokens": 10}, http.StatusOK, &row)
	if row.ParentSessionID == nil || *row.ParentSessionID != parent || row.Model == nil || *row.Model != "gpt-test" || row.InputTokens != 10 {
		t.Errorf("PATCH transcript = %+v, want parent %s, model gpt-test, 10 input tokens", row, parent)
	}

	type node struct {
		ID    string `json:"id"`
		Depth int    `json:"depth"`
	}
	var lin struct {
		Ancestors   []node `json:"ancestors"`
		Descendants []node `json:"descendants"`
	}
	h.call("GET", transcript(child, "/lineage"), nil, http.StatusOK, &lin)
	if len(lin.Ancestors) != 2 || lin.Ancestors[1].ID != parent || lin.Ancestors[1].Depth != 1 {
		t.Errorf("GET lineage of child = %+v, want itself then %s", lin.Ancestors, parent)
	}
	h.call("GET", transcript(parent, "/lineage"), nil, http.StatusOK, &lin)
	if len(lin.Descendants) != 2 || lin.Descendants[1].ID != child {
		t.Errorf("GET lineage of parent = %+v, want itself then %s", lin.Descendants, child)
	}

	var recent struct {
		Sessions []session `json:"sessions"`
	}
	h.call("GET", "/v1/transcripts/recent?limit=10", nil, http.StatusOK, &recent)
	if len(recent.Sessions) != 2 || recent.Sessions[0].ID != child || recent.Sessions[0].Preview != "second session" || recent.Sessions[0].LastActive == 0 {
		t.Errorf("GET transcripts/recent = %+v, want the child first with its preview", recent.Sessions)
	}
	h.call("GET", "/v1/transcripts/recent?limit=1", nil, http.StatusOK, &recent)
	if len(recent.Sessions) != 1 {
		t.Errorf("GET transcripts/recent?limit=1 = %d sessions, want 1", len(recent.Sessions))
	}

	var one struct {
		ID       string    `json:"id"`
		Messages []message `json:"messages"`
	}
	h.call("GET", transcript(parent, "/export"), nil, http.StatusOK, &one)
	if one.ID != parent || len(one.Messages) != 1 {
		t.Errorf("GET export = %+v, want %s with 1 message", one, parent)
	}
	var all struct {
		Sessions []struct {
			ID       string    `json:"id"`
			Messages []message `json:"messages"`
		} `json:"sessions"`
	}
	h.call("GET", "/v1/export", nil, http.StatusOK, &all)
	if len(all.Sessions) != 2 {
		t.Errorf("GET /v1/export = %d sessions, want 2", len(all.Sessions))
	}
	h.call("GET", "/v1/export?source=slack", nil, http.StatusOK, &all)
	if len(all.Sessions) != 0 {
		t.Errorf("GET /v1/export?source=slack = %d sessions, want 0", len(all.Sessions))
	}
	h.call("GET", "/v1/export?source=telegram", nil, http.StatusOK, &all)
	if len(all.Sessions) != 2 {
		t.Errorf("GET /v1/export?source=telegram = %d sessions, want 2", len(all.Sessions))
	}

	var stats struct {
		Models []struct {
			Model        string `json:"model"`
			SessionCount int64  `json:"session_count"`
			TotalInput   int64  `json:"total_input"`
		} `json:"models"`
	}
	h.call("GET", "/v1/stats/tokens", nil, http.StatusOK, &stats)
	if len(stats.Models) != 1 || stats.Models[0].Model != "gpt-test" || stats.Models[0].TotalInput != 10 {
		t.Errorf("GET /v1/stats/tokens = %+v, want gpt-test with 10 input tokens", stats.Models)
	}
}

func TestClearEndDeletePrune(t *testing.T) {
	h := newHarness(t)
	a := h.resolve(dm("a")).Entry.SessionID
	b := h.resolve(dm("b")).Entry.SessionID
	c := h.resolve(dm("c")).Entry.SessionID
	for _, id := range []string{a, b, c} {
		h.appendMessage(id, "user", "hello")
	}

	var done map[string]any
	h.call("POST", transcript(a, "/clear"), nil, http.StatusOK, &done)
	if done["cleared"] != true || done["session_id"] != a {
		t.Errorf("POST clear = %v, want cleared", done)
	}
	var msgs messageList
	h.call("GET", transcript(a, "/messages"), nil, http.StatusOK, &msgs)
	if len(msgs.Messages) != 0 {
		t.Errorf("GET messages after clear = %d, want 0", len(msgs.Messages))
	}

	h.call("DELETE", transcript(a, ""), nil, http.StatusOK, &done)
	if done["deleted"] != true {
		t.Errorf("DELETE transcript = %v, want deleted", done)
	}
	h.call("GET", transcript(a, ""), nil, http.StatusNotFound, nil)
	h.call("DELETE", transcript(a, ""), nil, http.StatusNotFound, nil)

	h.call("POST", transcript(b, "/end"), map[string]string{"reason": "user_exit"}, http.StatusOK, &done)
	var row session
	h.call("GET", transcript(b, ""), nil, http.StatusOK, &row)
	if row.EndedAt == nil || row.EndReason == nil || *row.EndReason != "user_exit" {
		t.Errorf("GET transcript after end = %+v, want ended with user_exit", row)
	}

	// Only ended sessions older than the cut are pruned.
	var pruned struct {
		Deleted int `json:"deleted"`
	}
	h.call("POST", "/v1/maintenance/prune-sessions", map[string]int{"older_than_days": 1}, http.StatusOK, &pruned)
	if pruned.Deleted != 0 {
		t.Errorf("prune-sessions now = %d, want 0", pruned.Deleted)
	}
	h.call("POST", "/v1/clock", map[string]string{"advance": "49h"}, http.StatusOK, nil)
	h.call("POST", "/v1/maintenance/prune-sessions", map[string]any{"older_than_days": 1, "source": "slack"}, http.StatusOK, &pruned)
	if pruned.Deleted != 0 {
		t.Errorf("prune-sessions of slack = %d, want 0", pruned.Deleted)
	}
	h.call("POST", "/v1/maintenance/prune-sessions", map[string]int{"older_than_days": 1}, http.StatusOK, &pruned)
	if pruned.Deleted != 1 {
		t.Errorf("prune-sessions after 49h = %d, want 1 (the ended session)", pruned.Deleted)
	}
	h.call("GET", transcript(b, ""), nil, http.StatusNotFound, nil)
	h.call("GET", transcript(c, ""), nil, http.StatusOK, nil)
}
