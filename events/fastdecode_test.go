package events

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// slowMessageAppended is what Decode gave before the fast decoder:
// encoding/json alone.
func slowMessageAppended(data []byte) (MessageAppended, error) {
	var e MessageAppended
	err := json.Unmarshal(data, &e)
	return e, err
}

func ptrTo[T any](v T) *T { return &v }

// messageAppendedInputs are stored message_appended events: the golden
// file, Encode's output for many messages, and hand-written JSON that
// Encode never writes (only encoding/json must decode those).
func messageAppendedInputs(t testing.TB) (encoded, handWritten [][]byte) {
	golden, err := os.ReadFile(filepath.Join("testdata", TypeMessageAppended+".golden"))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 12, 30, 45, 123456789, time.UTC)
	for _, m := range []Message{
		{Role: "user", Content: json.RawMessage(`"hello"`)},
		{Role: "assistant", Content: json.RawMessage(`"line one\nline \"two\"\t\\ <b>&amp;</b> \u0001 é 袋鼠 🦘"`)},
		{Role: "assistant", Content: json.RawMessage(`[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]`),
			ToolCalls:  json.RawMessage(`[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1.5e3,\"b\":[true,false,null]}"}}]`),
			TokenCount: ptrTo[int64](-42), FinishReason: "tool_calls", Reasoning: ptrTo("why\u2028not"), ReasoningContent: ptrTo(""),
			ReasoningDetails: json.RawMessage(`{"k":[1,-0.5,2E-3]}`), CodexReasoningItems: json.RawMessage(`[]`), CodexMessageItems: json.RawMessage(`{}`)},
		{Role: "tool", Content: json.RawMessage(`null`), ToolCallID: "call_\"1\"", ToolName: "web<search>", TokenCount: ptrTo[int64](9007199254740993)},
		{Role: "user", Content: json.RawMessage(`"\ud83e\udd98 a pair of surrogate escapes"`)},
		{Role: "user", Content: json.RawMessage("\"invalid \xff UTF-8 in raw JSON\"")},
		{Role: "user\x00ctl", Content: json.RawMessage(`"x"`), ToolName: "invalid \xff UTF-8 in a string"},
	} {
		data, err := json.Marshal(MessageAppended{SessionID: "20260301_123045_abcd", Message: m, At: at})
		if err != nil {
			t.Fatal(err)
		}
		encoded = append(encoded, data)
	}
	handWritten = [][]byte{
		[]byte(` { "session_id" : "s" , "message" : { "role" : "user" , "content" : [ 1 , { "a" : "b" } ] } , "at" : "2026-03-01T12:30:45Z" } `),
		[]byte(`{"session_id":"s","message":{"role":"user","content":null,"reasoning":null,"token_count":null},"at":"2026-03-01T12:30:45Z"}`),
		[]byte(`{"session_id":null,"message":null,"at":null}`),
		[]byte(`{"Session_ID":"s","message":{"Role":"user"},"at":"2026-03-01T12:30:45Z"}`),
		[]byte(`{"session_id":"s","session_id":"t","message":{"role":"user"}}`),
		[]byte(`{"session_id":"s","message":{"role":"a","role":"b"}}`),
		[]byte(`{"session_id":"s","unknown":{"x":[1,2]},"message":{"role":"user","extra":1}}`),
		[]byte(`{"session_id":"lone \ud800 surrogate","message":{"role":"\udc00"}}`),
		[]byte(`{"session_id":"pair \ud83e\udd98","message":{"role":"\u00e9\u002F\/"}}`),
		[]byte("{\"session_id\":\"bad \xff\xfe bytes\",\"message\":{\"role\":\"user\"}}"),
		[]byte(`{"session_id":"s","message":{"role":"user","token_count":1.5}}`),
		[]byte(`{"session_id":"s","message":{"role":"user","token_count":1e3}}`),
		[]byte(`{"session_id":"s","message":{"role":"user","token_count":01}}`),
		[]byte(`{"session_id":"s","message":{"role":"user","token_count":99999999999999999999}}`),
		[]byte(`{"session_id":"s","message":{"role":"user","token_count":"7"}}`),
		[]byte(`{"session_id":"s","message":{"role":"user","content":[1,]}}`),
		[]byte(`{"session_id":"s","message":{"role":"user","content":"tab	inside"}}`),
		[]byte(`{"session_id":"s","message":{"role":"user","content":"\x"}}`),
		[]byte(`{"session_id":"s","message":{"role":"user","content":tru}}`),
		[]byte(`{"session_id":"s","message":{"role":"user","content":-}}`),
		[]byte(`{"session_id":"s","message":{"role":"user","content":[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]}}`),
		[]byte(`{"session_id":"s","message":{"role":"user","content":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}}`),
		[]byte(`{"session_id":"s","at":"2026-03-01 12:30:45"}`),
		[]byte(`{"session_id":"s","at":"2026-03-01T12:30:45+02:00"}`),
		[]byte(`{"session_id":"s","at":"2026-03-01T12:30:45\u005a"}`),
		[]byte(`{"session_id":"s"} trailing`),
		[]byte(`{"session_id":"s"`),
		[]byte(`{"session_id":"s",}`),
		[]byte(`{}`),
		[]byte(`[]`),
		[]byte(`"s"`),
		[]byte(``),
	}
	return append([][]byte{golden}, encoded...), handWritten
}

