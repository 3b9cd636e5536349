package events_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"hermes/events"
)

func TestDecode_RepairsRawText(t *testing.T) {
	tests := []struct {
		name        string
		content     string // the stored content JSON
		wantContent string
	}{
		{"valid text is kept byte for byte", `"héllo \"x\" \u00e9 \ud83d\ude00"`, `"héllo \"x\" \u00e9 \ud83d\ude00"`},
		{"invalid bytes become U+FFFD", "\"a\xff\xfeb\"", "\"a\uFFFDb\""},
		{"a lone high surrogate escape becomes \\ufffd", `"lone \ud800 surrogate"`, `"lone \ufffd surrogate"`},
		{"a lone low surrogate escape becomes \\ufffd", `"x\uDC00"`, `"x\ufffd"`},
		{"a high surrogate before a non-surrogate escape", `"\ud800\u0041"`, `"\ufffd\u0041"`},
		{"a high surrogate at the end of the text", `"\ud800"`, `"\ufffd"`},
		{"an escaped backslash is not an escape", `"\\ud800"`, `"\\ud800"`},
		{"inside a list of parts", "[{\"type\":\"text\",\"text\":\"\\udbff\xc0\"}]", "[{\"type\":\"text\",\"text\":\"\\ufffd\uFFFD\"}]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(`{"session_id":"s","message":{"role":"user","content":` + tt.content + `},"at":"2026-05-09T10:00:00Z"}`)
			e, err := events.Decode(events.TypeMessageAppended, data)
			if err != nil {
				t.Fatal(err)
			}
			got := string(e.(events.MessageAppended).Message.Content)
			if got != tt.wantContent {
				t.Errorf("Decode content = %q, want %q", got, tt.wantContent)
			}
			stored, err := events.Encode(events.MessageAppended{Message: events.Message{Role: "user", Content: json.RawMessage(tt.content)}})
			if err != nil {
				t.Fatal(err)
			}
			if !utf8.Valid(stored) || !strings.Contains(string(stored), tt.wantContent) {
				t.Errorf("Encode = %q, want valid UTF-8 holding %q", stored, tt.wantContent)
			}
		})
	}
}

// FuzzDecode: no stored bytes make Decode panic, and whatever it decodes
// encodes to valid UTF-8 with no lone surrogate escape, and decodes again
// to the same JSON.
func FuzzDecode(f *testing.F) {
	f.Add(events.TypeMessageAppended, []byte("{\"session_id\":\"s\",\"message\":{\"role\":\"user\",\"content\":\"a\xff\xfeb\"},\"at\":\"2026-11-23T21:34:16Z\"}"))
	f.Add(events.TypeMessageAppended, []byte(`{"session_id":"s","message":{"role":"user","content":"lone \ud800 surrogate","tool_calls":[{"x":"\udc00"}]},"at":"2026-11-23T21:34:16Z"}`))
	f.Add(events.TypeTranscriptRewritten, []byte(`{"session_id":"s","messages":[{"role":"user","content":["\ud83d\ude00","\ud83d"]}],"at":"2026-11-23T21:34:16Z"}`))
	f.Add(events.TypeSessionCreated, []byte(`{"session_key":"agent:main:telegram:dm:nul\u0000x","session_id":"s","origin":{"platform":"telegram","chat_id":"nul\u0000x"},"at":"2026-11-23T21:34:16Z"}`))
	f.Add(events.TypeSessionMetadataUpdated, []byte(`{"session_id":"s","input_tokens":9223372036854775807,"estimated_cost_usd":1e+308,"at":"2026-11-23T21:34:16Z"}`))
	f.Add(events.TypeTurnCompleted, []byte(`{"turn_id":"","session_id":"s","input_tokens":9223372036854775807,"estimated_cost_usd":1e+308,"at":"2026-11-23T21:34:16Z"}`))
	f.Fuzz(func(t *testing.T, typ string, data []byte) {
		e, err := events.Decode(typ, data)
		if err != nil {
			return
		}
		stored, err := events.Encode(e)
		if err != nil {
			t.Fatalf("Encode(Decode(%q)) = %v", data, err)
		}
		if !utf8.Valid(stored) {
			t.Fatalf("Encode(Decode(%q)) = %q, not valid UTF-8", data, stored)
		}
		if hasLoneSurrogate(t, stored) {
			t.Fatalf("Encode(Decode(%q)) = %q holds a lone surrogate escape", data, stored)
		}
		again, err := events.Decode(e.EventType(), stored)
		if err != nil {
			t.Fatalf("Decode(Encode(...)) = %v", err)
		}
		restored, err := events.Encode(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(stored, restored) {
			t.Fatalf("a second round trip changed the event:\n%s\n%s", stored, restored)
		}
	})
}

// hasLoneSurrogate reports whether JSON text holds a \u escape of a UTF-16
// surrogate that is not part of a high-low pair.
func hasLoneSurrogate(t *testing.T, text []byte) bool {
	t.Helper()
	s := strings.ToLower(string(text))
	code := func(i int) (uint64, bool) {
		if i+6 > len(s) || s[i] != '\\' || s[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(s[i+2:i+6], 16, 32)
		return n, err == nil
	}
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			i++
			continue
		}
		c, ok := code(i)
		switch {
		case !ok:
			i += 2 // any other escape, \\ included
		case c >= 0xd800 && c <= 0xdbff:
			if low, ok := code(i + 6); !ok || low < 0xdc00 || low > 0xdfff {
				return true
			}
			i += 12
		case c >= 0xdc00 && c <= 0xdfff:
			return true
		default:
			i += 6
		}
	}
	return false
}

// Given a rewritten transcript whose later messages need repair and whose
// earlier ones do not, when it is encoded, then every message is stored,
// only the broken ones repaired, and the caller's messages are unchanged.
func TestEncode_RepairsOnlyTheBrokenMessagesOfARewrite(t *testing.T) {
	msgs := []events.Message{
		{Role: "user", Content: json.RawMessage(`"fine"`)},
		{Role: "assistant", Content: json.RawMessage("\"bad \xff\"")},
		{Role: "user", Content: json.RawMessage(`"also fine"`)},
	}
	stored, err := events.Encode(events.TranscriptRewritten{SessionID: "s", Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	e, err := events.Decode(events.TypeTranscriptRewritten, stored)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range e.(events.TranscriptRewritten).Messages {
		got = append(got, string(m.Content))
	}
	want := []string{`"fine"`, "\"bad \uFFFD\"", `"also fine"`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stored contents = %q, want %q", got, want)
	}
	if string(msgs[1].Content) != "\"bad \xff\"" {
		t.Errorf("Encode changed the caller's message to %q", msgs[1].Content)
	}
}
