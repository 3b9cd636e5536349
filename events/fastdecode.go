package events

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// A catch-up or a rebuild decodes every event of the log, and most of them
// are message_appended: encoding/json (a validating pass over the input,
// then a reflective one) was half of the time spent reading the log. The
// decoders of this file read the JSON that Encode writes for the events
// and metadata the log holds most, in one pass and without reflection.
// They accept only what they can decode exactly as encoding/json would:
// valid JSON, every key spelt as Encode spells it and given once, strings
// with no lone surrogate escape and no invalid UTF-8, integers as plain
// digits. Anything else (an older shape, a key in another case, an unknown
// field, a null, bad JSON) makes them say so (ok false), and the caller
// decodes with encoding/json, which gives the same value or the error.

// maxFastDepth bounds how deeply nested a raw value the fast decoders
// follow (encoding/json's own limit is 10,000: deeper ones go to it).
const maxFastDepth = 256

// jsonScanner reads one JSON text from b.
type jsonScanner struct {
	b []byte
	i int
}

func (s *jsonScanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// consume skips spaces and then c, if it is next.
func (s *jsonScanner) consume(c byte) bool {
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// stringToken returns the bytes of the JSON string that starts at s.i
// (between the quotes, escapes undecoded) and whether it has escapes.
func (s *jsonScanner) stringToken() (tok []byte, escaped, ok bool) {
	s.skipSpace()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false, false
	}
	start := s.i + 1
	for i := start; i < len(s.b); {
		c := s.b[i]
		switch {
		case c == '"':
			s.i = i + 1
			return s.b[start:i], escaped, true
		case c == '\\':
			if i+1 >= len(s.b) {
				return nil, false, false
			}
			escaped = true
			switch s.b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(s.b, i+2); !ok {
					return nil, false, false
				}
				i += 6
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			i++
		}
	}
	return nil, false, false
}

// hex4 decodes the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// text decodes a JSON string into a Go string; false for what only
// encoding/json decodes (a surrogate escape, invalid UTF-8).
func (s *jsonScanner) text() (string, bool) {
	tok, escaped, ok := s.stringToken()
	if !ok || !utf8.Valid(tok) {
		return "", false
	}
	if !escaped {
		return string(tok), true
	}
	out := make([]byte, 0, len(tok))
	for i := 0; i < len(tok); {
		if tok[i] != '\\' {
			out = append(out, tok[i])
			i++
			continue
		}
		switch c := tok[i+1]; c {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hex4(tok, i+2)
			if r >= 0xd800 && r <= 0xdfff {
				return "", false
			}
			out = utf8.AppendRune(out, r)
			i += 6
			continue
		default: // '"', '\\', '/'
			out = append(out, c)
		}
		i += 2
	}
	return string(out), true
}

// raw returns a copy of the JSON value at s.i, checked to be valid JSON,
// as encoding/json fills a json.RawMessage.
func (s *jsonScanner) raw() (json.RawMessage, bool) {
	s.skipSpace()
	start := s.i
	if !s.skipValue(0) {
		return nil, false
	}
	return append(json.RawMessage(nil), s.b[start:s.i]...), true
}

// skipValue moves past one JSON value, checking it.
func (s *jsonScanner) skipValue(depth int) bool {
	s.skipSpace()
	if s.i >= len(s.b) || depth > maxFastDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, _, ok := s.stringToken()
		return ok
	case c == '{':
		s.i++
		if s.consume('}') {
			return true
		}
		for {
			if _, _, ok := s.stringToken(); !ok || !s.consume(':') || !s.skipValue(depth+1) {
				return false
			}
			if s.consume('}') {
				return true
			}
			if !s.consume(',') {
				return false
			}
		}
	case c == '[':
		s.i++
		if s.consume(']') {
			return true
		}
		for {
			if !s.skipValue(depth + 1) {
				return false
			}
			if s.consume(']') {
				return true
			}
			if !s.consume(',') {
				return false
			}
		}
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

func (s *jsonScanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// number moves past a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() bool {
	b, i := s.b, s.i
	digits := func() bool {
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	s.i = i
	return true
}

// integer reads a JSON number that is a plain integer (what encoding/json
// stores in an int field without error).
func (s *jsonScanner) integer() (int64, bool) {
	s.skipSpace()
	start := s.i
	if !s.number() {
		return 0, false
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	return n, err == nil
}

// object reads the members of a JSON object, handing each key to member,
// which reads the value (false: not decodable here). A key given twice
// is refused.
func (s *jsonScanner) object(member func(key []byte) bool) bool {
	if !s.consume('{') {
		return false
	}
	if s.consume('}') {
		return true
	}
	var seen [16][]byte // the objects read here have at most 12 keys
	n := 0
	for {
		key, escaped, ok := s.stringToken()
		if !ok || escaped || !s.consume(':') || n == len(seen) {
			return false
		}
		for _, k := range seen[:n] {
			if bytes.Equal(k, key) {
				return false
			}
		}
		if !member(key) {
			return false
		}
		seen[n] = key
		n++
		if s.consume('}') {
			return true
		}
		if !s.consume(',') {
			return false
		}
	}
}

// end reports whether nothing but spaces is left.
func (s *jsonScanner) end() bool {
	s.skipSpace()
	return s.i == len(s.b)
}

// fastMessage reads a Message as Encode writes it.
func (s *jsonScanner) fastMessage(m *Message) bool {
	return s.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "role":
			m.Role, ok = s.text()
		case "content":
			m.Content, ok = s.raw()
		case "tool_call_id":
			m.ToolCallID, ok = s.text()
		case "tool_calls":
			m.ToolCalls, ok = s.raw()
		case "tool_name":
			m.ToolName, ok = s.text()
		case "token_count":
			var n int64
			n, ok = s.integer()
			m.TokenCount = &n
		case "finish_reason":
			m.FinishReason, ok = s.text()
		case "reasoning":
			var t string
			t, ok = s.text()
			m.Reasoning = &t
		case "reasoning_content":
			var t string
			t, ok = s.text()
			m.ReasoningContent = &t
		case "reasoning_details":
			m.ReasoningDetails, ok = s.raw()
		case "codex_reasoning_items":
			m.CodexReasoningItems, ok = s.raw()
		case "codex_message_items":
			m.CodexMessageItems, ok = s.raw()
		}
		return ok
	})
}

// fastTime reads a time as time.Time's UnmarshalJSON does.
func (s *jsonScanner) fastTime(t *time.Time) bool {
	s.skipSpace()
	start := s.i
	if _, escaped, ok := s.stringToken(); !ok || escaped {
		return false
	}
	return t.UnmarshalJSON(s.b[start:s.i]) == nil
}

// fastMessageAppended decodes a message_appended as Encode writes it;
// false when only encoding/json can (see above).
func fastMessageAppended(data []byte) (MessageAppended, bool) {
	var e MessageAppended
	s := &jsonScanner{b: data}
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "session_id":
			var ok bool
			e.SessionID, ok = s.text()
			return ok
		case "message":
			return s.fastMessage(&e.Message)
		case "at":
			return s.fastTime(&e.At)
		}
		return false
	})
	return e, ok && s.end()
}

// DecodeMetadata decodes an event's stored metadata.
func DecodeMetadata(data []byte) (Metadata, error) {
	if md, ok := fastMetadata(data); ok {
		return md, nil
	}
	var md Metadata
	if err := json.Unmarshal(data, &md); err != nil {
		return Metadata{}, err
	}
	return md, nil
}

// fastMetadata decodes metadata as Encode's caller writes it; false when
// only encoding/json can (see above).
func fastMetadata(data []byte) (Metadata, bool) {
	var md Metadata
	s := &jsonScanner{b: data}
	ok := s.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "schema_version":
			var n int64
			n, ok = s.integer()
			md.SchemaVersion = int(n)
		case "command":
			md.Command, ok = s.text()
		case "command_id":
			md.CommandID, ok = s.text()
		case "correlation_id":
			md.CorrelationID, ok = s.text()
		case "node":
			md.Node, ok = s.text()
		case "redacted":
			md.Redacted, ok = s.text()
		}
		return ok
	})
	return md, ok && s.end()
}
