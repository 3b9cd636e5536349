package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"testing"
	"time"
)

var sessionIDPattern = regexp.MustCompile(`^\d{8}_\d{6}_[0-9a-f]{8}$`)

func TestResolve(t *testing.T) {
	h := newHarness(t)
	first := h.resolve(dm("42"))
	if !first.Created || first.ResetReason != nil {
		t.Errorf("resolve(new lane) = created %v, reset_reason %v, want true, null", first.Created, first.ResetReason)
	}
	e := first.Entry
	if e.SessionKey != "agent:main:telegram:dm:42" {
		t.Errorf("session_key = %q, want agent:main:telegram:dm:42", e.SessionKey)
	}
	if !sessionIDPattern.MatchString(e.SessionID) || e.SessionID[:15] != "20260302_100000" {
		t.Errorf("session_id = %q, want 20260302_100000_<8 hex>", e.SessionID)
	}
	if !e.CreatedAt.Equal(start) || !e.UpdatedAt.Equal(start) || e.Version != 1 {
		t.Errorf("entry = created %v, updated %v, version %d, want %v, %v, 1", e.CreatedAt, e.UpdatedAt, e.Version, start, start)
	}
	if e.Origin != dm("42") || e.Platform != "telegram" || e.ChatType != "dm" {
		t.Errorf("origin = %+v, platform %q, chat_type %q, want %+v, telegram, dm", e.Origin, e.Platform, e.ChatType, dm("42"))
	}

	// Times are RFC 3339 in UTC with sub-second precision, and every field
	// of the contract's SessionEntry is present.
	r := h.do("POST", "/v1/sessions/resolve", map[string]any{"source": dm("43")})
	var raw struct {
		Entry map[string]json.RawMessage `json:"entry"`
	}
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	if got := string(raw.Entry["created_at"]); got != `"2026-03-02T10:00:00.000000Z"` {
		t.Errorf("created_at = %s, want \"2026-03-02T10:00:00.000000Z\"", got)
	}
	for _, f := range []string{"session_key", "session_id", "created_at", "updated_at", "origin", "display_name",
		"platform", "chat_type", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
		"total_tokens", "estimated_cost_usd", "cost_status", "last_prompt_tokens", "was_auto_reset",
		"auto_reset_reason", "reset_had_activity", "is_fresh_reset", "expiry_finalized", "suspended",
		"resume_pending", "resume_reason", "last_resume_marked_at", "version"} {
		if _, ok := raw.Entry[f]; !ok {
			t.Errorf("entry has no %q: %s", f, r.body)
		}
	}

	h.clock.Set(start.Add(time.Minute))
	again := h.resolve(dm("42"))
	if again.Created || again.ResetReason != nil || again.Entry.SessionID != e.SessionID || again.Entry.Version != 2 {
		t.Errorf("resolve(existing) = created %v, reset %v, id %s, version %d, want false, null, %s, 2",
			again.Created, again.ResetReason, again.Entry.SessionID, again.Entry.Version, e.SessionID)
	}
	if !again.Entry.UpdatedAt.Equal(start.Add(time.Minute)) {
		t.Errorf("updated_at = %v, want %v", again.Entry.UpdatedAt, start.Add(time.Minute))
	}

	var forced resolved
	h.call("POST", "/v1/sessions/resolve", map[string]any{"source": dm("42"), "force_new": true}, http.StatusOK, &forced)
	if !forced.Created || forced.Entry.SessionID == e.SessionID || forced.Entry.PreviousSessionID == nil || *forced.Entry.PreviousSessionID != e.SessionID {
		t.Errorf("resolve(force_new) = created %v, id %s, previous %v, want true, a new id, %s",
			forced.Created, forced.Entry.SessionID, forced.Entry.PreviousSessionID, e.SessionID)
	}
}

