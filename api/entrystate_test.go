package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type modelOverrideAnswer struct {
	SessionID     string            `json:"session_id"`
	ModelOverride map[string]string `json:"model_override"`
}

type entryMetadataAnswer struct {
	SessionID string                     `json:"session_id"`
	Metadata  map[string]json.RawMessage `json:"metadata"`
}

// Given a lane, when its /model override is set, set again, read and
// cleared, then each change is one event, the same override again none,
// and a new session (/new) starts without one; a credential or an unknown
// lane is refused and changes nothing.
func TestModelOverrideRoutes(t *testing.T) {
	h := newHarness(t)
	key := h.resolve(dm("301")).Entry.SessionKey
	path := lane(key, "/model-override")
	var got modelOverrideAnswer

	h.call("GET", path, nil, http.StatusOK, &got)
	if got.ModelOverride != nil {
		t.Fatalf("GET a fresh lane's override = %v, want null", got.ModelOverride)
	}
	before := h.head()
	set := map[string]any{"model_override": map[string]string{"model": "gpt-5", "provider": "openai", "base_url": "https://example.invalid/v1"}}
	h.call("PUT", path, set, http.StatusOK, &got)
	want := map[string]string{"model": "gpt-5", "provider": "openai", "base_url": "https://example.invalid/v1"}
	if diff := cmp.Diff(want, got.ModelOverride); diff != "" || h.head() != before+1 {
		t.Fatalf("PUT override = %v (log %d -> %d), want one event and (-want +got):\n%s", got.ModelOverride, before, h.head(), diff)
	}
	h.call("PUT", path, set, http.StatusOK, &got)
	if h.head() != before+1 {
		t.Errorf("the same override again moved the log %d -> %d, want no event", before+1, h.head())
	}
	h.call("GET", path, nil, http.StatusOK, &got)
	if diff := cmp.Diff(want, got.ModelOverride); diff != "" {
		t.Errorf("GET override (-want +got):\n%s", diff)
	}
	var entryState struct {
		ModelOverride map[string]string          `json:"model_override"`
		Metadata      map[string]json.RawMessage `json:"metadata"`
	}
	h.call("GET", lane(key, ""), nil, http.StatusOK, &entryState)
	if diff := cmp.Diff(want, entryState.ModelOverride); diff != "" || entryState.Metadata == nil || len(entryState.Metadata) != 0 {
		t.Errorf("GET lane: model_override (-want +got):\n%s\nmetadata %v, want {}", diff, entryState.Metadata)
	}

	for name, body := range map[string]any{
		"a credential":       map[string]any{"model_override": map[string]string{"model": "m", "api_key": "sk-secret"}},
		"a field over bound": map[string]any{"model_override": map[string]string{"model": strings.Repeat("m", 1025)}},
	} {
		head := h.head()
		if r := h.do("PUT", path, body); r.status != http.StatusBadRequest || h.head() != head {
			t.Errorf("PUT %s = %d (log %d -> %d), want 400 and no event", name, r.status, head, h.head())
		}
	}
	if r := h.do("PUT", lane("agent:main:telegram:dm:nobody", "/model-override"), set); r.status != http.StatusNotFound {
		t.Errorf("PUT an unknown lane's override = %d, want 404", r.status)
	}

	h.call("PUT", path, map[string]any{"model_override": nil}, http.StatusOK, &got)
	if got.ModelOverride != nil {
		t.Errorf("PUT null = %v, want cleared", got.ModelOverride)
	}
	h.call("PUT", path, set, http.StatusOK, &got)
	h.call("POST", lane(key, "/reset"), map[string]any{}, http.StatusOK, nil)
	h.call("GET", path, nil, http.StatusOK, &got)
	if got.ModelOverride != nil {
		t.Errorf("after /new the override = %v, want none (it belongs to the session)", got.ModelOverride)
	}
}

// Given a lane, when metadata values are set (null included), then they
// read back, the lane's updated_at stays (not activity), the same value
// again appends nothing, a value over the bound is refused, and /new
// starts with none.
func TestEntryMetadataRoutes(t *testing.T) {
	h := newHarness(t)
	key := h.resolve(dm("302")).Entry.SessionKey
	var before entry
	h.call("GET", lane(key, ""), nil, http.StatusOK, &before)
	h.clock.Set(h.clock.Now().Add(time.Minute))

	var got entryMetadataAnswer
	h.call("PUT", lane(key, "/metadata/slack_watermark"), map[string]any{"value": map[string]any{"ts": "1.2", "n": 3}}, http.StatusOK, &got)
	h.call("PUT", lane(key, "/metadata/cleared"), map[string]any{"value": nil}, http.StatusOK, &got)
	head := h.head()
	h.call("PUT", lane(key, "/metadata/slack_watermark"), map[string]any{"value": map[string]any{"n": 3, "ts": "1.2"}}, http.StatusOK, &got)
	if h.head() != head {
		t.Errorf("the same value again (members reordered by the encoder) moved the log %d -> %d", head, h.head())
	}
	got = entryMetadataAnswer{}
	h.call("GET", lane(key, "/metadata"), nil, http.StatusOK, &got)
	want := map[string]json.RawMessage{"slack_watermark": json.RawMessage(`{"n":3,"ts":"1.2"}`), "cleared": json.RawMessage(`null`)}
	if diff := cmp.Diff(want, got.Metadata, cmp.Transformer("s", func(b json.RawMessage) string { return string(b) })); diff != "" {
		t.Errorf("GET metadata (-want +got):\n%s", diff)
	}
	var after struct {
		entry
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	h.call("GET", lane(key, ""), nil, http.StatusOK, &after)
	if diff := cmp.Diff(want, after.Metadata, cmp.Transformer("s", func(b json.RawMessage) string { return string(b) })); diff != "" {
		t.Errorf("GET lane metadata, from the read model (-want +got):\n%s", diff)
	}
	if !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("updated_at %v -> %v after metadata writes, want unchanged (not activity)", before.UpdatedAt, after.UpdatedAt)
	}

	head = h.head()
	for name, tc := range map[string]struct {
		path string
		body any
	}{
		"a value over 16 KiB": {lane(key, "/metadata/big"), map[string]any{"value": strings.Repeat("x", 16<<10)}},
		"no value":            {lane(key, "/metadata/none"), map[string]any{}},
	} {
		if r := h.do("PUT", tc.path, tc.body); r.status != http.StatusBadRequest {
			t.Errorf("PUT %s = %d, want 400", name, r.status)
		}
	}
	if h.head() != head {
		t.Errorf("refused writes moved the log %d -> %d", head, h.head())
	}

	h.call("POST", lane(key, "/reset"), map[string]any{}, http.StatusOK, nil)
	got = entryMetadataAnswer{} // decoding into a map adds to it
	h.call("GET", lane(key, "/metadata"), nil, http.StatusOK, &got)
	if len(got.Metadata) != 0 {
		t.Errorf("after /new the metadata of %s = %v, want none", got.SessionID, got.Metadata)
	}
}

