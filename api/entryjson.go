package api

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"hermes/projections/sessions"
)

// Every resolve answers one Entry, and encoding/json (reflection, a
// MarshalJSON call and a compaction pass per timestamp) cost about 4% of
// the server's CPU under make bench's resolve load. The answer is written
// here by hand instead, byte for byte as writeJSON writes it
// (entryjson_test.go holds writeJSON as the oracle), whenever every string
// in it is printable ASCII that JSON takes as it is and the cost is finite:
// anything else goes through writeJSON, so escapes and errors stay json's.

// respondResolved answers a resolve with 200.
func respondResolved(w http.ResponseWriter, v resolveResponse) error {
	b, ok := v.appendJSON(make([]byte, 0, 1024))
	if !ok {
		return respond(w, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b) // as writeJSON: the client went away
	return nil
}

// appendJSON appends v and the encoder's newline to b, and reports false
// (b is then garbage) when v needs what only encoding/json does.
func (v resolveResponse) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"entry":`...)
	b, ok := v.Entry.appendJSON(b)
	if !ok {
		return b, false
	}
	b = append(b, `,"created":`...)
	b = strconv.AppendBool(b, v.Created)
	b = append(b, `,"reset_reason":`...)
	if b, ok = appendOptionalString(b, v.ResetReason); !ok {
		return b, false
	}
	return append(b, "}\n"...), true
}

// appendJSON appends e as json.Marshal writes it, or reports false.
func (e Entry) appendJSON(b []byte) ([]byte, bool) {
	ok := true
	str := func(name, v string) {
		var fine bool
		b, fine = appendPlainString(append(b, name...), v)
		ok = ok && fine
	}
	optional := func(name string, v *string) {
		b = append(b, name...)
		var fine bool
		b, fine = appendOptionalString(b, v)
		ok = ok && fine
	}
	num := func(name string, v int64) {
		b = append(b, name...)
		b = strconv.AppendInt(b, v, 10)
	}
	flag := func(name string, v bool) {
		b = append(b, name...)
		b = strconv.AppendBool(b, v)
	}
	stamp := func(name string, t Timestamp) {
		b = append(b, name...)
		b = t.appendJSON(b)
	}
	str(`{"session_key":`, e.SessionKey)
	str(`,"session_id":`, e.SessionID)
	stamp(`,"created_at":`, e.CreatedAt)
	stamp(`,"updated_at":`, e.UpdatedAt)
	b = append(b, `,"origin":`...)
	var fine bool
	b, fine = e.Origin.appendJSON(b)
	ok = ok && fine
	optional(`,"display_name":`, e.DisplayName)
	str(`,"platform":`, e.Platform)
	str(`,"chat_type":`, e.ChatType)
	num(`,"input_tokens":`, e.InputTokens)
	num(`,"output_tokens":`, e.OutputTokens)
	num(`,"cache_read_tokens":`, e.CacheReadTokens)
	num(`,"cache_write_tokens":`, e.CacheWriteTokens)
	num(`,"total_tokens":`, e.TotalTokens)
	b = append(b, `,"estimated_cost_usd":`...)
	b, fine = appendJSONFloat(b, e.EstimatedCostUSD)
	ok = ok && fine
	str(`,"cost_status":`, e.CostStatus)
	num(`,"last_prompt_tokens":`, e.LastPromptTokens)
	flag(`,"was_auto_reset":`, e.WasAutoReset)
	optional(`,"auto_reset_reason":`, e.AutoResetReason)
	flag(`,"reset_had_activity":`, e.ResetHadActivity)
	flag(`,"is_fresh_reset":`, e.IsFreshReset)
	flag(`,"expiry_finalized":`, e.ExpiryFinalized)
	flag(`,"suspended":`, e.Suspended)
	flag(`,"resume_pending":`, e.ResumePending)
	optional(`,"resume_reason":`, e.ResumeReason)
	stamp(`,"last_resume_marked_at":`, e.LastResumeMarkedAt)
	b = append(b, `,"version":`...)
	b = strconv.AppendUint(b, e.Version, 10)
	optional(`,"previous_session_id":`, e.PreviousSessionID)
	optional(`,"suspend_reason":`, e.SuspendReason)
	num(`,"active_processes":`, int64(e.ActiveProcesses))
	optional(`,"open_turn_id":`, e.OpenTurnID)
	stamp(`,"turn_started_at":`, e.TurnStartedAt)
	flag(`,"had_activity":`, e.HadActivity)
	// An entry with a session state goes through encoding/json.
	if e.ModelOverride != nil || len(e.Metadata) > 0 {
		return b, false
	}
	if e.Metadata == nil {
		return append(b, `,"model_override":null,"metadata":null}`...), ok
	}
	return append(b, `,"model_override":null,"metadata":{}}`...), ok
}

// appendJSON appends s as json.Marshal writes it (omitempty included), or
// reports false.
func (s Source) appendJSON(b []byte) ([]byte, bool) {
	ok := true
	str := func(name, v string, omitEmpty bool) {
		if omitEmpty && v == "" {
			return
		}
		var fine bool
		b, fine = appendPlainString(append(b, name...), v)
		ok = ok && fine
	}
	str(`{"platform":`, s.Platform, false)
	str(`,"chat_id":`, s.ChatID, false)
	str(`,"chat_name":`, s.ChatName, true)
	str(`,"chat_type":`, s.ChatType, false)
	str(`,"user_id":`, s.UserID, true)
	str(`,"user_name":`, s.UserName, true)
	str(`,"thread_id":`, s.ThreadID, true)
	str(`,"chat_topic":`, s.ChatTopic, true)
	str(`,"user_id_alt":`, s.UserIDAlt, true)
	str(`,"chat_id_alt":`, s.ChatIDAlt, true)
	b = append(b, `,"is_bot":`...)
	b = strconv.AppendBool(b, s.IsBot)
	str(`,"scope_id":`, s.ScopeID, true)
	str(`,"guild_id":`, s.GuildID, true)
	str(`,"parent_chat_id":`, s.ParentChatID, true)
	str(`,"message_id":`, s.MessageID, true)
	b = append(b, `,"role_authorized":`...)
	b = strconv.AppendBool(b, s.RoleAuthorized)
	str(`,"profile":`, s.Profile, true)
	if s.AutoThreadCreated {
		b = append(b, `,"auto_thread_created":true`...)
	}
	str(`,"auto_thread_initial_name":`, s.AutoThreadInitialName, true)
	str(`,"prospective_thread_id":`, s.ProspectiveThreadID, true)
	return append(b, '}'), ok
}

// appendJSON appends t as MarshalJSON writes it.
func (t Timestamp) appendJSON(b []byte) []byte {
	tt := time.Time(t)
	if tt.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = tt.UTC().AppendFormat(b, timeFormat)
	return append(b, '"')
}

// appendOptionalString appends a *string as json.Marshal writes it (null
// for nil), or reports false.
func appendOptionalString(b []byte, s *string) ([]byte, bool) {
	if s == nil {
		return append(b, "null"...), true
	}
	return appendPlainString(b, *s)
}

// appendPlainString appends s as json.Marshal writes it, or reports false
// (b is then garbage) when json would escape any of it.
func appendPlainString(b []byte, s string) ([]byte, bool) {
	if !plainJSONString(s) {
		return b, false
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}

// appendJSONFloat appends f as encoding/json writes a float64, or reports
// false for NaN and the infinities, which json refuses.
func appendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	return sessions.AppendJSONFloat(b, f), true
}

// plainJSONString reports whether json, without HTML escaping, writes every
// byte of s as itself inside a string: printable ASCII other than the
// quote and the backslash.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