// TestIdleReset drives the idle rule with the manual clock over HTTP.
func TestIdleReset(t *testing.T) {
	h := newHarness(t)
	first := h.resolve(dm("1"))
	var clock struct {
		Now time.Time `json:"now"`
	}
	h.call("POST", "/v1/clock", map[string]string{"advance": "25h"}, http.StatusOK, &clock)
	if want := start.Add(25 * time.Hour); !clock.Now.Equal(want) {
		t.Fatalf("POST /v1/clock {advance: 25h} = now %v, want %v", clock.Now, want)
	}
	next := h.resolve(dm("1"))
	if !next.Created || next.ResetReason == nil || *next.ResetReason != "idle" {
		t.Fatalf("resolve after 25h = created %v, reset_reason %v, want true, idle", next.Created, next.ResetReason)
	}
	e := next.Entry
	if e.SessionID == first.Entry.SessionID || !e.WasAutoReset || e.AutoResetReason == nil || *e.AutoResetReason != "idle" {
		t.Errorf("entry = id %s, was_auto_reset %v, auto_reset_reason %v, want a new id, true, idle", e.SessionID, e.WasAutoReset, e.AutoResetReason)
	}
	if e.SessionID[:15] != "20260303_110000" {
		t.Errorf("session_id = %s, want one minted at the clock's time 20260303_110000", e.SessionID)
	}
}

func TestListSessions(t *testing.T) {
	h := newHarness(t)
	a := h.resolve(dm("a")).Entry
	h.clock.Set(start.Add(time.Hour))
	b := h.resolve(dm("b")).Entry
	h.clock.Set(start.Add(2 * time.Hour))
	c := h.resolve(dm("c")).Entry

	keys := func(es []entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.SessionKey)
		}
		return out
	}
	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{c.SessionKey, b.SessionKey, a.SessionKey}},
		{"?active_minutes=90", []string{c.SessionKey, b.SessionKey}},
		{"?active_minutes=0", []string{c.SessionKey}},
	}
	for _, tc := range tests {
		var got struct {
			Sessions []entry `json:"sessions"`
		}
		h.call("GET", "/v1/sessions"+tc.query, nil, http.StatusOK, &got)
		if !slices.Equal(keys(got.Sessions), tc.want) {
			t.Errorf("GET /v1/sessions%s = %v, want %v", tc.query, keys(got.Sessions), tc.want)
		}
	}

	var byID entry
	h.call("GET", "/v1/sessions?session_id="+b.SessionID, nil, http.StatusOK, &byID)
	if byID.SessionKey != b.SessionKey {
		t.Errorf("GET /v1/sessions?session_id=%s = %s, want %s", b.SessionID, byID.SessionKey, b.SessionKey)
	}
	h.call("GET", "/v1/sessions?session_id=20990101_000000_00000000", nil, http.StatusNotFound, nil)

	var got entry
	h.call("GET", lane(a.SessionKey, ""), nil, http.StatusOK, &got)
	if got.SessionID != a.SessionID || got.Version != 1 {
		t.Errorf("GET %s = %s v%d, want %s v1", lane(a.SessionKey, ""), got.SessionID, got.Version, a.SessionID)
	}
}

