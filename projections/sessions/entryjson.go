package sessions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"hermes/domain"
	"hermes/events"
)

// sessions.json holds every live lane, so at 100,000 lanes a rewrite
// encodes 100,000 entries. Through encoding/json (reflection, then a second
// pass to indent) that cost 1.5 CPU-s a rewrite, the largest share of a
// busy server's time. The entries are written here by hand instead, byte
// for byte as json.Encoder with SetEscapeHTML(false) and SetIndent("  ",
// "  ") writes them (entryjson_test.go holds that encoder as the oracle).

// exportLane is what sessions.json shows of a lane, as the export reads it.
type exportLane struct {
	lane domain.Lane
	// origin is the origin column: events.Source as json.Marshal writes it.
	origin []byte
}

// exportColumns are the lanes columns sessions.json shows, in
// scanExportLane's order.
const exportColumns = `session_key, session_id, created_at, updated_at, origin, display_name, platform,
	chat_type, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_tokens,
	estimated_cost_usd, cost_status, last_prompt_tokens, was_auto_reset, auto_reset_reason,
	reset_had_activity, is_fresh_reset, expiry_finalized, suspended, resume_pending, resume_reason,
	last_resume_marked_at`

// scanExportLane reads one row of exportColumns into e, reusing e.origin.
func scanExportLane(s scanner, e *exportLane) error {
	var created, updated, marked int64
	l := &e.lane
	err := s.Scan(&l.SessionKey, &l.SessionID, &created, &updated, (*rawBytes)(&e.origin), &l.DisplayName,
		&l.Platform, &l.ChatType, &l.InputTokens, &l.OutputTokens, &l.CacheReadTokens, &l.CacheWriteTokens,
		&l.TotalTokens, &l.EstimatedCostUSD, &l.CostStatus, &l.LastPromptTokens, &l.WasAutoReset,
		&l.AutoResetReason, &l.ResetHadActivity, &l.IsFreshReset, &l.ExpiryFinalized, &l.Suspended,
		&l.ResumePending, &l.ResumeReason, &marked)
	if err != nil {
		return err
	}
	l.CreatedAt, l.UpdatedAt, l.LastResumeMarkedAt = fromNanos(created), fromNanos(updated), fromNanos(marked)
	return nil
}

// rawBytes scans a text column into a reused byte slice.
type rawBytes []byte

func (r *rawBytes) Scan(src any) error {
	switch v := src.(type) {
	case string:
		*r = append((*r)[:0], v...)
	case []byte:
		*r = append((*r)[:0], v...)
	default:
		return fmt.Errorf("scan %T into bytes", src)
	}
	return nil
}

// Indentation of an entry's members and of its origin's, under the
// sessions.json object's own two spaces.
const (
	entryIndent  = "\n    "
	originIndent = "\n      "
)

// appendEntry appends e as a SessionEntry in Hermes' to_dict shape (field
// order as Hermes writes it), with naive ISO-8601 times in loc. A string
// json cannot take as it is goes through fallback.
func appendEntry(b []byte, e *exportLane, loc *time.Location, fallback *noEscapeEncoder) ([]byte, error) {
	l := &e.lane
	var err error
	str := func(name, v string) {
		b = append(b, entryIndent...)
		b = append(b, name...)
		if err == nil {
			b, err = appendString(b, v, fallback)
		}
		b = append(b, ',')
	}
	optionalStr := func(name, v string) {
		if v == "" {
			b = append(b, entryIndent...)
			b = append(b, name...)
			b = append(b, "null,"...)
			return
		}
		str(name, v)
	}
	num := func(name string, v int64) {
		b = append(b, entryIndent...)
		b = append(b, name...)
		b = strconv.AppendInt(b, v, 10)
		b = append(b, ',')
	}
	flag := func(name string, v bool) {
		b = append(b, entryIndent...)
		b = append(b, name...)
		b = strconv.AppendBool(b, v)
		b = append(b, ',')
	}
	b = append(b, '{')
	str(`"session_key": `, l.SessionKey)
	str(`"session_id": `, l.SessionID)
	str(`"created_at": `, PythonISO(l.CreatedAt, loc))
	str(`"updated_at": `, PythonISO(l.UpdatedAt, loc))
	optionalStr(`"display_name": `, l.DisplayName)
	optionalStr(`"platform": `, l.Platform)
	str(`"chat_type": `, l.ChatType)
	num(`"input_tokens": `, l.InputTokens)
	num(`"output_tokens": `, l.OutputTokens)
	num(`"cache_read_tokens": `, l.CacheReadTokens)
	num(`"cache_write_tokens": `, l.CacheWriteTokens)
	num(`"total_tokens": `, l.TotalTokens)
	num(`"last_prompt_tokens": `, l.LastPromptTokens)
	b = append(b, entryIndent+`"estimated_cost_usd": `...)
	b = AppendJSONFloat(b, finiteCost(l.EstimatedCostUSD))
	b = append(b, ',')
	str(`"cost_status": `, l.CostStatus)
	flag(`"memory_flushed": `, l.ExpiryFinalized)
	flag(`"expiry_finalized": `, l.ExpiryFinalized)
	flag(`"suspended": `, l.Suspended)
	flag(`"resume_pending": `, l.ResumePending)
	optionalStr(`"resume_reason": `, l.ResumeReason)
	if l.LastResumeMarkedAt.IsZero() {
		optionalStr(`"last_resume_marked_at": `, "")
	} else {
		str(`"last_resume_marked_at": `, PythonISO(l.LastResumeMarkedAt, loc))
	}
	flag(`"is_fresh_reset": `, l.IsFreshReset)
	flag(`"was_auto_reset": `, l.WasAutoReset)
	optionalStr(`"auto_reset_reason": `, l.AutoResetReason)
	flag(`"reset_had_activity": `, l.ResetHadActivity)
	b = append(b, entryIndent+`"origin": `...)
	if err != nil {
		return b, err
	}
	if b, err = appendOrigin(b, e.origin, fallback); err != nil {
		return b, fmt.Errorf("origin: %w", err)
	}
	return append(b, "\n  }"...), nil
}

