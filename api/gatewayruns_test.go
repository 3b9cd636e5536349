package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// laneTypes lists the types and the reasons of a lane's events, in order.
func (h *harness) laneEvents(key string) []laneEvent {
	h.t.Helper()
	var out struct {
		Events []struct {
			Type  string          `json:"type"`
			Event json.RawMessage `json:"data"`
		} `json:"events"`
	}
	h.call("GET", lane(key, "/events?limit=1000"), nil, http.StatusOK, &out)
	var evs []laneEvent
	for _, e := range out.Events {
		var fields struct {
			Reason string `json:"reason"`
			Cause  string `json:"cause"`
		}
		_ = json.Unmarshal(e.Event, &fields)
		evs = append(evs, laneEvent{typ: e.Type, reason: fields.Reason + fields.Cause})
	}
	return evs
}

type laneEvent struct{ typ, reason string }

func (h *harness) countEvents(key, typ, reason string) int {
	h.t.Helper()
	n := 0
	for _, e := range h.laneEvents(key) {
		if e.typ == typ && (reason == "" || e.reason == reason) {
			n++
		}
	}
	return n
}

type runAnswer struct {
	Run struct {
		RunID      string    `json:"run_id"`
		State      string    `json:"state"`
		Clean      *bool     `json:"clean"`
		Cause      *string   `json:"cause"`
		PID        int       `json:"pid"`
		LeaseUntil time.Time `json:"lease_until"`
		Cut        []string  `json:"cut"`
	} `json:"run"`
	Previous *struct {
		RunID string  `json:"run_id"`
		State string  `json:"state"`
		Cause *string `json:"cause"`
	} `json:"previous"`
	Interrupted []string `json:"interrupted"`
	Suspended   []string `json:"suspended"`
}

func (h *harness) startRun(runID string, want int) runAnswer {
	h.t.Helper()
	var out runAnswer
	h.call("POST", "/v1/gateway-runs", map[string]any{"gateway": "default", "run_id": runID, "pid": 4242, "host": "gw", "lease_seconds": 60}, want, &out)
	return out
}

func (h *harness) runTurn(key, runID, turnID string) {
	h.t.Helper()
	h.call("POST", lane(key, "/turns/start"), map[string]any{"turn_id": turnID, "gateway_run": map[string]string{"gateway": "default", "run_id": runID}}, http.StatusOK, nil)
}

