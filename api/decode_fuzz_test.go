package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// bodyDecoder decodes a body as one request type.
type bodyDecoder struct {
	name   string
	decode func(r *http.Request, allowEmpty bool) (request, error)
}

func decoderOf[T request](name string) bodyDecoder {
	return bodyDecoder{name, func(r *http.Request, allowEmpty bool) (request, error) {
		v, err := decode[T](r, allowEmpty)
		return v, err
	}}
}

// decoders are every request type of the API.
var decoders = []bodyDecoder{
	decoderOf[emptyRequest]("empty"),
	decoderOf[resolveRequest]("resolve"),
	decoderOf[touchRequest]("touch"),
	decoderOf[startTurnRequest]("start turn"),
	decoderOf[completeTurnRequest]("complete turn"),
	decoderOf[resetRequest]("reset"),
	decoderOf[switchRequest]("switch"),
	decoderOf[resumePendingRequest]("resume pending"),
	decoderOf[activeProcessesRequest]("active processes"),
	decoderOf[suspendRecentRequest]("suspend recent"),
	decoderOf[pruneEntriesRequest]("prune entries"),
	decoderOf[ackNoticeRequest]("ack notice"),
	decoderOf[enqueueRequest]("enqueue"),
	decoderOf[messageRequest]("message"),
	decoderOf[rewriteRequest]("rewrite"),
	decoderOf[rewindRequest]("rewind"),
	decoderOf[titleRequest]("title"),
	decoderOf[metadataRequest]("metadata"),
	decoderOf[endRequest]("end"),
	decoderOf[pruneSessionsRequest]("prune sessions"),
	decoderOf[clockRequest]("clock"),
}

// doorSeeds are the bodies of the findings of issue [V], and valid ones,
// each with the decoder it was sent to.
var doorSeeds = []struct{ decoder, body string }{
	{"complete turn", `{"estimated_cost_usd":1e308}`},
	{"complete turn", `{"input_tokens":9223372036854775807}`},
	{"complete turn", `{"input_tokens":99999999999999999999}`},
	{"metadata", `{"input_tokens":9223372036854775807}`},
	{"metadata", `{"model":"gpt","estimated_cost_usd":0.5,"actual_cost_usd":1e-9,"api_call_count":3}`},
	{"message", "{\"role\":\"user\",\"content\":\"a\xff\xfeb\"}"},
	{"message", `{"role":"user","content":"\ud800"}`},
	{"message", `{"role":"user","content":"\ud83d\ude00"}`},
	{"message", `{"role":"user","content":[{"type":"text","text":"\udc00"}]}`},
	{"message", `{"role":"user","Role":"system","content":"x"}`},
	{"message", `{"role":"user","\u0072ole":"system"}`},
	{"resolve", `{"source":{"platform":"telegram","chat_id":"9\u0000"}}`},
	{"resolve", `{"source":{"platform":"telegram","chat_id":"9","chat_id":"10"}}`},
	{"rewind", `{"n":0}`}, {"rewind", `{"n":-1}`}, {"rewind", `{"n":1}`},
	{"empty", `garbage`}, {"empty", `{}`}, {"empty", ``}, {"empty", `null`}, {"empty", `{} ]`}, {"empty", `{"a":1}`},
	{"enqueue", `{"kind":"queue","text":"hi","message":{"a":{"b":[1,2,{"c":"\ud800\udc00"}]}}}`},
	{"rewrite", `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`},
	{"title", `{"title":"Plan \u00fcn\u00ef"}`},
	{"clock", `{"now":"2026-03-02T10:00:00Z"}`}, {"clock", `{"advance":"25h"}`},
	{"resume pending", `{"reason":"restart_timeout"}`}, {"active processes", `{"count":2}`},
	{"prune entries", `{"max_age_days":30}`}, {"end", `{"reason":"user_exit"}`},
}

