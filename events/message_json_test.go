package events_test

import (
	"encoding/json"
	"testing"
	"time"

	"hermes/events"
)

// TestEncodeMessageAppendedAsMarshal: Encode writes a message_appended
// event byte for byte as json.Marshal writes it, for plain text, for text
// json.Marshal escapes, and for raw JSON it compacts or escapes for HTML.
func TestEncodeMessageAppendedAsMarshal(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 30, 15, 123456789, time.FixedZone("x", 3600))
	s := func(v string) *string { return &v }
	n := int64(47)
	for _, tc := range []struct {
		name string
		e    events.MessageAppended
	}{
		{"plain user message", events.MessageAppended{SessionID: "20260301_093015_abc123", At: at,
			Message: events.Message{Role: "user", Content: json.RawMessage(`"Restart the server, then deploy."`), TokenCount: &n}}},
		{"empty message", events.MessageAppended{At: at}},
		{"every field", events.MessageAppended{SessionID: "s", At: at.UTC(), Message: events.Message{
			Role: "assistant", Content: json.RawMessage(`[ {"type": "text", "text": "a b"} ]`), ToolCallID: "call_1",
			ToolCalls: json.RawMessage(`[{"id":"call_1","function":{"name":"f","arguments":"{}"}}]`), ToolName: "terminal",
			TokenCount: new(int64), FinishReason: "stop", Reasoning: s(""), ReasoningContent: s("thinking…"),
			ReasoningDetails: json.RawMessage(`{"a" : 1}`), CodexReasoningItems: json.RawMessage(`null`),
			CodexMessageItems: json.RawMessage("[\n1,\t2]")}}},
		{"text json.Marshal escapes", events.MessageAppended{SessionID: `a"b\c`, At: at, Message: events.Message{
			Role: "tool\n", ToolName: "<x>", FinishReason: "\u2028", Reasoning: s("\x01&")}}},
		{"raw JSON with HTML characters", events.MessageAppended{At: at, Message: events.Message{
			Content: json.RawMessage(`"<b>fish & chips</b>"`), ToolCalls: json.RawMessage("[\"\u2029\", \"\\u2028\"]")}}},
		{"non-ASCII content", events.MessageAppended{At: at, Message: events.Message{
			Role: "user", Content: json.RawMessage(`"第一条消息，你好 ✓"`)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given what json.Marshal writes for the event.
			want, err := json.Marshal(tc.e)
			if err != nil {
				t.Fatal(err)
			}

			// When Encode writes it.
			got, err := events.Encode(tc.e)

			// Then the bytes are the same.
			if err != nil {
				t.Fatalf("Encode error = %v", err)
			}
			if string(got) != string(want) {
				t.Errorf("Encode =\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestEncodeMessageAppendedRefusesWhatMarshalRefuses: raw JSON that does
// not parse and a time json.Marshal cannot write are errors, as before.
func TestEncodeMessageAppendedRefusesWhatMarshalRefuses(t *testing.T) {
	for name, e := range map[string]events.MessageAppended{
		"broken raw JSON": {At: time.Unix(0, 0), Message: events.Message{Content: json.RawMessage(`{"a":`)}},
		"year 10000":      {At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := json.Marshal(e); err == nil {
				t.Fatal("control: json.Marshal accepts the event; the case tests nothing")
			}
			if data, err := events.Encode(e); err == nil {
				t.Errorf("Encode = %s, want an error", data)
			}
		})
	}
}
