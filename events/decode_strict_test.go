package events

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// slowMessageAppended is what Decode gives when JSON v2 refuses: encoding/json
// alone.
func slowMessageAppended(data []byte) (MessageAppended, error) {
	var e MessageAppended
	err := json.Unmarshal(data, &e)
	return e, err
}

func ptrTo[T any](v T) *T { return &v }

// strictMessageAppended is Decode's first try at a message_appended: JSON v2
// with strictStored; false when it refuses data.
func strictMessageAppended(data []byte) (MessageAppended, bool) {
	var e MessageAppended
	return e, jsonv2.Unmarshal(data, &e, strictStored) == nil
}

// strictMetadata is DecodeMetadata's first try.
func strictMetadata(data []byte) (Metadata, bool) {
	var md Metadata
	return md, jsonv2.Unmarshal(data, &md, strictStored) == nil
}

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

// TestStrictFirstEqualsEncodingJSON: JSON v2 takes what Encode writes, and
// whatever it takes it decodes exactly as encoding/json does; the rest, and
// every error, is encoding/json's.
func TestStrictFirstEqualsEncodingJSON(t *testing.T) {
	encoded, handWritten := messageAppendedInputs(t)
	for _, data := range encoded {
		var e MessageAppended
		if err := json.Unmarshal(data, &e); err != nil {
			t.Fatal(err)
		}
		// Encode repairs what json.Marshal keeps (invalid UTF-8 in raw JSON).
		stored, err := Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := strictMessageAppended(stored); !ok {
			t.Errorf("strictMessageAppended(%s) refused, want JSON v2 to take Encode's output", stored)
		}
	}
	for _, data := range append(encoded, handWritten...) {
		checkStrictMessageAppended(t, data)
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

// checkStrictMessageAppended fails if JSON v2 takes data and
// decodes it otherwise than encoding/json (or where it fails).
func checkStrictMessageAppended(t *testing.T, data []byte) {
	t.Helper()
	got, ok := strictMessageAppended(data)
	if !ok {
		return
	}
	want, err := slowMessageAppended(data)
	if err != nil {
		t.Errorf("strictMessageAppended(%q) took what encoding/json refuses (%v)", data, err)
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("strictMessageAppended(%q) = %#v, encoding/json %#v", data, got, want)
	}
}

func FuzzStrictMessageAppended(f *testing.F) {
	encoded, handWritten := messageAppendedInputs(f)
	for _, data := range append(encoded, handWritten...) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkStrictMessageAppended(t, data) })
}

// TestDecodeMetadataEqualsEncodingJSON: DecodeMetadata gives what
// encoding/json gives, taking the metadata Encode's callers write on the
// JSON v2 path.
func TestDecodeMetadataEqualsEncodingJSON(t *testing.T) {
	full, err := json.Marshal(Metadata{SchemaVersion: 1, Command: "resolve", CommandID: "c-1", CorrelationID: "r\"1", Node: "n1", Redacted: "e1"})
	if err != nil {
		t.Fatal(err)
	}
	fast := [][]byte{full, []byte(`{"schema_version":1}`), []byte(`{"schema_version":0,"command":"append"}`)}
	for _, data := range fast {
		if _, ok := strictMetadata(data); !ok {
			t.Errorf("strictMetadata(%s) not taken, want JSON v2 to take it", data)
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

func FuzzStrictMetadata(f *testing.F) {
	f.Add([]byte(`{"schema_version":1,"command":"resolve","command_id":"c","correlation_id":"r","node":"n","redacted":"e"}`))
	f.Add([]byte(`{"schema_version":1,"Command":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := strictMetadata(data)
		if !ok {
			return
		}
		var want Metadata
		if err := json.Unmarshal(data, &want); err != nil || got != want {
			t.Errorf("strictMetadata(%q) = %+v; encoding/json %+v, %v", data, got, want, err)
		}
	})
}

// BenchmarkDecodeMessageAppended is the decoding of every stored message of
// a catch-up or a rebuild: Decode (JSON v2 first) against encoding/json
// alone, for a typical message (~200 characters of text) and for one with
// every field.
func BenchmarkDecodeMessageAppended(b *testing.B) {
	at := time.Date(2026, 5, 14, 9, 30, 15, 123456789, time.UTC)
	inputs := []struct {
		name string
		m    Message
	}{
		{"typical", Message{Role: "user", Content: json.RawMessage(`"` + strings.Repeat("hello world ", 17) + `"`)}},
		{"every field", Message{Role: "assistant", Content: json.RawMessage(`[{"type":"text","text":"Deploying now."}]`),
			ToolCallID: "call_1", ToolCalls: json.RawMessage(`[{"id":"call_1","function":{"name":"terminal","arguments":"{}"}}]`),
			ToolName: "terminal", TokenCount: ptrTo[int64](150), FinishReason: "tool_calls", Reasoning: ptrTo("Let me think."),
			ReasoningContent: ptrTo("thinking…"), ReasoningDetails: json.RawMessage(`[{"type":"summary"}]`),
			CodexReasoningItems: json.RawMessage(`[{"id":"rs_1"}]`), CodexMessageItems: json.RawMessage(`[{"id":"msg_1","phase":"final"}]`)}},
	}
	for _, in := range inputs {
		data, err := Encode(MessageAppended{SessionID: "20260514_093015_a1b2c3d4", Message: in.m, At: at})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(in.name+"/Decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(TypeMessageAppended, data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := slowMessageAppended(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeMetadata is the decoding of every event's metadata.
func BenchmarkDecodeMetadata(b *testing.B) {
	data, err := json.Marshal(Metadata{SchemaVersion: 1, Command: "append_message", CommandID: "c-1234567890", CorrelationID: "r-1", Node: "n1"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("DecodeMetadata", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeMetadata(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var md Metadata
			if err := json.Unmarshal(data, &md); err != nil {
				b.Fatal(err)
			}
		}
	})
}
