package hermeshome

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"hermes/events"
	"hermes/projections/sessions"
)

// maxCount is the largest token count or cost an imported entry keeps
// (2^53, the largest integer every JSON reader holds exactly); larger
// values are clamped to it and reported.
const maxCount = 1 << 53

// nonFinite marks a NaN or Infinity token of Python's json in the text
// handed to encoding/json (which refuses them): a string no real value
// holds, so a numeric field holding it is known to have been NaN.
const nonFinite = "\x00non-finite:"

// knownEntryFields are the SessionEntry keys of sessions.json this build
// maps to the lane; any other key is kept in the event's Extra.
var knownEntryFields = map[string]bool{
	"session_key": true, "session_id": true, "created_at": true, "updated_at": true, "origin": true,
	"display_name": true, "platform": true, "chat_type": true, "input_tokens": true, "output_tokens": true,
	"cache_read_tokens": true, "cache_write_tokens": true, "total_tokens": true, "last_prompt_tokens": true,
	"estimated_cost_usd": true, "cost_status": true, "memory_flushed": true, "expiry_finalized": true,
	"suspended": true, "resume_pending": true, "resume_reason": true, "last_resume_marked_at": true,
	"is_fresh_reset": true, "was_auto_reset": true, "auto_reset_reason": true, "reset_had_activity": true,
	"active_turn_token": true, "active_turn_started_at": true,
}

// Routing is what sessions.json held.
type Routing struct {
	// Lanes are the entries that could be read, in key order, without
	// HadActivity and RestartFailureCount (the caller knows those).
	Lanes []events.LaneImported
	// Readme is the _README sentinel's text ("" when absent).
	Readme string
	// WrittenByHermes: the file is the export hermes writes from its log
	// (after an import into the same home): there is nothing to import.
	WrittenByHermes bool
	// ActiveTurns are the entries with an active-turn marker (schema v26's
	// active_turn_token and active_turn_started_at, which mark_turn_active
	// writes and a finished turn clears): session key → when the turn
	// started.
	ActiveTurns map[string]time.Time
}

