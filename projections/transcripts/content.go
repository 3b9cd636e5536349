package transcripts

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// jsonPrefix marks content Hermes stored as JSON (a list of parts, or an
// object) rather than as text.
const jsonPrefix = "\x00json:"

// unixSeconds is Hermes' timestamp (time.time(): float seconds).
func unixSeconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// storedContent is what Hermes' append_message stores for a message's
// content: text as itself, a list or object as jsonPrefix + JSON, null as
// NULL. Numbers and booleans, which Python would store as numbers in a TEXT
// column, become their text (true is 1, as Python's bool is an int).
func storedContent(raw json.RawMessage) any {
	t := bytes.TrimSpace(raw)
	if isNull(t) {
		return nil
	}
	switch t[0] {
	case '"':
		if s, ok := plainJSONString(t); ok {
			return s
		}
		var s string
		if err := json.Unmarshal(t, &s); err == nil {
			return s
		}
		return string(t)
	case '[', '{':
		return jsonPrefix + compactJSON(t)
	case 't':
		return "1"
	case 'f':
		return "0"
	}
	return string(t)
}

// plainJSONString decodes a JSON string without escapes, which is its
// bytes between the quotes when they are valid UTF-8 with no control
// character (what encoding/json would give); false for any other.
func plainJSONString(t []byte) (string, bool) {
	if len(t) < 2 || t[len(t)-1] != '"' {
		return "", false
	}
	inner := t[1 : len(t)-1]
	for _, c := range inner {
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(inner) {
		return "", false
	}
	return string(inner), true
}

// storedJSON is how Hermes stores tool_calls, reasoning_details and the
// codex items: JSON text when the value is truthy in Python, NULL
// otherwise (so [], {}, "", 0 and false are not stored).
func storedJSON(raw json.RawMessage) any {
	if !truthy(raw) {
		return nil
	}
	return compactJSON(bytes.TrimSpace(raw))
}

func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// truthy is Python's truth value of the decoded JSON.
func truthy(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	if isNull(t) {
		return false
	}
	switch t[0] {
	case 'f':
		return false
	case 't':
		return true
	case '"':
		var s string
		return json.Unmarshal(t, &s) != nil || s != ""
	case '[':
		var a []json.RawMessage
		return json.Unmarshal(t, &a) != nil || len(a) > 0
	case '{':
		var o map[string]json.RawMessage
		return json.Unmarshal(t, &o) != nil || len(o) > 0
	}
	f, err := strconv.ParseFloat(string(t), 64)
	return err != nil || f != 0
}

// toolCallCount is what one message adds to sessions.tool_call_count:
// len(tool_calls) for a list, 1 for any other non-null value, 0 for none.
func toolCallCount(raw json.RawMessage) int64 {
	t := bytes.TrimSpace(raw)
	if isNull(t) {
		return 0
	}
	if t[0] == '[' {
		var a []json.RawMessage
		if err := json.Unmarshal(t, &a); err == nil {
			return int64(len(a))
		}
	}
	return 1
}

// decodeContent is Hermes' _decode_content as JSON: text becomes a JSON
// string, jsonPrefix content its JSON (or, when that JSON is broken, the
// stored text as a string), NULL becomes null.
func decodeContent(v sql.NullString) json.RawMessage {
	if !v.Valid {
		return json.RawMessage("null")
	}
	if rest, ok := strings.CutPrefix(v.String, jsonPrefix); ok && json.Valid([]byte(rest)) {
		return json.RawMessage(rest)
	}
	return jsonString(v.String)
}

// parseJSONOr returns the stored JSON text, or fallback when it is not
// valid JSON (Hermes' json.loads with a fallback).
func parseJSONOr(v string, fallback json.RawMessage) json.RawMessage {
	if json.Valid([]byte(v)) {
		return json.RawMessage(v)
	}
	return fallback
}

// jsonString encodes s as a JSON string without HTML escaping, so stored
// text reads the same in the JSON as in the database.
func jsonString(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return json.RawMessage(bytes.TrimRight(b.Bytes(), "\n"))
}

// asString returns the string a JSON value holds, and whether it is one.
func asString(raw json.RawMessage) (string, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(t, &s); err != nil {
		return "", false
	}
	return s, true
}

// textParts returns the "text" of every {"type": "text"} part of a list of
// content parts, and whether raw is a list at all.
func textParts(raw json.RawMessage) ([]string, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '[' {
		return nil, false
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(t, &parts); err != nil {
		return nil, false
	}
	var out []string
	for _, p := range parts {
		var part struct {
			Type string          `json:"type"`
			Text json.RawMessage `json:"text"`
		}
		if err := json.Unmarshal(p, &part); err != nil || part.Type != "text" {
			continue
		}
		s, _ := asString(part.Text)
		out = append(out, s)
	}
	return out, true
}

// previewText is the text Hermes shows for a message's content in search
// context and rewind lists: the text itself; for a list of parts, the text
// parts joined by sep, trimmed, or "[multimodal content]" when there are
// none; "" for anything else.
func previewText(content json.RawMessage, sep string) string {
	if s, ok := asString(content); ok {
		return s
	}
	if parts, ok := textParts(content); ok {
		nonEmpty := parts[:0:0]
		for _, p := range parts {
			if p != "" {
				nonEmpty = append(nonEmpty, p)
			}
		}
		if text := strings.TrimSpace(strings.Join(nonEmpty, sep)); text != "" {
			return text
		}
		return "[multimodal content]"
	}
	return ""
}

// firstRunes is Python's s[:n].
func firstRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// runeLen is Python's len(s).
func runeLen(s string) int {
	n := 0
	for range s {
		n++
	}
	return n
}