func TestTouchAndTurns(t *testing.T) {
	h := newHarness(t)
	key := h.resolve(dm("1")).Entry.SessionKey

	h.clock.Set(start.Add(5 * time.Minute))
	var touched entry
	h.call("POST", lane(key, "/touch"), map[string]int{"last_prompt_tokens": 500}, http.StatusOK, &touched)
	if touched.LastPromptTokens != 500 || touched.Version != 2 || !touched.UpdatedAt.Equal(start.Add(5*time.Minute)) {
		t.Errorf("touch = last_prompt_tokens %d, version %d, updated %v, want 500, 2, %v", touched.LastPromptTokens, touched.Version, touched.UpdatedAt, start.Add(5*time.Minute))
	}
	h.call("POST", lane(key, "/touch"), nil, http.StatusOK, &touched)
	if touched.LastPromptTokens != 500 || touched.Version != 3 {
		t.Errorf("touch without body = last_prompt_tokens %d, version %d, want 500, 3", touched.LastPromptTokens, touched.Version)
	}

	var mark struct {
		Marked bool  `json:"marked"`
		Entry  entry `json:"entry"`
	}
	h.call("POST", lane(key, "/resume-pending"), map[string]string{"reason": "restart_timeout"}, http.StatusOK, &mark)

	var started struct {
		TurnID string `json:"turn_id"`
		Entry  entry  `json:"entry"`
	}
	h.call("POST", lane(key, "/turns/start"), map[string]any{}, http.StatusOK, &started)
	if started.TurnID == "" || started.Entry.OpenTurnID == nil || *started.Entry.OpenTurnID != started.TurnID {
		t.Fatalf("turns/start = turn %q, open_turn_id %v, want a turn id that is open", started.TurnID, started.Entry.OpenTurnID)
	}
	var done entry
	h.call("POST", lane(key, "/turns"), map[string]any{
		"turn_id": started.TurnID, "input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 5,
		"cache_write_tokens": 1, "estimated_cost_usd": 0.25, "cost_status": "estimated", "last_prompt_tokens": 120,
	}, http.StatusOK, &done)
	if done.InputTokens != 100 || done.OutputTokens != 20 || done.CacheReadTokens != 5 || done.CacheWriteTokens != 1 ||
		done.EstimatedCostUSD != 0.25 || done.LastPromptTokens != 120 {
		t.Errorf("turns = %+v, want the deltas added", done)
	}
	if done.OpenTurnID != nil || done.ResumePending {
		t.Errorf("turns = open_turn_id %v, resume_pending %v, want null, false (a successful turn clears it)", done.OpenTurnID, done.ResumePending)
	}

	// Draining refuses new turns with 503 and changes nothing.
	h.server.SetDraining(true)
	before := h.head()
	r := h.do("POST", lane(key, "/turns/start"), map[string]any{})
	if code, err := errorBody(r); r.status != http.StatusServiceUnavailable || code != "unavailable" || err != nil {
		t.Errorf("turns/start while draining = %d %q (%v), want 503 unavailable", r.status, code, err)
	}
	if after := h.head(); after != before {
		t.Errorf("head after a refused turn = %d, want %d", after, before)
	}
	h.server.SetDraining(false)
	h.call("POST", lane(key, "/turns/start"), nil, http.StatusOK, nil)
}

func TestResetSwitchSuspend(t *testing.T) {
	h := newHarness(t)
	first := h.resolve(dm("1")).Entry
	key := first.SessionKey

	var reset entry
	h.call("POST", lane(key, "/reset"), map[string]string{"display_name": "Fresh"}, http.StatusOK, &reset)
	if reset.SessionID == first.SessionID || reset.DisplayName == nil || *reset.DisplayName != "Fresh" {
		t.Errorf("reset = id %s, display_name %v, want a new id, Fresh", reset.SessionID, reset.DisplayName)
	}

	var switched entry
	h.call("POST", lane(key, "/switch"), map[string]string{"session_id": first.SessionID}, http.StatusOK, &switched)
	if switched.SessionID != first.SessionID {
		t.Errorf("switch = %s, want %s", switched.SessionID, first.SessionID)
	}

	var suspended entry
	h.call("POST", lane(key, "/suspend"), nil, http.StatusOK, &suspended)
	if !suspended.Suspended {
		t.Errorf("suspend = suspended %v, want true", suspended.Suspended)
	}
	var mark struct {
		Marked bool  `json:"marked"`
		Entry  entry `json:"entry"`
	}
	h.call("POST", lane(key, "/resume-pending"), map[string]string{"reason": "shutdown_timeout"}, http.StatusOK, &mark)
	if mark.Marked || mark.Entry.ResumePending {
		t.Errorf("resume-pending on a suspended lane = marked %v, want false", mark.Marked)
	}

	next := h.resolve(dm("1"))
	if !next.Created || next.ResetReason == nil || *next.ResetReason != "suspended" {
		t.Errorf("resolve after suspend = created %v, reset_reason %v, want true, suspended", next.Created, next.ResetReason)
	}
}