// FuzzDecode feeds arbitrary bytes to every request decoder. It never
// panics; a refusal is a 400 with a valid UTF-8 message; an accepted body
// validates, re-encodes as valid UTF-8 JSON, repeats no name in any object
// and had no half surrogate pair (no U+FFFD appears that the body did not
// hold).
func FuzzDecode(f *testing.F) {
	for _, s := range doorSeeds {
		i := slices.IndexFunc(decoders, func(d bodyDecoder) bool { return d.name == s.decoder })
		if i < 0 {
			f.Fatalf("seed for an unknown decoder %q", s.decoder)
		}
		f.Add(uint8(i), false, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, which uint8, allowEmpty bool, body []byte) {
		d := decoders[int(which)%len(decoders)]
		r := httptest.NewRequest("POST", "/", bytes.NewReader(body))
		v, err := d.decode(r, allowEmpty)
		if err != nil {
			if status, _ := statusOf(err); status != http.StatusBadRequest {
				t.Fatalf("%s: decode(%q) = %v, status %d, want 400", d.name, body, err, status)
			}
			if !utf8.ValidString(err.Error()) {
				t.Fatalf("%s: decode(%q): message %q is not valid UTF-8", d.name, body, err)
			}
			return
		}
		if err := v.validate(); err != nil {
			t.Fatalf("%s: accepted %q, then validate() = %v", d.name, body, err)
		}
		out, err := json.Marshal(v)
		if err != nil || !utf8.Valid(out) || !json.Valid(out) {
			t.Fatalf("%s: accepted %q re-encodes as %q, %v: want valid UTF-8 JSON", d.name, body, out, err)
		}
		if len(bytes.TrimSpace(body)) == 0 {
			return
		}
		if name, dup := repeatedName(body); dup {
			t.Fatalf("%s: accepted %q, which repeats %q", d.name, body, name)
		}
		if got, want := decodedReplacements(t, body), literalReplacements(body); got != want {
			t.Fatalf("%s: accepted %q, which decodes with %d U+FFFD for %d written: a half surrogate pair got in", d.name, body, got, want)
		}
	})
}

// repeatedName is an oracle independent of JSON v2: a token walk that
// reports a name given twice (exactly) in one object.
func repeatedName(body []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object bool
		names  map[string]bool
		key    bool // the next string token is a name
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return "", false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{', '[':
				if top != nil && top.object {
					top.key = true
				}
				stack = append(stack, &frame{object: tok == '{', names: map[string]bool{}, key: tok == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if top != nil && top.object && top.key {
				if top.names[tok] {
					return tok, true
				}
				top.names[tok] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.object {
			top.key = true
		}
	}
}

// decodedReplacements counts U+FFFD in every string of body as
// encoding/json decodes it (it turns a half surrogate pair into one).
func decodedReplacements(t *testing.T, body []byte) int {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("accepted %q does not decode: %v", body, err)
	}
	var count func(any) int
	count = func(v any) int {
		switch v := v.(type) {
		case string:
			return strings.Count(v, "\uFFFD")
		case []any:
			n := 0
			for _, e := range v {
				n += count(e)
			}
			return n
		case map[string]any:
			n := 0
			for k, e := range v {
				n += strings.Count(k, "\uFFFD") + count(e)
			}
			return n
		}
		return 0
	}
	return count(v)
}

// literalReplacements counts the U+FFFD written in body, as UTF-8 or as an
// escape (\ufffd after an odd run of backslashes).
func literalReplacements(body []byte) int {
	n := bytes.Count(body, []byte("\uFFFD"))
	for i := 0; i+6 <= len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		run := 0
		for i < len(body) && body[i] == '\\' {
			run++
			i++
		}
		if run%2 == 1 && i+5 <= len(body) && strings.EqualFold(string(body[i:i+5]), "ufffd") {
			n++
		}
		i--
	}
	return n
}

func TestTruncateForLog(t *testing.T) {
	tests := []struct {
		in      string
		wantLen int // at most
	}{
		{"short", 5},
		{strings.Repeat("x", maxLogText), maxLogText},
		{strings.Repeat("x", 50<<10), maxLogText + 40},
		{strings.Repeat("é", 50<<10), maxLogText + 40},
	}
	for _, tt := range tests {
		got := truncateForLog(tt.in)
		if len(got) > tt.wantLen || !utf8.ValidString(got) || !strings.HasPrefix(tt.in, strings.Split(got, "…")[0]) {
			t.Errorf("truncateForLog(%d bytes) = %d bytes %.60q, want a valid prefix of at most %d bytes", len(tt.in), len(got), got, tt.wantLen)
		}
	}
}
