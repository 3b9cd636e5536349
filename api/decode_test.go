package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// decodeAs decodes body with the decoder named name.
func decodeAs(t *testing.T, name, body string) (request, error) {
	t.Helper()
	i := slices.IndexFunc(decoders, func(d bodyDecoder) bool { return d.name == name })
	if i < 0 {
		t.Fatalf("no decoder %q", name)
	}
	return decoders[i].decode(httptest.NewRequest("POST", "/", strings.NewReader(body)), false)
}

// TestDecode_RefusalsNameTheProblem: each refusal is a 400 whose message
// says what is wrong and where.
func TestDecode_RefusalsNameTheProblem(t *testing.T) {
	tests := []struct {
		name    string
		decoder string
		body    string
		want    string
	}{
		{"a field name in another case", "enqueue", `{"kind":"queue","Text":"hi"}`, `unknown field "Text" in the body (names are exact and case-sensitive)`},
		{"a nested name in another case", "resolve", `{"source":{"platform":"x","chat_id":"1","Chat_ID":"2"}}`, `unknown field "Chat_ID" in "source"`},
		{"an unknown name in an array element", "rewrite", `{"messages":[{"role":"user"},{"rol":"user"}]}`, `unknown field "rol" in "messages[1]"`},
		{"a name given twice", "resolve", `{"source":{"platform":"x","chat_id":"9","chat_id":"10"}}`, `the name "chat_id" is given twice in "source"`},
		{"a name given twice, once escaped", "rewind", `{"\u006e":1,"n":2}`, `the name "n" is given twice in the body`},
		{"a name given twice in free-form content", "message", `{"role":"user","content":[{"a":1,"a":2}]}`, `the name "a" is given twice in "content[0]"`},
		{"a lone high surrogate", "message", `{"role":"user","content":"\ud800"}`, `malformed JSON in content at byte 26: invalid surrogate pair`},
		{"a lone low surrogate deep in content", "message", `{"content":[{"a":"\udfff"}]}`, `malformed JSON in content[0].a at byte 18: invalid surrogate pair`},
		{"invalid UTF-8", "message", "{\"content\":\"a\xffb\"}", `malformed JSON in content at byte 13: invalid UTF-8`},
		{"a string for an integer", "rewind", `{"n":"x"}`, `field "n" must be an integer, not a string`},
		{"a fraction for an integer", "rewind", `{"n":1.5}`, `field "n" must be an integer, not 1.5`},
		{"an integer out of range", "rewind", `{"n":99999999999999999999}`, `field "n" must be an integer, and 99999999999999999999 is out of its range`},
		{"a number out of range", "complete turn", `{"estimated_cost_usd":1e400}`, `field "estimated_cost_usd" must be a number, and 1e400 is out of its range`},
		{"a wrong type in an array element", "rewrite", `{"messages":[{"role":"user"},{"role":5}]}`, `field "messages[1].role" must be a string, not a number`},
		{"an array for an object", "resolve", `{"source":[1]}`, `field "source" must be an object, not an array`},
		{"a string for a boolean", "resolve", `{"source":{"is_bot":"yes"}}`, `field "source.is_bot" must be true or false, not a string`},
		{"a time that is not RFC 3339", "clock", `{"now":"yesterday"}`, `field "now" must be an RFC 3339 time string: parsing time "yesterday"`},
		{"a cut body", "resolve", `{"source":`, `malformed JSON: unexpected end of body`},
		{"trailing ]", "empty", `{} ]`, `trailing data after the JSON body at byte 3`},
		{"a second object", "empty", `{}{}`, `trailing data after the JSON body at byte 2`},
		{"a bad escape", "message", `{"role":"user","content":"\x"}`, "malformed JSON in content at byte 26: invalid escape sequence `\\x` in string"},
		{"not an object", "empty", `[1]`, `the body must be a JSON object`},
		{"no body", "resolve", ``, `a JSON body is required`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeAs(t, tt.decoder, tt.body)
			if err == nil {
				t.Fatalf("decode %s(%q) = nil error, want a refusal", tt.decoder, tt.body)
			}
			if status, _ := statusOf(err); status != http.StatusBadRequest {
				t.Errorf("decode %s(%q) = %v, status %d, want 400", tt.decoder, tt.body, err, status)
			}
			if !strings.Contains(err.Error(), tt.want) || !utf8.ValidString(err.Error()) {
				t.Errorf("decode %s(%q) = %q, want valid UTF-8 containing %q", tt.decoder, tt.body, err, tt.want)
			}
		})
	}
}

// TestDecode_Accepts: what the door lets through decodes as sent; a free-form
// value (content, message) is kept byte for byte, null included.
func TestDecode_Accepts(t *testing.T) {
	chat := "9"
	tests := []struct {
		name    string
		decoder string
		body    string
		want    request
	}{
		{"a source", "resolve", `{"source":{"platform":"telegram","chat_id":"9","is_bot":true},"force_new":true}`,
			resolveRequest{Source: &sourceRequest{Platform: "telegram", ChatID: &chat, IsBot: true}, ForceNew: true}},
		{"a surrogate pair and escapes", "title", `{"title":"Plan \u00fcn \ud83d\ude00"}`, titleRequest{Title: ptr("Plan ün 😀")}},
		{"content kept as sent", "message", `{"role":"user","content":  [ {"type":"text","text":"\ud83d\ude00"} ] }`,
			messageRequest{Role: "user", Content: json.RawMessage(`[ {"type":"text","text":"\ud83d\ude00"} ]`)}},
		{"content null", "message", `{"role":"user","content":null}`, messageRequest{Role: "user", Content: json.RawMessage(`null`)}},
		{"null for a pointer", "rewind", `{"n":null}`, rewindRequest{}},
		{"white space around", "rewind", " \n{\"n\":3}\t\n", rewindRequest{N: ptr(3)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeAs(t, tt.decoder, tt.body)
			if err != nil {
				t.Fatalf("decode %s(%q) = %v, want it accepted", tt.decoder, tt.body, err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b json.RawMessage) bool { return bytes.Equal(a, b) })); diff != "" {
				t.Errorf("decode %s(%q) (-want +got):\n%s", tt.decoder, tt.body, diff)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
