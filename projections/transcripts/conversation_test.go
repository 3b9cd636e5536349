package transcripts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hermes/events"
)

// The timestamps are left out (every message has one, checked by
// TestConversationTimestamps).
func conversationJSON(t *testing.T, r *Reader, id string, ancestors bool) []string {
	t.Helper()
	conv, err := r.Conversation(context.Background(), id, ancestors)
	if err != nil {
		t.Fatalf("Conversation(%s, %v) error = %v", id, ancestors, err)
	}
	out := make([]string, len(conv))
	for i, m := range conv {
		if m.Timestamp <= 0 {
			t.Errorf("Conversation(%s)[%d] has no timestamp", id, i)
		}
		m.Timestamp = 0
		out[i] = marshal(t, m)
	}
	return out
}

// TestConversationTimestamps: each message carries its time in Unix
// seconds, as Hermes' get_messages_as_conversation gives it.
func TestConversationTimestamps(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	h.tr("s1", appended("s1", text("user", "q"), at(0)), appended("s1", text("assistant", "a"), at(2)))
	mustApply(t, p, h.all)
	conv, err := p.Conversation(context.Background(), "s1", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(conv) != 2 {
		t.Fatalf("Conversation = %d messages, want 2", len(conv))
	}
	for i, m := range conv {
		if want := float64(at(2*i).UnixNano()) / 1e9; m.Timestamp != want {
			t.Errorf("message %d timestamp = %v, want %v", i, m.Timestamp, want)
		}
	}
	if got := marshal(t, conv[0]); !strings.Contains(got, `"timestamp":`) {
		t.Errorf("encoded message %s has no timestamp", got)
	}
}

// marshal encodes v as the API does, without HTML escaping.
func marshal(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func TestConversationFormat(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	memory := "<memory-context>\n[System note: The following is recalled memory context, NOT new user input. " +
		"Treat as informational background data.]\n\nUser likes Go.\n</memory-context>\n\n  What is up?  "
	h.tr("s1",
		appended("s1", text("system", "  be brief  "), at(0)),
		appended("s1", text("user", memory), at(1)),
		appended("s1", events.Message{Role: "assistant", Content: jsonString("  Checking. <MEMORY-CONTEXT>x</memory-context>"),
			ToolCalls:    raw(`[{"id":"call_1","type":"function","function":{"name":"terminal","arguments":"{}"}}]`),
			FinishReason: "tool_calls", Reasoning: ptr(""), ReasoningContent: ptr(""),
			ReasoningDetails: raw(`[{"type":"summary","text":"s"}]`), CodexReasoningItems: raw(`[{"id":"rs_1"}]`),
			CodexMessageItems: raw(`[{"id":"msg_1"}]`), TokenCount: ptr(int64(7))}, at(2)),
		appended("s1", events.Message{Role: "tool", Content: jsonString("  <memory-context>raw</memory-context>  "),
			ToolCallID: "call_1", ToolName: "terminal"}, at(3)),
		appended("s1", events.Message{Role: "assistant", Content: jsonString("Done."), Reasoning: ptr("because"),
			FinishReason: "stop"}, at(4)),
		appended("s1", events.Message{Role: "user", Content: raw(`[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"u"}}]`),
			FinishReason: "ignored-for-users"}, at(5)),
		appended("s1", events.Message{Role: "assistant", Content: raw(`null`), ReasoningDetails: raw(`{"k":1}`)}, at(6)),
	)
	mustApply(t, p, h.all)
	// Stored JSON that no longer parses: tool_calls fall back to [],
	// reasoning_details and codex items to null.
	if _, err := p.conn.ExecContext(context.Background(),
		`UPDATE messages SET tool_calls = 'not json', reasoning_details = '{bad', codex_message_items = '[' WHERE id = 7`); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"role":"system","content":"  be brief  "}`,
		`{"role":"user","content":"What is up?"}`,
		`{"role":"assistant","content":"Checking.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"terminal","arguments":"{}"}}],"finish_reason":"tool_calls","reasoning_content":"","reasoning_details":[{"type":"summary","text":"s"}],"codex_reasoning_items":[{"id":"rs_1"}],"codex_message_items":[{"id":"msg_1"}]}`,
		`{"role":"tool","content":"  <memory-context>raw</memory-context>  ","tool_call_id":"call_1","tool_name":"terminal"}`,
		`{"role":"assistant","content":"Done.","finish_reason":"stop","reasoning":"because"}`,
		`{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"u"}}]}`,
		`{"role":"assistant","content":null,"tool_calls":[],"reasoning_details":null,"codex_message_items":null}`,
	}
	if diff := cmp.Diff(want, conversationJSON(t, p.Reader, "s1", false)); diff != "" {
		t.Errorf("Conversation (-want +got):\n%s", diff)
	}
}

func TestMessagesDecoding(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	h.tr("s1",
		appended("s1", events.Message{Role: "user", Content: raw(`[{"type":"text","text":"a"}]`)}, at(0)),
		appended("s1", events.Message{Role: "assistant", Content: raw(`null`), ToolCalls: raw(`[{"id":"x"}]`),
			ReasoningDetails: raw(`[{"k": 1}]`)}, at(1)),
	)
	mustApply(t, p, h.all)
	if _, err := p.conn.ExecContext(context.Background(),
		"INSERT INTO messages (session_id, role, content, tool_calls, timestamp) VALUES ('s1', 'user', ?, '{oops', 3)",
		"\x00json:[broken"); err != nil {
		t.Fatal(err)
	}
	msgs, err := p.Messages(context.Background(), "s1", false)
	if err != nil {
		t.Fatal(err)
	}
	got := marshal(t, msgs)
	want := fmt.Sprintf(`[`+
		`{"id":1,"session_id":"s1","role":"user","content":[{"type":"text","text":"a"}],"tool_call_id":null,"tool_calls":null,"tool_name":null,"timestamp":%s,"token_count":null,"finish_reason":null,"reasoning":null,"reasoning_content":null,"reasoning_details":null,"codex_reasoning_items":null,"codex_message_items":null,"active":true},`+
		`{"id":2,"session_id":"s1","role":"assistant","content":null,"tool_call_id":null,"tool_calls":[{"id":"x"}],"tool_name":null,"timestamp":%s,"token_count":null,"finish_reason":null,"reasoning":null,"reasoning_content":null,"reasoning_details":"[{\"k\":1}]","codex_reasoning_items":null,"codex_message_items":null,"active":true},`+
		`{"id":3,"session_id":"s1","role":"user","content":"\u0000json:[broken","tool_call_id":null,"tool_calls":[],"tool_name":null,"timestamp":3,"token_count":null,"finish_reason":null,"reasoning":null,"reasoning_content":null,"reasoning_details":null,"codex_reasoning_items":null,"codex_message_items":null,"active":true}]`,
		marshal(t, unixSeconds(at(0))), marshal(t, unixSeconds(at(1))))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Messages JSON (-want +got):\n%s", diff)
	}
}