func TestResumePending(t *testing.T) {
	h := newHarness(t)
	key := h.resolve(dm("1")).Entry.SessionKey
	other := h.resolve(dm("2")).Entry.SessionKey

	var mark struct {
		Marked bool  `json:"marked"`
		Entry  entry `json:"entry"`
	}
	h.call("POST", lane(key, "/resume-pending"), map[string]string{"reason": "shutdown_timeout"}, http.StatusOK, &mark)
	if !mark.Marked || !mark.Entry.ResumePending || mark.Entry.ResumeReason == nil || *mark.Entry.ResumeReason != "shutdown_timeout" {
		t.Errorf("resume-pending = marked %v, entry %+v, want true, shutdown_timeout", mark.Marked, mark.Entry)
	}
	h.call("POST", lane(other, "/resume-pending"), nil, http.StatusOK, &mark)
	if !mark.Marked || mark.Entry.ResumeReason == nil || *mark.Entry.ResumeReason != "restart_timeout" {
		t.Errorf("resume-pending without body = marked %v, reason %v, want true, restart_timeout", mark.Marked, mark.Entry.ResumeReason)
	}
	third := h.resolve(dm("3")).Entry.SessionKey
	h.call("POST", lane(third, "/resume-pending"), map[string]any{}, http.StatusOK, &mark)
	if !mark.Marked || mark.Entry.ResumeReason == nil || *mark.Entry.ResumeReason != "restart_timeout" {
		t.Errorf("resume-pending {} = marked %v, reason %v, want true, restart_timeout", mark.Marked, mark.Entry.ResumeReason)
	}
	h.call("DELETE", lane(third, "/resume-pending"), nil, http.StatusOK, nil)

	resumable := func() []string {
		var got struct {
			Sessions []entry `json:"sessions"`
		}
		h.call("GET", "/v1/recovery/resumable", nil, http.StatusOK, &got)
		var keys []string
		for _, e := range got.Sessions {
			keys = append(keys, e.SessionKey)
		}
		slices.Sort(keys)
		return keys
	}
	if got, want := resumable(), []string{key, other}; !slices.Equal(got, want) {
		t.Errorf("GET /v1/recovery/resumable = %v, want %v", got, want)
	}

	var clear struct {
		Cleared bool  `json:"cleared"`
		Entry   entry `json:"entry"`
	}
	h.call("DELETE", lane(key, "/resume-pending"), nil, http.StatusOK, &clear)
	if !clear.Cleared || clear.Entry.ResumePending {
		t.Errorf("DELETE resume-pending = cleared %v, pending %v, want true, false", clear.Cleared, clear.Entry.ResumePending)
	}
	h.call("DELETE", lane(key, "/resume-pending"), nil, http.StatusOK, &clear)
	if clear.Cleared {
		t.Errorf("DELETE resume-pending again = cleared %v, want false", clear.Cleared)
	}
	if got, want := resumable(), []string{other}; !slices.Equal(got, want) {
		t.Errorf("GET /v1/recovery/resumable after clear = %v, want %v", got, want)
	}
	// Past the freshness window (an hour here) the mark is no longer
	// auto-continued.
	h.clock.Set(start.Add(2 * time.Hour))
	if got := resumable(); len(got) != 0 {
		t.Errorf("GET /v1/recovery/resumable after 2h = %v, want none", got)
	}
}

func TestActiveProcessesBlockResetAndPrune(t *testing.T) {
	h := newHarness(t)
	busy := h.resolve(dm("busy")).Entry
	idle := h.resolve(dm("idle")).Entry

	var got entry
	h.call("PUT", lane(busy.SessionKey, "/active-processes"), map[string]int{"count": 2}, http.StatusOK, &got)
	if got.ActiveProcesses != 2 {
		t.Errorf("active-processes = %d, want 2", got.ActiveProcesses)
	}

	h.call("POST", "/v1/clock", map[string]string{"advance": "72h"}, http.StatusOK, nil)
	var pruned struct {
		Pruned []string `json:"pruned"`
	}
	// As in Hermes, max_age_days <= 0 disables pruning.
	for _, days := range []int{0, -1} {
		h.call("POST", "/v1/maintenance/prune-entries", map[string]int{"max_age_days": days}, http.StatusOK, &pruned)
		if pruned.Pruned == nil || len(pruned.Pruned) != 0 {
			t.Errorf("prune-entries max_age_days=%d = %v, want []", days, pruned.Pruned)
		}
	}
	h.call("GET", lane(idle.SessionKey, ""), nil, http.StatusOK, nil)
	h.call("POST", "/v1/maintenance/prune-entries", map[string]int{"max_age_days": 1}, http.StatusOK, &pruned)
	if !slices.Equal(pruned.Pruned, []string{idle.SessionKey}) {
		t.Errorf("prune-entries = %v, want [%s]", pruned.Pruned, idle.SessionKey)
	}
	h.call("GET", lane(idle.SessionKey, ""), nil, http.StatusNotFound, nil)
	h.call("POST", "/v1/maintenance/prune-entries", map[string]int{"max_age_days": 1}, http.StatusOK, &pruned)
	if len(pruned.Pruned) != 0 {
		t.Errorf("prune-entries again = %v, want []", pruned.Pruned)
	}

	again := h.resolve(dm("busy"))
	if again.Created || again.Entry.SessionID != busy.SessionID {
		t.Errorf("resolve of a lane with live processes after 72h = created %v, id %s, want false, %s", again.Created, again.Entry.SessionID, busy.SessionID)
	}
}

