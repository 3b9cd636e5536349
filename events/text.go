package events

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// The agent's own JSON (message content, tool calls, reasoning items) is
// kept as it was sent, in json.RawMessage fields that encoding/json copies
// byte for byte. Every other string of an event is valid UTF-8 once decoded
// (encoding/json replaces invalid bytes and lone surrogate escapes with
// U+FFFD), but a raw field would carry invalid bytes, or a \ud800 escape a
// strict consumer cannot decode, into the log and out to every reader. The
// codec repairs both on the way in (Encode) and on the way out (Decode), so
// no event written by an older build can make an answer invalid UTF-8.

var replacement = []byte("\uFFFD")

// validJSONText returns raw with every invalid UTF-8 sequence replaced by
// U+FFFD and every \u escape of a lone UTF-16 surrogate replaced by \ufffd.
// raw is returned as is (not copied) when it needs neither. raw is assumed
// to be JSON text: a backslash occurs only inside strings, as an escape.
func validJSONText(raw json.RawMessage) json.RawMessage {
	if raw == nil || (utf8.Valid(raw) && !hasSurrogateEscape(raw)) {
		return raw
	}
	out := bytes.ToValidUTF8(raw, replacement)
	if !hasSurrogateEscape(out) {
		return out
	}
	var b bytes.Buffer
	b.Grow(len(out))
	for i := 0; i < len(out); {
		if out[i] != '\\' || i+1 >= len(out) {
			b.WriteByte(out[i])
			i++
			continue
		}
		if out[i+1] != 'u' {
			b.Write(out[i : i+2])
			i += 2
			continue
		}
		r, ok := escapeAt(out, i)
		switch {
		case !ok:
			b.Write(out[i : i+2])
			i += 2
		case isHighSurrogate(r):
			if low, ok := escapeAt(out, i+6); ok && isLowSurrogate(low) {
				b.Write(out[i : i+12])
				i += 12
				continue
			}
			b.WriteString(`\ufffd`)
			i += 6
		case isLowSurrogate(r):
			b.WriteString(`\ufffd`)
			i += 6
		default:
			b.Write(out[i : i+6])
			i += 6
		}
	}
	return b.Bytes()
}

// hasSurrogateEscape reports whether raw may hold a \u escape of a UTF-16
// surrogate (\uD800 to \uDFFF); a valid pair counts too, the slow path
// keeps it.
func hasSurrogateEscape(raw []byte) bool {
	for i := 0; ; {
		j := bytes.Index(raw[i:], []byte(`\u`))
		if j < 0 {
			return false
		}
		i += j
		if r, ok := escapeAt(raw, i); ok && (isHighSurrogate(r) || isLowSurrogate(r)) {
			return true
		}
		i += 2
	}
}

// escapeAt decodes the \uXXXX escape starting at raw[i].
func escapeAt(raw []byte, i int) (rune, bool) {
	if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range raw[i+2 : i+6] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

func isHighSurrogate(r rune) bool { return 0xD800 <= r && r < 0xDC00 }
func isLowSurrogate(r rune) bool  { return 0xDC00 <= r && r < 0xE000 }

// validMessage returns m with its raw JSON fields made valid text, and
// whether any needed repair.
func validMessage(m Message) (Message, bool) {
	repaired := false
	for _, f := range []*json.RawMessage{&m.Content, &m.ToolCalls, &m.ReasoningDetails, &m.CodexReasoningItems, &m.CodexMessageItems} {
		v := validJSONText(*f)
		if !sameBytes(v, *f) {
			*f, repaired = v, true
		}
	}
	return m, repaired
}

// sameBytes reports whether a and b are the same slice of the same array
// (validJSONText returns its argument itself when it needs no repair).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// validText returns e with the raw JSON it carries made valid text; an
// event that needs no repair is returned as it is, without boxing a copy
// (a message's copy was two allocations of every append).
func validText(e Event) Event {
	switch ev := e.(type) {
	case MessageAppended:
		if m, repaired := validMessage(ev.Message); repaired {
			ev.Message = m
			return ev
		}
	case TranscriptRewritten:
		var msgs []Message
		for i, m := range ev.Messages {
			m, repaired := validMessage(m)
			if repaired && msgs == nil {
				msgs = slices.Clone(ev.Messages)
			}
			if msgs != nil {
				msgs[i] = m
			}
		}
		if msgs != nil {
			ev.Messages = msgs
			return ev
		}
	}
	return e
}