// Given turns open without a gateway run (Hermes' active-turn markers) and
// one of a gateway run, when loose turns are recovered, then a fresh one is
// interrupted and its lane marked resume-pending (restart_interrupted), one
// older than max_age is closed without a mark, the run's turn is left to
// its run; with discard every loose turn is closed without a mark.
func TestRecoverLooseTurns(t *testing.T) {
	h := newHarness(t)
	fresh := h.resolve(dm("311")).Entry.SessionKey
	old := h.resolve(dm("312")).Entry.SessionKey
	ofRun := h.resolve(dm("313")).Entry.SessionKey
	h.call("POST", "/v1/gateway-runs", map[string]any{"gateway": "default", "run_id": "r1", "pid": 1, "host": "gw"}, http.StatusCreated, nil)
	h.call("POST", lane(old, "/turns/start"), map[string]any{}, http.StatusOK, nil)
	h.clock.Set(h.clock.Now().Add(2 * time.Hour))
	h.call("POST", "/v1/gateway-runs/default/r1/heartbeat", map[string]any{}, http.StatusOK, nil)
	h.call("POST", lane(fresh, "/turns/start"), map[string]any{}, http.StatusOK, nil)
	h.call("POST", lane(ofRun, "/turns/start"), map[string]any{"gateway_run": map[string]string{"gateway": "default", "run_id": "r1"}}, http.StatusOK, nil)

	var out struct {
		Resumed []string `json:"resumed"`
		Closed  []string `json:"closed"`
	}
	h.call("POST", "/v1/recovery/loose-turns", map[string]any{"max_age_seconds": 3600}, http.StatusOK, &out)
	if diff := cmp.Diff([]string{fresh}, out.Resumed); diff != "" {
		t.Errorf("resumed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{old}, out.Closed); diff != "" {
		t.Errorf("closed (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		key            string
		open, resuming bool
	}{{fresh, false, true}, {old, false, false}, {ofRun, true, false}} {
		var e entry
		h.call("GET", lane(tc.key, ""), nil, http.StatusOK, &e)
		if (e.OpenTurnID != nil) != tc.open || e.ResumePending != tc.resuming {
			t.Errorf("%s: open turn %v resume_pending %v, want open %v resume_pending %v", tc.key, e.OpenTurnID, e.ResumePending, tc.open, tc.resuming)
		} else if tc.resuming && (e.ResumeReason == nil || *e.ResumeReason != "restart_interrupted") {
			t.Errorf("%s: resume_reason %v, want restart_interrupted", tc.key, e.ResumeReason)
		}
	}

	discard := h.resolve(dm("314")).Entry.SessionKey
	h.call("POST", lane(discard, "/turns/start"), map[string]any{}, http.StatusOK, nil)
	h.call("POST", "/v1/recovery/loose-turns", map[string]any{"discard": true}, http.StatusOK, &out)
	if diff := cmp.Diff([]string{discard}, out.Closed); diff != "" || len(out.Resumed) != 0 {
		t.Errorf("discard = %+v, want only %s closed", out, discard)
	}
	var e entry
	h.call("GET", lane(discard, ""), nil, http.StatusOK, &e)
	if e.OpenTurnID != nil || e.ResumePending {
		t.Errorf("discarded lane: open turn %v resume_pending %v, want closed and not pending", e.OpenTurnID, e.ResumePending)
	}
}

func init() {
	readCases["/v1/sessions/{key}/model-override"] = func(h *harness, n int) readCheck {
		res := h.resolve(dm("model-override"))
		model := fmt.Sprint("model-", n)
		h.call("PUT", lane(res.Entry.SessionKey, "/model-override"), map[string]any{"model_override": map[string]string{"model": model}}, 200, nil)
		return readCheck{path: lane(res.Entry.SessionKey, "/model-override"), status: 200, has: `"model":"` + model + `"`}
	}
	readCases["/v1/sessions/{key}/metadata"] = func(h *harness, n int) readCheck {
		res := h.resolve(dm("metadata"))
		h.call("PUT", lane(res.Entry.SessionKey, "/metadata/round"), map[string]any{"value": n}, 200, nil)
		return readCheck{path: lane(res.Entry.SessionKey, "/metadata"), status: 200, has: fmt.Sprintf(`"round":%d`, n)}
	}
}
