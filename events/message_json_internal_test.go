package events

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzAppendMessageAppended: the event's own encoder writes what
// json.Marshal writes for the event as Encode hands it over (raw JSON
// repaired), and gives up exactly where json.Marshal fails.
func FuzzAppendMessageAppended(f *testing.F) {
	f.Add("20260301_093015_abc123", "user", []byte(`"hello"`), "call", []byte(`[ 1 ]`), "terminal", int64(3), "stop", "r", []byte(`{"a" : "<"}`), int64(1767225600123456789))
	f.Add("\xff", "\u2028", []byte("\"\u2029\""), "", []byte(``), "", int64(-1), "&", "\x00", []byte(`nul`), int64(0))
	f.Add("t", "user", []byte(`"a\\"`), "", []byte(`"\\u00e9\\n\\"x"`), "", int64(86400), "", "", []byte(`"\\"`), int64(253402300800000000))
	f.Add("s", "assistant", []byte("[\"\\ud800\", \"\xe2\x80\"]"), "", []byte(`{}`), "", int64(0), "", "", []byte(" null "), int64(-62135596800000000))
	f.Fuzz(func(t *testing.T, sid, role string, content []byte, callID string, calls []byte, tool string, tokens int64, finish, reasoning string, details []byte, nanos int64) {
		e := MessageAppended{SessionID: sid, At: time.Unix(0, nanos).In(time.FixedZone("z", int(tokens%200000))), Message: Message{
			Role: role, Content: content, ToolCallID: callID, ToolCalls: calls, ToolName: tool, FinishReason: finish,
			ReasoningDetails: details, CodexMessageItems: content}}
		if tokens%2 == 0 {
			e.Message.TokenCount, e.Message.Reasoning, e.Message.ReasoningContent = &tokens, &reasoning, &finish
		}
		e = validText(e).(MessageAppended)
		want, wantErr := json.Marshal(e)
		got, ok := appendMessageAppended([]byte("prefix"), e)
		if wantErr != nil {
			if ok {
				t.Errorf("appendMessageAppended = %s, ok; json.Marshal failed: %v", got, wantErr)
			}
			return
		}
		if !ok {
			t.Fatalf("appendMessageAppended gave up; json.Marshal wrote %s", want)
		}
		if string(got) != "prefix"+string(want) {
			t.Errorf("appendMessageAppended =\n%s\nwant\nprefix%s", got, want)
		}
	})
}