func TestSuspendRecentlyActive(t *testing.T) {
	h := newHarness(t)
	old := h.resolve(dm("old")).Entry.SessionKey
	h.clock.Set(start.Add(10 * time.Minute))
	recent := h.resolve(dm("recent")).Entry.SessionKey
	h.clock.Set(start.Add(11 * time.Minute))

	var got struct {
		Marked []string `json:"marked"`
	}
	h.call("POST", "/v1/recovery/suspend-recently-active", map[string]int{"max_age_seconds": 120}, http.StatusOK, &got)
	if !slices.Equal(got.Marked, []string{recent}) {
		t.Errorf("suspend-recently-active = %v, want [%s]", got.Marked, recent)
	}
	var e entry
	h.call("GET", lane(recent, ""), nil, http.StatusOK, &e)
	if !e.ResumePending || e.ResumeReason == nil || *e.ResumeReason != "restart_interrupted" {
		t.Errorf("GET %s = pending %v, reason %v, want true, restart_interrupted", recent, e.ResumePending, e.ResumeReason)
	}
	h.call("GET", lane(old, ""), nil, http.StatusOK, &e)
	if e.ResumePending {
		t.Errorf("GET %s = pending, want not", old)
	}
	// The default window is 120 s and an empty body is allowed.
	h.call("POST", "/v1/recovery/suspend-recently-active", nil, http.StatusOK, &got)
	if len(got.Marked) != 0 {
		t.Errorf("suspend-recently-active again = %v, want [] (never marked twice)", got.Marked)
	}
}

// TestReadYourWrites: a query made right after a command returned sees it.
func TestReadYourWrites(t *testing.T) {
	h := newHarness(t)
	for i := range 20 {
		res := h.resolve(dm("ryw"))
		var got entry
		h.call("GET", lane(res.Entry.SessionKey, ""), nil, http.StatusOK, &got)
		if got.Version != res.Entry.Version {
			t.Fatalf("round %d: GET after resolve = version %d, want %d", i, got.Version, res.Entry.Version)
		}
		var touched entry
		h.call("POST", lane(res.Entry.SessionKey, "/touch"), map[string]int{"last_prompt_tokens": i}, http.StatusOK, &touched)
		var list struct {
			Sessions []entry `json:"sessions"`
		}
		h.call("GET", "/v1/sessions", nil, http.StatusOK, &list)
		if len(list.Sessions) != 1 || list.Sessions[0].Version != touched.Version || list.Sessions[0].LastPromptTokens != int64(i) {
			t.Fatalf("round %d: GET /v1/sessions after touch = %+v, want version %d", i, list.Sessions, touched.Version)
		}
		var msg struct {
			ID int64 `json:"id"`
		}
		h.call("POST", transcript(res.Entry.SessionID, "/messages"), map[string]string{"role": "user", "content": "hello"}, http.StatusOK, &msg)
		var msgs struct {
			Messages []struct {
				ID int64 `json:"id"`
			} `json:"messages"`
		}
		h.call("GET", transcript(res.Entry.SessionID, "/messages"), nil, http.StatusOK, &msgs)
		if n := len(msgs.Messages); n != i+1 || msgs.Messages[n-1].ID != msg.ID {
			t.Fatalf("round %d: GET messages after append = %+v, want %d messages ending with %d", i, msgs.Messages, i+1, msg.ID)
		}
	}
}

