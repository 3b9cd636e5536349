package api_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// originEntry is a resolve answer with the origin as sent on the wire.
type originEntry struct {
	Entry struct {
		SessionKey string         `json:"session_key"`
		SessionID  string         `json:"session_id"`
		Origin     map[string]any `json:"origin"`
	} `json:"entry"`
	Created bool `json:"created"`
}

// Given the SessionSource record Hermes' gateway sends at b9aa9289 (made by
// upstream's to_dict, testdata/hermes_b9aa9289_source.json), when it is
// resolved, then it is accepted, keyed as Hermes keys it at d7f5acb9 (the
// Slack workspace after the chat type, the prospective thread), and the
// origin comes back with every field under Hermes' names; resolving it
// again keeps the session, and /v1/sessions/key agrees.
func TestResolveHermesB9aa9289Source(t *testing.T) {
	h := newHarness(t)
	data, err := os.ReadFile(filepath.Join("testdata", "hermes_b9aa9289_source.json"))
	if err != nil {
		t.Fatal(err)
	}
	var src map[string]any
	if err := json.Unmarshal(data, &src); err != nil {
		t.Fatal(err)
	}
	const wantKey = "agent:main:slack:thread:T0001:C0123:1723100000.000100"

	var first originEntry
	h.call("POST", "/v1/sessions/resolve", map[string]any{"source": src}, http.StatusOK, &first)
	if first.Entry.SessionKey != wantKey || !first.Created {
		t.Fatalf("resolve(b9aa9289 source) = key %q created %v, want %q created", first.Entry.SessionKey, first.Created, wantKey)
	}
	want := map[string]any{
		"platform": "slack", "chat_id": "C0123", "chat_name": "general", "chat_type": "channel",
		"user_id": "U42", "user_name": "Ada", "chat_topic": "Ops", "is_bot": false,
		"scope_id": "T0001", "guild_id": "T0001", "message_id": "1723100000.000100", "role_authorized": false,
		"profile": "coder", "auto_thread_created": true, "auto_thread_initial_name": "deploy help",
		"prospective_thread_id": "1723100000.000100",
	}
	if diff := cmp.Diff(want, first.Entry.Origin); diff != "" {
		t.Errorf("resolve(b9aa9289 source) origin (-want +got):\n%s", diff)
	}
	var read originEntry
	h.call("GET", lane(wantKey, ""), nil, http.StatusOK, &read.Entry)
	if diff := cmp.Diff(want, read.Entry.Origin); diff != "" {
		t.Errorf("GET lane origin (-want +got):\n%s", diff)
	}

	var again originEntry
	h.call("POST", "/v1/sessions/resolve", map[string]any{"source": src}, http.StatusOK, &again)
	if again.Created || again.Entry.SessionID != first.Entry.SessionID {
		t.Errorf("second resolve = session %q created %v, want %q kept", again.Entry.SessionID, again.Created, first.Entry.SessionID)
	}
	var key struct {
		SessionKey string `json:"session_key"`
	}
	h.call("POST", "/v1/sessions/key", map[string]any{"source": src}, http.StatusOK, &key)
	if key.SessionKey != wantKey {
		t.Errorf("POST /v1/sessions/key = %q, want %q", key.SessionKey, wantKey)
	}
}

// Given sources with the new fields, when they are resolved, then the keys
// are those of Hermes at d7f5acb9 (upstream's build_session_key gave each
// want): guild_id alone (a peer not yet migrated) keys as scope_id does,
// Discord's guild stays out of the key, and a Discord channel message with
// a prospective thread and the thread's follow-up share one session.
func TestNewSourceFieldsKeys(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name   string
		source map[string]any
		want   string
	}{
		{"slack channel, guild_id alone", map[string]any{"platform": "slack", "chat_id": "C0123", "chat_type": "channel", "user_id": "U42", "guild_id": "T0001"}, "agent:main:slack:channel:T0001:C0123:U42"},
		{"slack channel, scope_id alone", map[string]any{"platform": "slack", "chat_id": "C0123", "chat_type": "channel", "user_id": "U42", "scope_id": "T0001"}, "agent:main:slack:channel:T0001:C0123:U42"},
		{"slack dm", map[string]any{"platform": "slack", "chat_id": "D77", "chat_type": "dm", "user_id": "U42", "scope_id": "T0001"}, "agent:main:slack:dm:T0001:D77"},
		{"profile without multiplexing", map[string]any{"platform": "telegram", "chat_id": "5", "chat_type": "dm", "profile": "coder"}, "agent:main:telegram:dm:5"},
		{"discord channel, prospective thread", map[string]any{"platform": "discord", "chat_id": "C1", "chat_type": "group", "user_id": "u1", "guild_id": "G1", "prospective_thread_id": "M5"}, "agent:main:discord:thread:C1:M5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got originEntry
			h.with(t).call("POST", "/v1/sessions/resolve", map[string]any{"source": tt.source}, http.StatusOK, &got)
			if got.Entry.SessionKey != tt.want {
				t.Errorf("resolve %v = key %q, want %q", tt.source, got.Entry.SessionKey, tt.want)
			}
		})
	}

	var channel, followUp originEntry
	h.call("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "discord", "chat_id": "C2", "chat_type": "group", "user_id": "u1", "prospective_thread_id": "M9"}}, http.StatusOK, &channel)
	h.call("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "discord", "chat_id": "C2", "chat_type": "thread", "thread_id": "M9", "user_id": "u2"}}, http.StatusOK, &followUp)
	if followUp.Created || followUp.Entry.SessionID != channel.Entry.SessionID {
		t.Errorf("thread follow-up = session %q created %v, want the channel message's %q", followUp.Entry.SessionID, followUp.Created, channel.Entry.SessionID)
	}
}

// Given a source whose scope_id and guild_id differ, or a new field over
// the bound, when it is resolved, then it is refused with 400 naming the
// field, and nothing is written.
func TestNewSourceFieldsRefused(t *testing.T) {
	h := newHarness(t)
	long := make([]byte, 1025)
	for i := range long {
		long[i] = 'a'
	}
	tests := []struct {
		name   string
		source map[string]any
	}{
		{"scope_id and guild_id differ", map[string]any{"platform": "slack", "chat_id": "C1", "chat_type": "channel", "scope_id": "T1", "guild_id": "T2"}},
		{"profile too long", map[string]any{"platform": "telegram", "chat_id": "1", "profile": string(long)}},
		{"prospective_thread_id too long", map[string]any{"platform": "discord", "chat_id": "1", "chat_type": "group", "prospective_thread_id": string(long)}},
		{"auto_thread_created not a boolean", map[string]any{"platform": "discord", "chat_id": "1", "auto_thread_created": "yes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := h.head()
			r := h.with(t).do("POST", "/v1/sessions/resolve", map[string]any{"source": tt.source})
			if code, _ := errorBody(r); r.status != http.StatusBadRequest || code != "invalid_argument" {
				t.Errorf("resolve %s = %d %q, want 400 invalid_argument", tt.name, r.status, code)
			}
			if after := h.head(); after != before {
				t.Errorf("resolve %s moved the log %d -> %d, want no event", tt.name, before, after)
			}
		})
	}
}
