package api

import (
	"bytes"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// oracleResolved is the answer writeJSON (encoding/json) gives for v.
func oracleResolved(v resolveResponse) (int, http.Header, []byte) {
	rec := httptest.NewRecorder()
	writeJSON(rec, http.StatusOK, v)
	return rec.Code, rec.Header(), rec.Body.Bytes()
}

// handResolved is the answer respondResolved gives for v.
func handResolved(t testing.TB, v resolveResponse) (int, http.Header, []byte) {
	rec := httptest.NewRecorder()
	if err := respondResolved(rec, v); err != nil {
		t.Fatalf("respondResolved: %v", err)
	}
	return rec.Code, rec.Header(), rec.Body.Bytes()
}

// fullEntry is an Entry with every field set to something other than its
// zero value.
func fullEntry() Entry {
	at := time.Date(2026, 11, 24, 14, 5, 6, 123456789, time.FixedZone("CET", 3600))
	s := func(v string) *string { return &v }
	return Entry{
		SessionKey: "agent:main:telegram:group:-100123:42", SessionID: "20261124_140506_abcdef12",
		CreatedAt: Timestamp(at), UpdatedAt: Timestamp(at.Add(time.Minute)),
		Origin: Source{Platform: "telegram", ChatID: "-100123", ChatName: "team <a&b>", ChatType: "group",
			UserID: "u1", UserName: "Ann", ThreadID: "42", ChatTopic: "topic", UserIDAlt: "alt", ChatIDAlt: "calt",
			IsBot: true, ScopeID: "g", GuildID: "g", ParentChatID: "p", MessageID: "m", RoleAuthorized: true,
			Profile: "coder", AutoThreadCreated: true, AutoThreadInitialName: "first <words>", ProspectiveThreadID: "t5"},
		DisplayName: s("Team chat"), Platform: "telegram", ChatType: "group",
		InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, TotalTokens: math.MaxInt64,
		EstimatedCostUSD: 0.125, CostStatus: "estimated", LastPromptTokens: -5, WasAutoReset: true,
		AutoResetReason: s("idle"), ResetHadActivity: true, IsFreshReset: true, ExpiryFinalized: true,
		Suspended: true, ResumePending: true, ResumeReason: s("restart"),
		LastResumeMarkedAt: Timestamp(at.Add(time.Hour)), Version: math.MaxUint64,
		PreviousSessionID: s("20261123_000000_00000000"), SuspendReason: s("stop_command"), ActiveProcesses: 3,
		OpenTurnID: s("turn-1"), TurnStartedAt: Timestamp(at.Add(2 * time.Hour)), HadActivity: true,
	}
}

// TestRespondResolvedMatchesEncodingJSON: the hand-written answer of a
// resolve is byte for byte, status and Content-Type included, what
// writeJSON gives; a value whose text or cost it cannot write as it is
// goes through writeJSON.
func TestRespondResolvedMatchesEncodingJSON(t *testing.T) {
	reason := "idle"
	tests := []struct {
		name string
		edit func(v *resolveResponse)
		// hand: the value is written without encoding/json.
		hand bool
	}{
		{name: "every field set", edit: func(*resolveResponse) {}, hand: true},
		{name: "zero entry", edit: func(v *resolveResponse) { *v = resolveResponse{} }, hand: true},
		{name: "created with a reset reason", edit: func(v *resolveResponse) { v.Created, v.ResetReason = true, &reason }, hand: true},
		{name: "zero times are null", edit: func(v *resolveResponse) {
			v.Entry.CreatedAt, v.Entry.LastResumeMarkedAt, v.Entry.TurnStartedAt = Timestamp{}, Timestamp{}, Timestamp{}
		}, hand: true},
		{name: "empty optional strings of the origin are left out", edit: func(v *resolveResponse) {
			v.Entry.Origin = Source{Platform: "telegram", ChatType: "dm"}
		}, hand: true},
		{name: "tiny cost in exponent form", edit: func(v *resolveResponse) { v.Entry.EstimatedCostUSD = 1e-7 }, hand: true},
		{name: "huge cost in exponent form", edit: func(v *resolveResponse) { v.Entry.EstimatedCostUSD = 1.5e21 }, hand: true},
		{name: "negative zero cost", edit: func(v *resolveResponse) { v.Entry.EstimatedCostUSD = math.Copysign(0, -1) }, hand: true},
		{name: "quote in a key", edit: func(v *resolveResponse) { v.Entry.SessionKey = `a"b` }},
		{name: "backslash in an origin field", edit: func(v *resolveResponse) { v.Entry.Origin.UserName = `a\b` }},
		{name: "control character in a reason", edit: func(v *resolveResponse) { r := "a\nb"; v.ResetReason = &r }},
		{name: "non-ASCII display name", edit: func(v *resolveResponse) { d := "équipe 团队"; v.Entry.DisplayName = &d }},
		{name: "line separator", edit: func(v *resolveResponse) { v.Entry.Origin.ChatName = "a\u2028b" }},
		{name: "invalid UTF-8", edit: func(v *resolveResponse) { v.Entry.CostStatus = "a\xffb" }},
		{name: "DEL", edit: func(v *resolveResponse) { v.Entry.SessionID = "a\x7fb" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := resolveResponse{Entry: fullEntry()}
			tc.edit(&v)
			wantCode, wantHeader, want := oracleResolved(v)
			code, header, got := handResolved(t, v)
			if code != wantCode || header.Get("Content-Type") != wantHeader.Get("Content-Type") || !bytes.Equal(got, want) {
				t.Fatalf("respondResolved = %d %q\n%s\nwant %d %q\n%s", code, header.Get("Content-Type"), got,
					wantCode, wantHeader.Get("Content-Type"), want)
			}
			if _, hand := v.appendJSON(nil); hand != tc.hand {
				t.Fatalf("written by hand = %v, want %v", hand, tc.hand)
			}
		})
	}
}

// TestRespondResolvedNonFiniteCost: a cost json cannot write fails as
// writeJSON fails (a 200 with an empty body), not with other bytes.
func TestRespondResolvedNonFiniteCost(t *testing.T) {
	for _, cost := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		v := resolveResponse{Entry: fullEntry()}
		v.Entry.EstimatedCostUSD = cost
		wantCode, _, want := oracleResolved(v)
		code, _, got := handResolved(t, v)
		if code != wantCode || !bytes.Equal(got, want) {
			t.Fatalf("cost %v: respondResolved = %d %q, want %d %q", cost, code, got, wantCode, want)
		}
	}
}

