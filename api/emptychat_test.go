package api_test

import (
	"net/http"
	"testing"
)

// TestEmptyChatIDKeys: chat_id is a required string that may be empty (in
// Hermes it often is). Every key example of the seed's key rules (000 §4)
// and of the catalogue (hermes-behavior.md §1.4) with an empty chat id
// resolves, over HTTP, to the catalogue's key.
func TestEmptyChatIDKeys(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name   string
		source map[string]any
		want   string
	}{
		{"k3 dm, user", map[string]any{"platform": "telegram", "chat_type": "dm", "chat_id": "", "user_id": "jordan"}, "agent:main:telegram:dm:jordan"},
		{"k4 dm, user and user_alt", map[string]any{"platform": "telegram", "chat_type": "dm", "chat_id": "", "user_id": "primary", "user_id_alt": "alt"}, "agent:main:telegram:dm:alt"},
		{"k5 dm, thread only", map[string]any{"platform": "telegram", "chat_type": "dm", "chat_id": "", "thread_id": "7"}, "agent:main:telegram:dm:7"},
		{"k6 dm, nothing", map[string]any{"platform": "telegram", "chat_type": "dm", "chat_id": ""}, "agent:main:telegram:dm"},
		{"k7 dm, user and thread", map[string]any{"platform": "telegram", "chat_type": "dm", "chat_id": "", "user_id": "jordan", "thread_id": "t9"}, "agent:main:telegram:dm:jordan:t9"},
		{"k13 whatsapp dm, user jid", map[string]any{"platform": "whatsapp", "chat_type": "dm", "chat_id": "", "user_id": "15551234567@s.whatsapp.net"}, "agent:main:whatsapp:dm:15551234567"},
		{"k24 group, user", map[string]any{"platform": "discord", "chat_type": "group", "chat_id": "", "user_id": "u1"}, "agent:main:discord:group:u1"},
		{"k25 group, no user", map[string]any{"platform": "discord", "chat_type": "group", "chat_id": ""}, "agent:main:discord:group"},
		{"seed §4 dm without chat_id, with participant", map[string]any{"platform": "signal", "chat_type": "dm", "chat_id": "", "user_id": "user_abc"}, "agent:main:signal:dm:user_abc"},
		{"seed §4 dm without chat_id or participant", map[string]any{"platform": "telegram", "chat_type": "dm", "chat_id": ""}, "agent:main:telegram:dm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got resolved
			h.with(t).call("POST", "/v1/sessions/resolve", map[string]any{"source": tt.source}, http.StatusOK, &got)
			if got.Entry.SessionKey != tt.want {
				t.Errorf("resolve %v = key %q, want %q", tt.source, got.Entry.SessionKey, tt.want)
			}
			if got.Entry.Origin.ChatID != "" {
				t.Errorf("resolve %v = origin chat_id %q, want \"\"", tt.source, got.Entry.Origin.ChatID)
			}
		})
	}
}