// TestGatewayRuns_OverHTTP: a run's start, its idempotent repeat, a turn of
// the run, a new start while it is open (the old run lost, its turn
// recovered with resume pending), a stop cutting the run's open turn, and
// the refusals of an ended run.
func TestGatewayRuns_OverHTTP(t *testing.T) {
	h := newHarness(t)
	key := h.resolve(dm("100")).Entry.SessionKey

	first := h.startRun("r1", http.StatusCreated)
	if first.Run.State != "running" || first.Run.PID != 4242 || !first.Run.LeaseUntil.Equal(start.Add(time.Minute)) || first.Previous != nil {
		t.Fatalf("first start = %+v, want r1 running with a 60 s lease and no previous run", first)
	}
	if again := h.startRun("r1", http.StatusOK); again.Run.RunID != "r1" || len(again.Interrupted) != 0 {
		t.Errorf("a repeated announcement = %+v, want r1 as it was", again)
	}
	h.runTurn(key, "r1", "t1")

	second := h.startRun("r2", http.StatusCreated)
	if second.Previous == nil || second.Previous.State != "lost" || *second.Previous.Cause != "restarted" || !slices.Equal(second.Interrupted, []string{key}) {
		t.Fatalf("a start while r1 was open = %+v, want r1 lost (restarted) and the lane's turn cut", second)
	}
	var e entry
	h.call("GET", lane(key, ""), nil, http.StatusOK, &e)
	if e.OpenTurnID != nil || !e.ResumePending || *e.ResumeReason != "restart_interrupted" {
		t.Errorf("the lane after the crash: open turn %v, pending %v %v; want closed, resume pending restart_interrupted", e.OpenTurnID, e.ResumePending, e.ResumeReason)
	}
	if r := h.do("POST", "/v1/gateway-runs/default/r1/heartbeat", nil); r.status != http.StatusConflict {
		t.Errorf("heartbeat of the lost run = %d %s, want 409", r.status, r.body)
	}
	if r := h.do("POST", lane(key, "/turns/start"), map[string]any{"gateway_run": map[string]string{"gateway": "default", "run_id": "r1"}}); r.status != http.StatusConflict {
		t.Errorf("a turn of the lost run = %d %s, want 409", r.status, r.body)
	}
	if r := h.do("POST", "/v1/gateway-runs", map[string]any{"run_id": "r1"}); r.status != http.StatusConflict {
		t.Errorf("announcing the ended r1 again = %d %s, want 409", r.status, r.body)
	}

	h.runTurn(key, "r2", "t2")
	h.clock.Set(start.Add(30 * time.Second))
	var beat runAnswer
	h.call("POST", "/v1/gateway-runs/default/r2/heartbeat", nil, http.StatusOK, &beat)
	if !beat.Run.LeaseUntil.Equal(start.Add(90 * time.Second)) {
		t.Errorf("lease after a heartbeat at +30 s = %v, want +90 s", beat.Run.LeaseUntil)
	}
	var stopped runAnswer
	h.call("POST", "/v1/gateway-runs/default/r2/stop", map[string]any{"restart": true}, http.StatusOK, &stopped)
	if stopped.Run.State != "stopped" || *stopped.Run.Clean || !slices.Equal(stopped.Interrupted, []string{key}) {
		t.Errorf("a stop with a turn open = %+v, want stopped, not clean, the lane cut", stopped)
	}
	if n := h.countEvents(key, "lane.turn_interrupted.v1", "restart_timeout"); n != 1 {
		t.Errorf("turn_interrupted restart_timeout events = %d, want 1", n)
	}
	if r := h.do("POST", "/v1/gateway-runs/default/nope/heartbeat", nil); r.status != http.StatusNotFound {
		t.Errorf("heartbeat of an unknown run = %d, want 404", r.status)
	}
	if r := h.do("POST", "/v1/gateway-runs", map[string]any{"run_id": "a/b"}); r.status != http.StatusBadRequest {
		t.Errorf("a run id with a slash = %d, want 400", r.status)
	}
	var list struct {
		Runs []struct {
			RunID string `json:"run_id"`
			State string `json:"state"`
		} `json:"runs"`
	}
	h.call("GET", "/v1/gateway-runs?gateway=default", nil, http.StatusOK, &list)
	if len(list.Runs) != 2 || list.Runs[0].RunID != "r2" || list.Runs[1].State != "lost" {
		t.Errorf("GET /v1/gateway-runs = %+v, want r2 (stopped) then r1 (lost)", list.Runs)
	}
}

// TestGatewayRuns_ThreeCrashesSuspendAtTheNextStart: a lane whose turn was
// cut by three consecutive crashes of the gateway is suspended (stuck_loop)
// when the gateway starts again; Hermes' own start-up suspension asked then
// finds it suspended and adds nothing; asked for a lane hermes does not
// count as stuck, it is refused.
func TestGatewayRuns_ThreeCrashesSuspendAtTheNextStart(t *testing.T) {
	h := newHarness(t)
	key := h.resolve(dm("101")).Entry.SessionKey
	other := h.resolve(dm("102")).Entry.SessionKey
	for i, run := range []string{"r1", "r2", "r3"} {
		out := h.startRun(run, http.StatusCreated)
		if len(out.Suspended) != 0 {
			t.Fatalf("start %d suspended %v early", i+1, out.Suspended)
		}
		h.runTurn(key, run, "t"+run)
	}
	out := h.startRun("r4", http.StatusCreated)
	if !slices.Equal(out.Suspended, []string{key}) {
		t.Fatalf("the fourth start suspended %v, want %s (cut by three crashes)", out.Suspended, key)
	}
	var e entry
	h.call("POST", lane(key, "/suspend"), map[string]string{"reason": "stuck_loop"}, http.StatusOK, &e)
	if !e.Suspended || h.countEvents(key, "lane.suspended.v2", "stuck_loop") != 1 {
		t.Errorf("the gateway's own stuck-loop suspension doubled hermes': %d suspensions", h.countEvents(key, "lane.suspended.v2", ""))
	}
	if r := h.do("POST", lane(other, "/suspend"), map[string]string{"reason": "stuck_loop"}); r.status != http.StatusConflict {
		t.Errorf("a stuck-loop suspension of a lane hermes does not count = %d %s, want 409", r.status, r.body)
	}
	if r := h.do("POST", lane(other, "/suspend"), map[string]string{"reason": "bored"}); r.status != http.StatusBadRequest {
		t.Errorf("an unknown suspend reason = %d, want 400", r.status)
	}
}

