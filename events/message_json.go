package events

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// appendMessageAppended appends e as JSON to b: the bytes json.Marshal(e)
// gives, made without reflection (every appended message is encoded on
// the append's path). Plain text is copied, other text quoted by
// json.Marshal; raw JSON is compacted by json.Compact, as json.Marshal
// does, and goes through json.Marshal when it holds a character json.Marshal
// escapes for HTML. ok is false when json.Marshal would fail (raw JSON that
// does not parse, a time it cannot write): the caller then asks
// json.Marshal, for its error.
func appendMessageAppended(b []byte, e MessageAppended) (out []byte, ok bool) {
	b = append(b, `{"session_id":`...)
	b = appendJSONString(b, e.SessionID)
	b = append(b, `,"message":{"role":`...)
	m := e.Message
	b = appendJSONString(b, m.Role)
	if b, ok = appendRawField(b, `,"content":`, m.Content); !ok {
		return b, false
	}
	b = appendStringField(b, `,"tool_call_id":`, m.ToolCallID)
	if b, ok = appendRawField(b, `,"tool_calls":`, m.ToolCalls); !ok {
		return b, false
	}
	b = appendStringField(b, `,"tool_name":`, m.ToolName)
	if m.TokenCount != nil {
		b = append(b, `,"token_count":`...)
		b = strconv.AppendInt(b, *m.TokenCount, 10)
	}
	b = appendStringField(b, `,"finish_reason":`, m.FinishReason)
	if m.Reasoning != nil {
		b = append(b, `,"reasoning":`...)
		b = appendJSONString(b, *m.Reasoning)
	}
	if m.ReasoningContent != nil {
		b = append(b, `,"reasoning_content":`...)
		b = appendJSONString(b, *m.ReasoningContent)
	}
	for _, f := range [...]struct {
		name string
		raw  json.RawMessage
	}{
		{`,"reasoning_details":`, m.ReasoningDetails},
		{`,"codex_reasoning_items":`, m.CodexReasoningItems},
		{`,"codex_message_items":`, m.CodexMessageItems},
	} {
		if b, ok = appendRawField(b, f.name, f.raw); !ok {
			return b, false
		}
	}
	b = append(b, `},"at":`...)
	if b, ok = appendJSONTime(b, e.At); !ok {
		return b, false
	}
	return append(b, '}'), true
}

// appendJSONTime appends t as json.Marshal writes it (time.Time's
// MarshalJSON: RFC 3339 with nanoseconds, refused outside years 0-9999 or
// with a zone offset of a day or more).
func appendJSONTime(b []byte, t time.Time) ([]byte, bool) {
	_, offset := t.Zone()
	if y := t.Year(); y < 0 || y > 9999 || offset <= -24*60*60 || offset >= 24*60*60 {
		at, err := t.MarshalJSON()
		if err != nil {
			return b, false
		}
		return append(b, at...), true
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}

// appendStringField appends name and s unless s is empty (omitempty).
func appendStringField(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(append(b, name...), s)
}

// appendJSONString appends s as json.Marshal writes a string.
func appendJSONString(b []byte, s string) []byte {
	if plainJSON(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

// appendRawField appends name and raw compacted, as json.Marshal writes a
// json.RawMessage, unless raw is empty (omitempty). ok is false when raw
// does not parse.
func appendRawField(b []byte, name string, raw json.RawMessage) ([]byte, bool) {
	if len(raw) == 0 {
		return b, true
	}
	if plainJSONStringLiteral(raw) {
		b = append(b, name...)
		return append(b, raw...), true
	}
	if htmlEscaped(raw) {
		q, err := json.Marshal(raw)
		if err != nil {
			return b, false
		}
		return append(append(b, name...), q...), true
	}
	buf := bytes.NewBuffer(append(b, name...))
	if err := json.Compact(buf, raw); err != nil {
		return b, false
	}
	return buf.Bytes(), true
}

// plainJSONStringLiteral reports whether raw is one JSON string, with no
// control character, no escape other than JSON's and nothing json.Marshal
// escapes for HTML: json.Marshal then writes it as it is. Its bytes are
// valid UTF-8 (validText repaired them), which json.Marshal does not check
// in raw JSON anyway.
func plainJSONStringLiteral(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	in := raw[1 : len(raw)-1]
	for i := 0; i < len(in); i++ {
		switch c := in[i]; {
		case c < 0x20, c == '"', c == '<', c == '>', c == '&':
			return false
		case c == 0xe2 && i+2 < len(in) && in[i+1] == 0x80 && in[i+2]&^1 == 0xa8:
			return false // U+2028 or U+2029
		case c == '\\':
			if i+1 >= len(in) {
				return false // the escape would take the closing quote
			}
			i++
			switch in[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(in) || !isHex4(in[i+1:i+5]) {
					return false
				}
				i += 4
			default:
				return false
			}
		}
	}
	return true
}

// isHex4 reports whether h is four hexadecimal digits.
func isHex4(h []byte) bool {
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return len(h) == 4
}

// htmlEscaped reports whether raw holds a character json.Marshal escapes
// in raw JSON for HTML: <, >, &, U+2028 or U+2029.
func htmlEscaped(raw []byte) bool {
	if bytes.ContainsAny(raw, "<>&") {
		return true
	}
	for i := bytes.IndexByte(raw, 0xe2); i >= 0; {
		if i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xa8 {
			return true
		}
		j := bytes.IndexByte(raw[i+1:], 0xe2)
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}