// TestIdempotency: a request retried with the same Idempotency-Key is
// applied once.
func TestIdempotency(t *testing.T) {
	h := newHarness(t)
	send := func(t *testing.T, method, path string, body any, key string) response {
		t.Helper()
		r := h.with(t).send(request{method: method, path: path, body: body, header: map[string]string{"Idempotency-Key": key}})
		if r.status != http.StatusOK {
			t.Fatalf("%s %s = %d %s, want 200", method, path, r.status, r.body)
		}
		return r
	}
	var first, second resolved
	before := h.head()
	json.Unmarshal(send(t, "POST", "/v1/sessions/resolve", map[string]any{"source": dm("1")}, "resolve-1").body, &first)
	afterFirst := h.head()
	json.Unmarshal(send(t, "POST", "/v1/sessions/resolve", map[string]any{"source": dm("1")}, "resolve-1").body, &second)
	if after := h.head(); afterFirst != before+1 || after != afterFirst {
		t.Errorf("head = %d, %d, %d after resolve twice with one key, want %d, %d, %d", before, afterFirst, after, before, before+1, before+1)
	}
	if !second.Created || second.Entry.SessionID != first.Entry.SessionID || second.Entry.Version != 1 {
		t.Errorf("retried resolve = created %v, id %s, version %d, want true, %s, 1", second.Created, second.Entry.SessionID, second.Entry.Version, first.Entry.SessionID)
	}

	key := first.Entry.SessionKey
	tests := []struct {
		name   string
		method string
		path   string
		body   any
	}{
		{"touch", "POST", lane(key, "/touch"), map[string]int{"last_prompt_tokens": 7}},
		{"turns", "POST", lane(key, "/turns"), map[string]int{"input_tokens": 10}},
		{"message", "POST", transcript(first.Entry.SessionID, "/messages"), map[string]string{"role": "user", "content": "once"}},
		{"reset", "POST", lane(key, "/reset"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := h.with(t)
			before := h.head()
			a := send(t, tc.method, tc.path, tc.body, "idem-"+tc.name)
			mid := h.head()
			b := send(t, tc.method, tc.path, tc.body, "idem-"+tc.name)
			if after := h.head(); mid == before || after != mid {
				t.Errorf("head = %d, %d, %d over two %s with one key, want one append", before, mid, after, tc.name)
			}
			// The retry answers what the first call did.
			if string(a.body) != string(b.body) {
				t.Errorf("retried %s = %s, want %s", tc.name, b.body, a.body)
			}
		})
	}
}

// TestKeysDecodedOnce: a key escaped with url.PathEscape round-trips,
// whatever it contains. (Keys are not escaped when built: a chat id with
// "%" makes a key with "%".) The server used to decode a path parameter
// twice whenever the rest of the path kept no escape, which refused
// "100%" and read "a%41" as "aA".
func TestKeysDecodedOnce(t *testing.T) {
	h := newHarness(t)
	for _, chat := range []string{"100%", "a%41", "50%25", "a/b", "a b?c#d", "ü:é"} {
		key := h.resolve(dm(chat)).Entry.SessionKey
		if want := "agent:main:telegram:dm:" + chat; key != want {
			t.Fatalf("resolve(chat %q) = key %q, want %q", chat, key, want)
		}
		var got entry
		h.call("GET", lane(key, ""), nil, http.StatusOK, &got)
		if got.SessionKey != key {
			t.Errorf("GET %s = key %q, want %q", lane(key, ""), got.SessionKey, key)
		}
		h.call("POST", lane(key, "/touch"), nil, http.StatusOK, &got)
		if got.SessionKey != key || got.Version != 2 {
			t.Errorf("POST %s = key %q v%d, want %q v2", lane(key, "/touch"), got.SessionKey, got.Version, key)
		}
	}
}
