package events_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"hermes/events"
)

// TestErase_LeavesNoMarker: given an event holding a marker in every
// personal field, when an erasure erases it, then the encoded result holds
// no marker, the erasure says it changed the event, and erasing again
// changes nothing (Erase is idempotent). Imported events are erased like
// the native ones they stand for.
func TestErase_LeavesNoMarker(t *testing.T) {
	const mark = "MARK-5d1e"
	at := time.Date(2026, 5, 14, 9, 30, 15, 0, time.UTC)
	str := func(s string) *string { return &s }
	origin := events.Source{Platform: "telegram", ChatID: "42", ChatType: "dm", ChatName: mark, UserID: "42", UserName: mark}
	transcript := events.TranscriptErased{SessionID: "s", Scope: events.EraseTranscript, Reason: events.ErasureOnRequest, At: at}
	messagesOnly := events.TranscriptErased{SessionID: "s", Scope: events.EraseMessages, Reason: events.ErasureOnRequest, At: at}
	person := events.LaneErased{ErasureID: "er_1", QueueTexts: true, Reason: events.ErasurePerson, At: at}
	topics := events.TopicsErased{ChatID: "42", ErasureID: "er_1", Reason: events.ErasurePerson, At: at}

	tests := []struct {
		name    string
		erasure events.Erasure
		earlier events.Event
	}{
		{"an appended message", messagesOnly, events.MessageAppended{SessionID: "s",
			Message: events.Message{Role: "user", Content: json.RawMessage(`"` + mark + `"`), Reasoning: str(mark)}, At: at}},
		{"imported messages", messagesOnly, events.MessagesImported{SessionID: "s", Messages: []events.ImportedMessage{
			{ID: 1, Role: "user", Content: str(mark), Timestamp: 1, Active: true},
			{ID: 2, Role: "assistant", ToolCalls: str(`[{"arguments":"` + mark + `"}]`), Reasoning: str(mark),
				ReasoningContent: str(mark), ReasoningDetails: str(mark), CodexReasoningItems: str(mark), CodexMessageItems: str(mark),
				Extra: map[string]json.RawMessage{"platform_message_id": json.RawMessage(`"` + mark + `"`)}, Timestamp: 2},
		}, At: at}},
		{"an imported session row", transcript, events.SessionImported{SessionID: "s", Source: "telegram",
			UserID: str(mark), SystemPrompt: str(mark), ModelConfig: str(mark), Title: str(mark), HandoffError: str(mark),
			Extra: map[string]json.RawMessage{"note": json.RawMessage(`"` + mark + `"`)}, At: at}},
		{"a title", transcript, events.TitleSet{SessionID: "s", Title: mark, At: at}},
		{"a session's meta value (a /goal)", transcript, events.SessionMetaSet{SessionID: "s", Key: "goal:s", Value: mark, At: at}},
		{"a handoff's error", transcript, events.HandoffFailed{SessionID: "s", Error: mark, At: at}},
		{"a Telegram topic mode's user", topics, events.TopicModeEnabled{ChatID: "42", UserID: mark, At: at}},
		{"a Telegram topic binding's user", topics, events.TopicBound{ChatID: "42", ThreadID: "7", UserID: mark, SessionKey: "k", SessionID: "s", At: at}},
		{"a lane's creation", person, events.SessionCreated{SessionKey: "k", SessionID: "s", Origin: origin, DisplayName: mark, At: at}},
		{"an imported lane", person, events.LaneImported{SessionKey: "k", SessionID: "s", Origin: origin, DisplayName: mark,
			Extra: map[string]json.RawMessage{"note": json.RawMessage(`"` + mark + `"`)}, UpdatedAt: at}},
		{"an auto-created thread's first name", person, events.SessionCreated{SessionKey: "k", SessionID: "s",
			Origin: events.Source{Platform: "discord", ChatID: "C1", ChatType: "thread", ThreadID: "T1", AutoThreadCreated: true, AutoThreadInitialName: mark}, At: at}},
		{"an entry metadata value", person, events.EntryMetadataSet{SessionID: "s", Key: "watermark", Value: json.RawMessage(`{"who":"` + mark + `"}`), At: at}},
		{"a queued text", person, events.QueueItemAdded{ItemID: "q1", Kind: events.QueueKindFollowup, Text: mark, At: at}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			erased, changed := tt.erasure.Erase(tt.earlier)
			if !changed {
				t.Fatalf("Erase(%T) reported no change", tt.earlier)
			}
			data, err := events.Encode(erased)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if strings.Contains(string(data), mark) {
				t.Errorf("erased %s still holds the marker: %s", erased.EventType(), data)
			}
			if erased.EventType() != tt.earlier.EventType() {
				t.Errorf("type %s became %s", tt.earlier.EventType(), erased.EventType())
			}
			if _, again := tt.erasure.Erase(erased); again {
				t.Errorf("a second Erase changed %s again", erased.EventType())
			}
		})
	}
}