// TestTurnStart_BusyLaneRefused: a second turns/start on a lane whose turn
// is open is refused with 409 busy and changes nothing; the open turn's
// own id is an idempotent start; once it completed a new turn starts.
func TestTurnStart_BusyLaneRefused(t *testing.T) {
	h := newHarness(t)
	key := h.resolve(dm("103")).Entry.SessionKey
	h.call("POST", lane(key, "/turns/start"), map[string]string{"turn_id": "a"}, http.StatusOK, nil)
	before := h.head()
	r := h.do("POST", lane(key, "/turns/start"), map[string]string{"turn_id": "b"})
	if code, _ := errorBody(r); r.status != http.StatusConflict || code != "busy" {
		t.Errorf("turns/start b over open a = %d %s, want 409 busy", r.status, r.body)
	}
	h.call("POST", lane(key, "/turns/start"), map[string]string{"turn_id": "a"}, http.StatusOK, nil)
	if after := h.head(); after != before {
		t.Errorf("the refused and the repeated start moved the head %d -> %d", before, after)
	}
	var e entry
	h.call("GET", lane(key, ""), nil, http.StatusOK, &e)
	if e.OpenTurnID == nil || *e.OpenTurnID != "a" {
		t.Errorf("after the refused start: open %v, want a", e.OpenTurnID)
	}
	h.call("POST", lane(key, "/turns"), map[string]any{"turn_id": "a"}, http.StatusOK, nil)
	h.call("POST", lane(key, "/turns/start"), map[string]string{"turn_id": "b"}, http.StatusOK, nil)
}

// TestFencedWrites_OverHTTP: a completion and a message naming a turn that
// is not the lane's open turn are refused with 409 turn_not_open and
// append nothing; the open turn's own pass.
func TestFencedWrites_OverHTTP(t *testing.T) {
	h := newHarness(t)
	res := h.resolve(dm("104"))
	key, sid := res.Entry.SessionKey, res.Entry.SessionID
	h.call("POST", lane(key, "/turns/start"), map[string]string{"turn_id": "a"}, http.StatusOK, nil)
	h.call("POST", transcript(sid, "/messages"), map[string]any{"role": "assistant", "content": "part 1", "turn_id": "a"}, http.StatusOK, nil)
	h.call("POST", lane(key, "/turns"), map[string]any{"turn_id": "a", "output_tokens": 2}, http.StatusOK, nil)
	before := h.head()
	for _, w := range []struct {
		name, path string
		body       map[string]any
	}{
		{"message of the ended turn", transcript(sid, "/messages"), map[string]any{"role": "assistant", "content": "part 2", "turn_id": "a"}},
		{"second completion", lane(key, "/turns"), map[string]any{"turn_id": "a", "output_tokens": 2}},
		{"message of a turn never started", transcript(sid, "/messages"), map[string]any{"role": "assistant", "content": "x", "turn_id": "zz"}},
	} {
		r := h.do("POST", w.path, w.body)
		if code, _ := errorBody(r); r.status != http.StatusConflict || code != "turn_not_open" {
			t.Errorf("%s = %d %s, want 409 turn_not_open", w.name, r.status, r.body)
		}
	}
	if after := h.head(); after != before {
		t.Errorf("the refused writes moved the head %d -> %d", before, after)
	}
	if r := h.do("POST", transcript(sid, "/messages"), map[string]any{"role": "assistant", "content": "x", "turn_id": strings.Repeat("t", 201)}); r.status != http.StatusBadRequest {
		t.Errorf("a turn_id of 201 bytes = %d, want 400", r.status)
	}
}