// ReadRouting reads a sessions.json, interpreting its naive times in loc.
// A missing file is an empty routing index. Entries that cannot be lanes
// are skipped and reported; values an event cannot hold are clamped and
// reported. A file that is not a JSON object at all is an error (Hermes
// would start empty and overwrite it: the import refuses instead).
func ReadRouting(path string, loc *time.Location, rep *Report) (Routing, error) {
	data, err := readBounded(path, MaxSessionsJSONBytes)
	if errors.Is(err, os.ErrNotExist) {
		rep.Add(Info, "sessions.json", "not found: no lanes to import")
		return Routing{}, nil
	}
	if err != nil {
		return Routing{}, fmt.Errorf("read %s: %w", path, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(markNonFinite(data), &top); err != nil {
		return Routing{}, fmt.Errorf("read %s: not a JSON object: %w", path, err)
	}
	var out Routing
	if raw, ok := top["_README"]; ok {
		_ = json.Unmarshal(raw, &out.Readme)
		if out.Readme == sessions.SessionsJSONReadme {
			return Routing{Readme: out.Readme, WrittenByHermes: true}, nil
		}
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		raw := top[key]
		if strings.HasPrefix(key, "_") {
			if key != "_README" {
				rep.Add(Info, "sessions.json "+key, "sentinel key not imported")
			}
			continue
		}
		lane, turn, ok := readEntry("sessions.json ", key, raw, loc, rep)
		if ok {
			out.Lanes = append(out.Lanes, lane)
			out.addTurn(key, turn)
		}
	}
	return out, nil
}

func (r *Routing) addTurn(key string, started *time.Time) {
	if started == nil {
		return
	}
	if r.ActiveTurns == nil {
		r.ActiveTurns = map[string]time.Time{}
	}
	r.ActiveTurns[key] = *started
}

// ReadRoutingRows reads the entries of state.db's gateway_routing (schema
// v25+) as [ReadRouting] reads sessions.json's, reporting under
// "gateway_routing <key>".
func ReadRoutingRows(rows []RoutingRow, loc *time.Location, rep *Report) Routing {
	var out Routing
	for _, row := range rows {
		if strings.HasPrefix(row.Key, "_") {
			rep.Add(Info, "gateway_routing "+printable(row.Key), "sentinel key not imported")
			continue
		}
		lane, turn, ok := readEntry("gateway_routing ", row.Key, markNonFinite(row.EntryJSON), loc, rep)
		if ok {
			out.Lanes = append(out.Lanes, lane)
			out.addTurn(row.Key, turn)
		}
	}
	return out
}

// MergeRouting is the routing index Hermes loads from a home with both:
// every gateway_routing entry, and the sessions.json entries of keys it
// does not have (SessionStore._ensure_loaded_locked reads the table first
// and folds in the file's entries "only for keys the DB didn't provide —
// DB entries win"). Lanes come out in key order.
func MergeRouting(db, file Routing, rep *Report) Routing {
	out := Routing{Readme: file.Readme}
	have := map[string]bool{}
	for _, l := range db.Lanes {
		have[l.SessionKey] = true
		out.Lanes = append(out.Lanes, l)
	}
	for k, t := range db.ActiveTurns {
		out.addTurn(k, &t)
	}
	shadowed, added := 0, 0
	for _, l := range file.Lanes {
		if have[l.SessionKey] {
			shadowed++
			continue
		}
		added++
		out.Lanes = append(out.Lanes, l)
		if t, ok := file.ActiveTurns[l.SessionKey]; ok {
			out.addTurn(l.SessionKey, &t)
		}
	}
	if len(db.Lanes) > 0 && len(file.Lanes) > 0 {
		rep.Add(Info, "sessions.json", "%d entries also in state.db's gateway_routing, whose rows win as in Hermes' loader; %d entries only in sessions.json imported from it", shadowed, added)
	}
	sort.Slice(out.Lanes, func(i, j int) bool { return out.Lanes[i].SessionKey < out.Lanes[j].SessionKey })
	return out
}

// entryReader converts one entry's fields, reporting under where.
type entryReader struct {
	fields map[string]json.RawMessage
	where  string
	rep    *Report
}

func readEntry(prefix, key string, raw json.RawMessage, loc *time.Location, rep *Report) (events.LaneImported, *time.Time, bool) {
	l, ok := readEntryFields(prefix, key, raw, loc, rep)
	if !ok {
		return l, nil, false
	}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(raw, &fields)
	r := entryReader{fields: fields, where: prefix + printable(key), rep: rep}
	// Hermes trusts the marker only as a pair: a token without a start
	// time (or the reverse) is dropped, as SessionEntry.from_dict does.
	if tok := r.str("active_turn_token"); tok != "" {
		if t, ok := r.time("active_turn_started_at", loc); ok {
			return l, &t, true
		}
		rep.Add(Info, r.where, "active_turn_token without a valid active_turn_started_at: ignored, as Hermes does")
	}
	return l, nil, true
}

func readEntryFields(prefix, key string, raw json.RawMessage, loc *time.Location, rep *Report) (events.LaneImported, bool) {
	where := prefix + printable(key)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		rep.Add(Skipped, where, "entry is not a JSON object")
		return events.LaneImported{}, false
	}
	r := entryReader{fields: fields, where: where, rep: rep}
	switch {
	case key == "":
		rep.Add(Skipped, where, "empty session key")
		return events.LaneImported{}, false
	case strings.ContainsRune(key, 0):
		rep.Add(Skipped, where, "session key has a NUL byte")
		return events.LaneImported{}, false
	case strings.ContainsRune(key, utf8.RuneError) || !utf8.Valid(fields["session_key"]):
		rep.Add(Skipped, where, "session key is not valid UTF-8")
		return events.LaneImported{}, false
	}
	if sk := r.str("session_key"); sk != "" && sk != key {
		rep.Add(Info, where, "entry's session_key %q differs from its key; the key is used, as Hermes does", printable(sk))
	}
	sid := r.str("session_id")
	if err := validSessionID(sid); err != nil {
		rep.Add(Skipped, where, "session id %q: %v (Hermes skips such entries too)", printable(sid), err)
		return events.LaneImported{}, false
	}
	created, okC := r.time("created_at", loc)
	updated, okU := r.time("updated_at", loc)
	switch {
	case !okC && !okU:
		rep.Add(Skipped, where, "neither created_at nor updated_at is a time")
		return events.LaneImported{}, false
	case !okC:
		created = updated
		rep.Add(Clamped, where, "created_at is not a time: updated_at used")
	case !okU:
		updated = created
		rep.Add(Clamped, where, "updated_at is not a time: created_at used")
	}
	origin, originExtra := r.origin()
	l := events.LaneImported{
		SessionKey:       key,
		SessionID:        sid,
		CreatedAt:        created,
		UpdatedAt:        updated,
		Origin:           origin,
		DisplayName:      r.str("display_name"),
		Platform:         r.str("platform"),
		ChatType:         r.str("chat_type"),
		InputTokens:      r.count("input_tokens"),
		OutputTokens:     r.count("output_tokens"),
		CacheReadTokens:  r.count("cache_read_tokens"),
		CacheWriteTokens: r.count("cache_write_tokens"),
		TotalTokens:      r.count("total_tokens"),
		LastPromptTokens: r.count("last_prompt_tokens"),
		EstimatedCostUSD: r.cost("estimated_cost_usd"),
		CostStatus:       r.str("cost_status"),
		ExpiryFinalized:  r.flag("expiry_finalized") || r.flag("memory_flushed"),
		Suspended:        r.flag("suspended"),
		ResumePending:    r.flag("resume_pending"),
		ResumeReason:     r.str("resume_reason"),
		IsFreshReset:     r.flag("is_fresh_reset"),
		WasAutoReset:     r.flag("was_auto_reset"),
		AutoResetReason:  r.str("auto_reset_reason"),
		ResetHadActivity: r.flag("reset_had_activity"),
	}
	if _, ok := fields["cost_status"]; !ok {
		l.CostStatus = "unknown"
	}
	if raw, ok := fields["last_resume_marked_at"]; ok && !isJSONNull(raw) {
		if t, ok := r.time("last_resume_marked_at", loc); ok {
			l.LastResumeMarkedAt = &t
		} else {
			rep.Add(Clamped, where, "last_resume_marked_at is not a time: dropped")
		}
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		raw := fields[name]
		if knownEntryFields[name] {
			continue
		}
		if l.Extra == nil {
			l.Extra = map[string]json.RawMessage{}
		}
		l.Extra[cleanString(name)] = cleanJSON(raw)
		if t := bytes.TrimSpace(raw); isJSONNull(raw) || string(t) == "{}" || string(t) == "[]" {
			continue // kept, but nothing to say about an empty value (every v26 entry has metadata {})
		}
		rep.Add(Kept, where, "field %q is kept in the log but has no place in the lane read model", printable(name))
	}
	if originExtra != nil {
		if l.Extra == nil {
			l.Extra = map[string]json.RawMessage{}
		}
		data, _ := json.Marshal(originExtra)
		l.Extra[OriginExtraKey] = data
	}
	return l, true
}

// OriginExtraKey names, in an imported lane's Extra, the origin's fields
// events.Source has no place for (newer Hermes' scope_id, profile and
// thread-creation fields), as Hermes wrote them.
const OriginExtraKey = "origin_extra"

// str reads a string field; null and absent are "". A number is taken as
// its text.
func (r entryReader) str(name string) string {
	raw, ok := r.fields[name]
	if !ok || isJSONNull(raw) {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if strings.HasPrefix(s, nonFinite) {
			r.rep.Add(Clamped, r.where, "%s is %s, not text: emptied", name, strings.TrimPrefix(s, nonFinite))
			return ""
		}
		if !utf8.Valid(raw) {
			r.rep.Add(Clamped, r.where, "%s is not valid UTF-8: invalid bytes replaced with U+FFFD", name)
		}
		return s
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		return n.String()
	}
	r.rep.Add(Clamped, r.where, "%s is not text: emptied", name)
	return ""
}

// flag reads a bool field; null and absent are false.
func (r entryReader) flag(name string) bool {
	raw, ok := r.fields[name]
	if !ok || isJSONNull(raw) {
		return false
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		r.rep.Add(Clamped, r.where, "%s is not a boolean: false", name)
		return false
	}
	return b
}

// count reads a token counter: a whole number in 0..2^53. NaN, Infinity,
// negatives and fractions are clamped and reported.
func (r entryReader) count(name string) int64 {
	f, ok := r.number(name)
	if !ok {
		return 0
	}
	switch {
	case f < 0:
		r.rep.Add(Clamped, r.where, "%s %v is negative: 0", name, f)
		return 0
	case f > maxCount:
		r.rep.Add(Clamped, r.where, "%s %v is out of range: %d", name, f, int64(maxCount))
		return maxCount
	case f != math.Trunc(f):
		r.rep.Add(Clamped, r.where, "%s %v is not whole: %d", name, f, int64(f))
	}
	return int64(f)
}

// cost reads a cost in dollars: finite and not negative.
func (r entryReader) cost(name string) float64 {
	f, ok := r.number(name)
	if !ok {
		return 0
	}
	switch {
	case f < 0:
		r.rep.Add(Clamped, r.where, "%s %v is negative: 0", name, f)
		return 0
	case f > maxCount:
		r.rep.Add(Clamped, r.where, "%s %v is out of range: 0", name, f)
		return 0
	}
	return f
}

// number reads a finite number; false (reported) for NaN, Infinity and
// anything that is not a number, false (silent) for null and absent.
func (r entryReader) number(name string) (float64, bool) {
	raw, ok := r.fields[name]
	if !ok || isJSONNull(raw) {
		return 0, false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && strings.HasPrefix(s, nonFinite) {
		r.rep.Add(Clamped, r.where, "%s is %s: 0", name, strings.TrimPrefix(s, nonFinite))
		return 0, false
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		r.rep.Add(Clamped, r.where, "%s is not a number: 0", name)
		return 0, false
	}
	return f, true
}

// naiveLayouts are the shapes of Python's datetime.isoformat(), naive or
// with an offset.
var naiveLayouts = []string{"2006-01-02T15:04:05.999999999", "2006-01-02T15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"}

// time reads an ISO-8601 time; a naive one is in loc, as Hermes wrote it.
func (r entryReader) time(name string, loc *time.Location) (time.Time, bool) {
	s := r.str(name)
	if s == "" {
		return time.Time{}, false
	}
	for _, layout := range naiveLayouts {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// origin reads the SessionSource dict, and its fields events.Source has no
// place for (kept as they are).
func (r entryReader) origin() (events.Source, map[string]json.RawMessage) {
	raw, ok := r.fields["origin"]
	if !ok || isJSONNull(raw) {
		return events.Source{}, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		r.rep.Add(Clamped, r.where, "origin is not an object: empty origin")
		return events.Source{}, nil
	}
	o := entryReader{fields: fields, where: r.where + " origin", rep: r.rep}
	src := events.Source{
		Platform: o.str("platform"), ChatID: o.str("chat_id"), ChatName: o.str("chat_name"),
		ChatType: o.str("chat_type"), UserID: o.str("user_id"), UserName: o.str("user_name"),
		ThreadID: o.str("thread_id"), ChatTopic: o.str("chat_topic"), UserIDAlt: o.str("user_id_alt"),
		ChatIDAlt: o.str("chat_id_alt"), IsBot: o.flag("is_bot"), GuildID: o.str("guild_id"),
		ParentChatID: o.str("parent_chat_id"), MessageID: o.str("message_id"),
		RoleAuthorized: o.flag("role_authorized"),
	}
	known := map[string]bool{"platform": true, "chat_id": true, "chat_name": true, "chat_type": true, "user_id": true,
		"user_name": true, "thread_id": true, "chat_topic": true, "user_id_alt": true, "chat_id_alt": true,
		"is_bot": true, "guild_id": true, "parent_chat_id": true, "message_id": true, "role_authorized": true}
	// Newer Hermes names the guild scope_id (guild_id its alias, scope_id
	// winning), as SessionSource.from_dict reads it.
	if scope := o.str("scope_id"); scope != "" {
		src.GuildID = scope
	}
	var extra map[string]json.RawMessage
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if known[name] {
			continue
		}
		if extra == nil {
			extra = map[string]json.RawMessage{}
		}
		extra[cleanString(name)] = cleanJSON(fields[name])
		r.rep.Add(Kept, r.where, "origin field %q is kept in the lane's extra (%s): the lane's origin has no place for it", printable(name), OriginExtraKey)
	}
	return src, extra
}

// markNonFinite rewrites the bare NaN, Infinity and -Infinity tokens
// Python's json writes (outside strings) as marked strings.
func markNonFinite(data []byte) []byte {
	var out bytes.Buffer
	inString, escaped := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			out.WriteByte(c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == '"' {
			inString = true
			out.WriteByte(c)
			continue
		}
		for _, tok := range []string{"NaN", "Infinity", "-Infinity"} {
			if bytes.HasPrefix(data[i:], []byte(tok)) {
				quoted, _ := json.Marshal(nonFinite + tok)
				out.Write(quoted)
				i += len(tok) - 1
				c = 0
				break
			}
		}
		if c != 0 {
			out.WriteByte(c)
		}
	}
	return out.Bytes()
}

func isJSONNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// cleanJSON re-encodes a raw value so it is valid UTF-8 JSON with no
// non-finite markers left in it.
func cleanJSON(raw json.RawMessage) json.RawMessage {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return json.RawMessage("null")
	}
	data, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return bytes.ReplaceAll(data, []byte(`\u0000non-finite:`), []byte("non-finite:"))
}

func cleanString(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// printable is s for a message: valid UTF-8, NUL shown as \x00.
func printable(s string) string {
	return strings.ReplaceAll(cleanString(s), "\x00", `\x00`)
}

// validSessionID applies the rules Hermes' loader applies to ids (no "..",
// "/", "\", no drive letter) plus what a stream name needs (not empty,
// valid UTF-8, no control characters).
func validSessionID(id string) error {
	switch {
	case id == "":
		return errors.New("empty")
	case len(id) > 128:
		return errors.New("longer than 128 bytes")
	case !utf8.ValidString(id):
		return errors.New("not valid UTF-8")
	case strings.Contains(id, ".."), strings.ContainsAny(id, `/\`):
		return errors.New(`contains a path separator or ".."`)
	case len(id) >= 2 && id[1] == ':' && (id[0]|0x20 >= 'a' && id[0]|0x20 <= 'z'):
		return errors.New("starts with a drive letter")
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return errors.New("contains a control character")
		}
	}
	return nil
}