// FuzzRespondResolved: for any text in the strings and any cost, the
// answer is writeJSON's.
func FuzzRespondResolved(f *testing.F) {
	f.Add("agent:main:telegram:dm:1", "20261124_140506_abcdef12", "Ann", "idle", 0.25, int64(1795523363842037724), true)
	f.Add(`a"b\c`, "\x00\x1f", "<&>", "\u2028\u2029", 1e-7, int64(-1), false)
	f.Add("é", "\xff", "\x7f", "", math.Inf(1), int64(0), true)
	f.Fuzz(func(t *testing.T, key, id, name, reason string, cost float64, nanos int64, flag bool) {
		v := resolveResponse{Entry: fullEntry(), Created: flag}
		v.Entry.SessionKey, v.Entry.SessionID, v.Entry.Origin.UserName = key, id, name
		v.Entry.EstimatedCostUSD = cost
		v.Entry.UpdatedAt = Timestamp(time.Unix(0, nanos))
		if reason != "" {
			v.ResetReason = &reason
			v.Entry.DisplayName = &reason
		}
		wantCode, _, want := oracleResolved(v)
		code, _, got := handResolved(t, v)
		if code != wantCode || !bytes.Equal(got, want) {
			t.Fatalf("respondResolved = %d\n%s\nwant %d\n%s", code, got, wantCode, want)
		}
	})
}