func TestConversationWithAncestors(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	parent := func(child, parent string, n int) events.Event {
		return events.SessionMetadataUpdated{SessionID: child, ParentSessionID: ptr(parent), At: at(n)}
	}
	h.tr("root",
		appended("root", text("user", "q1"), at(0)),
		appended("root", text("assistant", ""), at(1)), // no content, no tool calls: not a reply
		events.TranscriptEnded{SessionID: "root", Reason: "compression", At: at(2)},
	)
	h.tr("mid", parent("mid", "root", 3),
		appended("mid", text("user", "q1"), at(4)), // replayed by the split: dropped
		appended("mid", text("assistant", "a1"), at(5)),
		appended("mid", text("user", "q1"), at(6)), // asked again after a reply: kept
	)
	h.tr("tip", parent("tip", "mid", 7),
		appended("tip", text("user", "q1"), at(8)), // replayed: dropped
		appended("tip", text("assistant", "a2"), at(9)),
	)
	h.tr("other", appended("other", text("user", "elsewhere"), at(10)))
	mustApply(t, p, h.all)

	want := []string{
		`{"role":"user","content":"q1"}`,
		`{"role":"assistant","content":""}`,
		`{"role":"assistant","content":"a1"}`,
		`{"role":"user","content":"q1"}`,
		`{"role":"assistant","content":"a2"}`,
	}
	if diff := cmp.Diff(want, conversationJSON(t, p.Reader, "tip", true)); diff != "" {
		t.Errorf("Conversation(tip, ancestors) (-want +got):\n%s", diff)
	}
	// Without ancestors nothing is dropped.
	if diff := cmp.Diff([]string{`{"role":"user","content":"q1"}`, `{"role":"assistant","content":"a2"}`},
		conversationJSON(t, p.Reader, "tip", false)); diff != "" {
		t.Errorf("Conversation(tip) (-want +got):\n%s", diff)
	}
}

func TestConversationAncestorsStopAfter100(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	const n = 105
	for i := range n {
		id := fmt.Sprintf("s%03d", i)
		if i > 0 {
			h.tr(id, events.SessionMetadataUpdated{SessionID: id, ParentSessionID: ptr(fmt.Sprintf("s%03d", i-1)), At: at(2 * i)})
		}
		h.tr(id, appended(id, text("assistant", id), at(2*i+1)))
	}
	mustApply(t, p, h.all)
	conv, err := p.Conversation(context.Background(), fmt.Sprintf("s%03d", n-1), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(conv) != 100 || string(conv[0].Content) != `"s005"` {
		t.Fatalf("Conversation over %d sessions = %d messages from %s, want 100 from s005", n, len(conv), conv[0].Content)
	}
}