// appendOrigin appends the origin column indented as an entry's member.
// The column is compact JSON of events.Source; without a backslash (the
// usual case) its strings need no change, so it is indented as it is.
// Otherwise it is decoded, since json.Marshal escaped <, > and & there,
// which sessions.json writes as they are.
func appendOrigin(b []byte, raw []byte, fallback *noEscapeEncoder) ([]byte, error) {
	if bytes.IndexByte(raw, '\\') < 0 {
		if out, ok := indentFlatObject(b, raw); ok {
			return out, nil
		}
	}
	var src events.Source
	if err := json.Unmarshal(raw, &src); err != nil {
		return b, fmt.Errorf("decode: %w", err)
	}
	return appendSource(b, src, fallback)
}

// indentFlatObject appends raw, a compact JSON object whose values are
// strings without escapes or booleans, indented at originIndent. It
// reports false, having appended nothing, for anything else.
func indentFlatObject(b []byte, raw []byte) ([]byte, bool) {
	start := len(b)
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return b, false
	}
	body := raw[1 : len(raw)-1]
	if len(body) == 0 {
		return append(b, "{}"...), true
	}
	b = append(b, '{')
	for len(body) > 0 {
		// "name":
		if body[0] != '"' {
			return b[:start], false
		}
		end := bytes.IndexByte(body[1:], '"') + 1
		if end == 0 || end+1 >= len(body) || body[end+1] != ':' {
			return b[:start], false
		}
		b = append(b, originIndent...)
		b = append(b, body[:end+1]...)
		b = append(b, ": "...)
		body = body[end+2:]
		// value
		var n int
		if len(body) > 0 && body[0] == '"' {
			n = bytes.IndexByte(body[1:], '"') + 2
			if n == 1 {
				return b[:start], false
			}
		} else {
			n = bytes.IndexByte(body, ',')
			if n < 0 {
				n = len(body)
			}
			if v := string(body[:n]); v != "true" && v != "false" {
				return b[:start], false
			}
		}
		b = append(b, body[:n]...)
		body = body[n:]
		if len(body) > 0 {
			if body[0] != ',' || len(body) == 1 {
				return b[:start], false
			}
			b = append(b, ',')
			body = body[1:]
		}
	}
	return append(b, "\n    }"...), true
}

// appendSource appends src as json writes events.Source (omitempty
// included), indented at originIndent.
func appendSource(b []byte, src events.Source, fallback *noEscapeEncoder) ([]byte, error) {
	var err error
	first := true
	member := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, originIndent...)
		b = append(b, name...)
	}
	str := func(name, v string, omitEmpty bool) {
		if omitEmpty && v == "" {
			return
		}
		member(name)
		if err == nil {
			b, err = appendString(b, v, fallback)
		}
	}
	flag := func(name string, v bool) {
		member(name)
		b = strconv.AppendBool(b, v)
	}
	b = append(b, '{')
	str(`"platform": `, src.Platform, false)
	str(`"chat_id": `, src.ChatID, false)
	str(`"chat_name": `, src.ChatName, true)
	str(`"chat_type": `, src.ChatType, false)
	str(`"user_id": `, src.UserID, true)
	str(`"user_name": `, src.UserName, true)
	str(`"thread_id": `, src.ThreadID, true)
	str(`"chat_topic": `, src.ChatTopic, true)
	str(`"user_id_alt": `, src.UserIDAlt, true)
	str(`"chat_id_alt": `, src.ChatIDAlt, true)
	flag(`"is_bot": `, src.IsBot)
	str(`"guild_id": `, src.GuildID, true)
	str(`"parent_chat_id": `, src.ParentChatID, true)
	str(`"message_id": `, src.MessageID, true)
	flag(`"role_authorized": `, src.RoleAuthorized)
	str(`"profile": `, src.Profile, true)
	if src.AutoThreadCreated {
		flag(`"auto_thread_created": `, true)
	}
	str(`"auto_thread_initial_name": `, src.AutoThreadInitialName, true)
	str(`"prospective_thread_id": `, src.ProspectiveThreadID, true)
	return append(b, "\n    }"...), err
}

// appendString appends s as a JSON string. A string of printable ASCII or
// valid UTF-8 without ", \, control characters, U+2028 or U+2029 is
// written as it is; anything else goes through fallback, so escapes are
// json's.
func appendString(b []byte, s string, fallback *noEscapeEncoder) ([]byte, error) {
	plain, ascii := true, true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' {
			plain = false
			break
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if plain && !ascii {
		plain = utf8.ValidString(s) && !strings.ContainsRune(s, '\u2028') && !strings.ContainsRune(s, '\u2029')
	}
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"'), nil
	}
	var buf bytes.Buffer
	if err := fallback.encode(&buf, s); err != nil {
		return b, err
	}
	return append(b, buf.Bytes()...), nil
}

// AppendJSONFloat appends f, a finite number, as encoding/json writes a
// float64: the shortest decimal, in exponent form below 1e-6 and from 1e21,
// with a one-digit negative exponent where json shortens it (1e-07 becomes
// 1e-7). The API's hand-written answers use it too.
func AppendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