// TestFastMessageAppendedEqualsEncodingJSON: the fast decoder takes what
// Encode writes, and whatever it takes it decodes exactly as encoding/json
// does; the rest, and every error, is encoding/json's.
func TestFastMessageAppendedEqualsEncodingJSON(t *testing.T) {
	encoded, handWritten := messageAppendedInputs(t)
	for _, data := range encoded {
		if _, ok := fastMessageAppended(data); !ok {
			t.Errorf("fastMessageAppended(%s) not taken, want the fast path for Encode's output", data)
		}
	}
	for _, data := range append(encoded, handWritten...) {
		checkFastMessageAppended(t, data)
		want, wantErr := slowMessageAppended(data)
		got, gotErr := Decode(TypeMessageAppended, data)
		if (gotErr != nil) != (wantErr != nil) {
			t.Errorf("Decode(%s) error = %v, want %v", data, gotErr, wantErr)
			continue
		}
		if wantErr == nil && !reflect.DeepEqual(got, validText(want)) {
			t.Errorf("Decode(%s) = %#v, want %#v", data, got, validText(want))
		}
	}
}

// checkFastMessageAppended fails if the fast decoder takes data and
// decodes it otherwise than encoding/json (or where it fails).
func checkFastMessageAppended(t *testing.T, data []byte) {
	t.Helper()
	got, ok := fastMessageAppended(data)
	if !ok {
		return
	}
	want, err := slowMessageAppended(data)
	if err != nil {
		t.Errorf("fastMessageAppended(%q) took what encoding/json refuses (%v)", data, err)
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fastMessageAppended(%q) = %#v, encoding/json %#v", data, got, want)
	}
}

func FuzzFastMessageAppended(f *testing.F) {
	encoded, handWritten := messageAppendedInputs(f)
	for _, data := range append(encoded, handWritten...) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkFastMessageAppended(t, data) })
}

// TestDecodeMetadataEqualsEncodingJSON: DecodeMetadata gives what
// encoding/json gives, taking the metadata Encode's callers write on the
// fast path.
func TestDecodeMetadataEqualsEncodingJSON(t *testing.T) {
	full, err := json.Marshal(Metadata{SchemaVersion: 1, Command: "resolve", CommandID: "c-1", CorrelationID: "r\"1", Node: "n1", Redacted: "e1"})
	if err != nil {
		t.Fatal(err)
	}
	fast := [][]byte{full, []byte(`{"schema_version":1}`), []byte(`{"schema_version":0,"command":"append"}`)}
	for _, data := range fast {
		if _, ok := fastMetadata(data); !ok {
			t.Errorf("fastMetadata(%s) not taken, want the fast path", data)
		}
	}
	for _, data := range append(fast,
		[]byte(`{"schema_version":"1"}`), []byte(`{"schema_version":1.0}`), []byte(`{"Command":"x"}`),
		[]byte(`{"command":null}`), []byte(`{"other":1,"node":"n"}`), []byte(`{"node":"a","node":"b"}`),
		[]byte(`{"schema_version":1} x`), []byte(`{`), []byte(`null`), []byte(``)) {
		var want Metadata
		wantErr := json.Unmarshal(data, &want)
		got, gotErr := DecodeMetadata(data)
		if (gotErr != nil) != (wantErr != nil) || (wantErr == nil && got != want) {
			t.Errorf("DecodeMetadata(%s) = %+v, %v; want %+v, %v", data, got, gotErr, want, wantErr)
		}
	}
}

func FuzzFastMetadata(f *testing.F) {
	f.Add([]byte(`{"schema_version":1,"command":"resolve","command_id":"c","correlation_id":"r","node":"n","redacted":"e"}`))
	f.Add([]byte(`{"schema_version":1,"Command":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := fastMetadata(data)
		if !ok {
			return
		}
		var want Metadata
		if err := json.Unmarshal(data, &want); err != nil || got != want {
			t.Errorf("fastMetadata(%q) = %+v; encoding/json %+v, %v", data, got, want, err)
		}
	})
}