// TestEntryChanges_OverHTTP: a compression split to a child session, the
// fresh-reset flag consumed once, and the gateway's expiry finalization.
func TestEntryChanges_OverHTTP(t *testing.T) {
	h := newHarness(t)
	res := h.resolve(dm("104"))
	key, sid := res.Entry.SessionKey, res.Entry.SessionID
	child := "20260302_100500_c0ffee00"
	h.call("POST", "/v1/transcripts", map[string]any{"session_id": child, "source": "telegram", "parent_session_id": sid}, http.StatusOK, nil)
	if r := h.do("POST", lane(key, "/compression-split"), map[string]string{"session_id": "20260302_100600_0ddba11a", "previous_session_id": sid}); r.status != http.StatusNotFound {
		t.Errorf("a split to a session that does not exist = %d %s, want 404", r.status, r.body)
	}
	var e entry
	h.call("POST", lane(key, "/compression-split"), map[string]string{"session_id": child, "previous_session_id": sid}, http.StatusOK, &e)
	if e.SessionID != child {
		t.Fatalf("after the split the lane is on %s, want %s", e.SessionID, child)
	}
	h.call("POST", lane(key, "/compression-split"), map[string]string{"session_id": child, "previous_session_id": sid}, http.StatusOK, nil)
	if n := h.countEvents(key, "lane.session_compressed.v1", ""); n != 1 {
		t.Errorf("session_compressed events = %d, want 1 (the repeat is a no-op)", n)
	}

	var reset entry
	h.call("POST", lane(key, "/reset"), nil, http.StatusOK, &reset)
	var fresh struct {
		IsFreshReset bool `json:"is_fresh_reset"`
	}
	h.call("GET", lane(key, ""), nil, http.StatusOK, &fresh)
	if !fresh.IsFreshReset {
		t.Fatal("after /reset is_fresh_reset is false")
	}
	h.call("POST", lane(key, "/fresh-reset/consume"), map[string]string{"session_id": reset.SessionID}, http.StatusOK, &fresh)
	h.call("POST", lane(key, "/fresh-reset/consume"), nil, http.StatusOK, nil)
	if fresh.IsFreshReset || h.countEvents(key, "lane.fresh_reset_consumed.v1", "explicit") != 1 {
		t.Errorf("after consume: flag %v, %d consumed events; want false and 1", fresh.IsFreshReset, h.countEvents(key, "lane.fresh_reset_consumed.v1", ""))
	}

	if r := h.do("POST", lane(key, "/expiry-finalized"), map[string]string{"session_id": reset.SessionID}); r.status != http.StatusConflict {
		t.Errorf("finalizing a live session = %d %s, want 409", r.status, r.body)
	}
	if err := h.clock.Set(start.Add(48 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	var fin struct {
		ExpiryFinalized bool `json:"expiry_finalized"`
	}
	h.call("POST", lane(key, "/expiry-finalized"), map[string]any{"session_id": reset.SessionID, "forced": true}, http.StatusOK, &fin)
	if !fin.ExpiryFinalized {
		t.Errorf("after the gateway's finalization expiry_finalized is false")
	}
}

// TestGatewayState_OverHTTP: state_meta, a handoff's steps, Telegram's
// topic mode and bindings, messages around an anchor, and auto-prune.
func TestGatewayState_OverHTTP(t *testing.T) {
	h := newHarness(t)
	res := h.resolve(dm("105"))
	sid := res.Entry.SessionID
	var meta struct {
		Key   string  `json:"key"`
		Value *string `json:"value"`
	}
	h.call("GET", "/v1/meta/"+url.PathEscape("goal:"+sid), nil, http.StatusOK, &meta)
	if meta.Value != nil {
		t.Errorf("an unset key = %v, want null", *meta.Value)
	}
	h.call("PUT", "/v1/meta/"+url.PathEscape("goal:"+sid), map[string]string{"value": `{"goal":"ship"}`}, http.StatusOK, nil)
	h.call("GET", "/v1/meta/"+url.PathEscape("goal:"+sid), nil, http.StatusOK, &meta)
	if meta.Value == nil || *meta.Value != `{"goal":"ship"}` {
		t.Errorf("GET meta after PUT = %v", meta.Value)
	}
	if r := h.do("PUT", "/v1/meta/hermes_checkpoint", map[string]string{"value": "0"}); r.status != http.StatusBadRequest {
		t.Errorf("setting hermes' own key = %d, want 400", r.status)
	}

	var requested struct{ Requested bool }
	h.call("POST", transcript(sid, "/handoff"), map[string]string{"platform": "discord"}, http.StatusOK, &requested)
	h.call("POST", transcript(sid, "/handoff"), map[string]string{"platform": "discord"}, http.StatusOK, &requested)
	if requested.Requested {
		t.Errorf("a second request while pending = true, want false")
	}
	var pending struct {
		Sessions []map[string]any `json:"sessions"`
	}
	h.call("GET", "/v1/handoffs?state=pending", nil, http.StatusOK, &pending)
	if len(pending.Sessions) != 1 || pending.Sessions[0]["id"] != sid {
		t.Errorf("pending handoffs = %v, want %s", pending.Sessions, sid)
	}
	var claimed struct{ Claimed bool }
	h.call("POST", transcript(sid, "/handoff/claim"), nil, http.StatusOK, &claimed)
	first := claimed.Claimed
	h.call("POST", transcript(sid, "/handoff/claim"), nil, http.StatusOK, &claimed)
	if !first || claimed.Claimed {
		t.Errorf("claims = %v then %v, want true then false", first, claimed.Claimed)
	}
	h.call("POST", transcript(sid, "/handoff/fail"), map[string]string{"error": "adapter down"}, http.StatusOK, nil)
	var state struct{ State, Platform, Error *string }
	h.call("GET", transcript(sid, "/handoff"), nil, http.StatusOK, &state)
	if *state.State != "failed" || *state.Error != "adapter down" {
		t.Errorf("handoff state = %v %v", *state.State, *state.Error)
	}
	if r := h.do("POST", transcript("20260302_100000_deadbeef", "/handoff/claim"), nil); r.status != http.StatusNotFound {
		t.Errorf("claim on an unknown session = %d, want 404", r.status)
	}

	var mode struct {
		Enabled bool           `json:"enabled"`
		Mode    map[string]any `json:"mode"`
	}
	h.call("PUT", "/v1/telegram/chats/105/topic-mode", map[string]any{"user_id": "u105", "has_topics_enabled": true}, http.StatusOK, &mode)
	h.call("GET", "/v1/telegram/chats/105/topic-mode?user_id=u105", nil, http.StatusOK, &mode)
	if !mode.Enabled || mode.Mode["has_topics_enabled"] != float64(1) {
		t.Errorf("topic mode = %+v, want enabled", mode)
	}
	h.call("GET", "/v1/meta/telegram_dm_topic_schema_version", nil, http.StatusOK, &meta)
	if meta.Value == nil || *meta.Value != "2" {
		t.Errorf("topic schema version = %v, want 2", meta.Value)
	}
	bind := map[string]string{"user_id": "u105", "session_key": res.Entry.SessionKey, "session_id": sid}
	h.call("PUT", "/v1/telegram/chats/105/topics/7", bind, http.StatusOK, nil)
	if r := h.do("PUT", "/v1/telegram/chats/105/topics/8", bind); r.status != http.StatusConflict {
		t.Errorf("binding the session to a second topic = %d %s, want 409", r.status, r.body)
	}
	var binding struct {
		Binding map[string]any `json:"binding"`
	}
	h.call("GET", "/v1/telegram/topic-bindings?session_id="+sid, nil, http.StatusOK, &binding)
	if binding.Binding["thread_id"] != "7" {
		t.Errorf("binding by session = %v, want thread 7", binding.Binding)
	}
	var unlinked struct {
		Sessions []map[string]any `json:"sessions"`
	}
	h.call("GET", "/v1/telegram/unlinked-sessions?user_id=u105", nil, http.StatusOK, &unlinked)
	if len(unlinked.Sessions) != 0 {
		t.Errorf("unlinked sessions = %v, want none (the only one is bound)", unlinked.Sessions)
	}
	h.call("DELETE", "/v1/telegram/chats/105/topic-mode", nil, http.StatusOK, nil)
	h.call("GET", "/v1/telegram/chats/105/topics/7", nil, http.StatusOK, &binding)
	if binding.Binding != nil {
		t.Errorf("after disable the binding = %v, want cleared", binding.Binding)
	}

	for _, text := range []string{"one", "two", "three"} {
		h.call("POST", transcript(sid, "/messages"), map[string]string{"role": "user", "content": text}, http.StatusOK, nil)
	}
	var around struct {
		Window []struct {
			ID int64 `json:"id"`
		} `json:"window"`
		MessagesBefore int `json:"messages_before"`
		MessagesAfter  int `json:"messages_after"`
	}
	var msgs struct {
		Messages []struct {
			ID int64 `json:"id"`
		} `json:"messages"`
	}
	h.call("GET", transcript(sid, "/messages"), nil, http.StatusOK, &msgs)
	mid := msgs.Messages[1].ID
	h.call("GET", transcript(sid, "/messages/around?window=1&message_id="+strconv.FormatInt(mid, 10)), nil, http.StatusOK, &around)
	if len(around.Window) != 3 || around.MessagesBefore != 1 || around.MessagesAfter != 1 || around.Window[1].ID != mid {
		t.Errorf("around = %+v, want the three messages with the anchor in the middle", around)
	}
	if r := h.do("GET", transcript(sid, "/messages/anchored?message_id=x"), nil); r.status != http.StatusBadRequest {
		t.Errorf("anchored without a numeric id = %d, want 400", r.status)
	}

	var pruned struct {
		Skipped bool `json:"skipped"`
		Pruned  int  `json:"pruned"`
	}
	h.call("POST", "/v1/maintenance/auto-prune", map[string]any{"retention_days": 90}, http.StatusOK, &pruned)
	h.call("POST", "/v1/maintenance/auto-prune", map[string]any{"retention_days": 90}, http.StatusOK, &pruned)
	if !pruned.Skipped {
		t.Errorf("a second auto-prune within the interval was not skipped")
	}
	h.call("GET", "/v1/meta/last_auto_prune", nil, http.StatusOK, &meta)
	if meta.Value == nil {
		t.Errorf("last_auto_prune after a run = null")
	}
}

// TestLaneExpiryAndSessionKey: hermes' answer to _is_session_expired and
// _should_reset for a lane, the expired filter of the lane list, and
// _generate_session_key for a source.
func TestLaneExpiryAndSessionKey(t *testing.T) {
	h := newHarness(t)
	key := h.resolve(dm("106")).Entry.SessionKey
	var exp struct {
		Expired         bool    `json:"expired"`
		Reason          *string `json:"reason"`
		ExpiryFinalized bool    `json:"expiry_finalized"`
		Finalizable     bool    `json:"finalizable"`
	}
	h.call("GET", lane(key, "/expiry"), nil, http.StatusOK, &exp)
	if !exp.Finalizable {
		t.Errorf("expiry under the default policy: finalizable false, want true (its mode is not none)")
	}
	if exp.Expired || exp.Reason != nil {
		t.Errorf("a fresh lane's expiry = %+v, want not expired", exp)
	}
	var list struct {
		Sessions []entry `json:"sessions"`
	}
	h.call("GET", "/v1/sessions?expired=true", nil, http.StatusOK, &list)
	if len(list.Sessions) != 0 {
		t.Errorf("expired lanes of a fresh home = %d, want 0", len(list.Sessions))
	}
	if err := h.clock.Set(start.Add(25 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	h.call("GET", lane(key, "/expiry"), nil, http.StatusOK, &exp)
	if !exp.Expired || exp.Reason == nil || (*exp.Reason != "idle" && *exp.Reason != "daily") {
		t.Errorf("a day later the lane's expiry = %+v, want expired (idle or daily)", exp)
	}
	h.call("GET", "/v1/sessions?expired=true", nil, http.StatusOK, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].SessionKey != key {
		t.Errorf("expired lanes = %+v, want %s", list.Sessions, key)
	}
	var got struct {
		SessionKey string `json:"session_key"`
	}
	before := h.head()
	h.call("POST", "/v1/sessions/key", map[string]any{"source": dm("107")}, http.StatusOK, &got)
	if got.SessionKey != "agent:main:telegram:dm:107" || h.head() != before {
		t.Errorf("POST /v1/sessions/key = %q (log %d -> %d), want agent:main:telegram:dm:107 and no event", got.SessionKey, before, h.head())
	}
	if r := h.do("POST", "/v1/sessions/key", map[string]any{"source": map[string]string{"chat_id": "1"}}); r.status != http.StatusBadRequest {
		t.Errorf("a source without a platform = %d, want 400", r.status)
	}
}
