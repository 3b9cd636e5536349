package domain_test

import (
	"testing"

	"hermes/domain"
)

// TestRedaction pins every worked example of catalogue §7.
func TestRedaction(t *testing.T) {
	users := []struct{ in, want string }{
		{"u1", "user_bb82030dbc2b"},
	}
	for _, tt := range users {
		if got := domain.RedactUserID(tt.in); got != tt.want {
			t.Errorf("RedactUserID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	chats := []struct{ in, want string }{
		{"telegram:12345", "telegram:5994471abb01"},
		{"12345", "5994471abb01"},
		{"-1002285219667", "d7e77f26eb67"},
		{"a:b:c", "a:333edf7c3ca3"},
		{":123", "a3d1f6e674ae"},
	}
	for _, tt := range chats {
		if got := domain.RedactChatID(tt.in); got != tt.want {
			t.Errorf("RedactChatID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestHashID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"12345", "5994471abb01"},
		{"u1", "bb82030dbc2b"},
		{"", "e3b0c44298fc"},
		{"b:c", "333edf7c3ca3"},
	}
	for _, tt := range tests {
		if got := domain.HashID(tt.in); got != tt.want {
			t.Errorf("HashID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPIISafePlatforms(t *testing.T) {
	tests := []struct {
		platform string
		plugins  []string
		redact   bool
		want     bool
	}{
		{"whatsapp", nil, true, true},
		{"signal", nil, true, true},
		{"telegram", nil, true, true},
		{"bluebubbles", nil, true, true},
		{"telegram", nil, false, false},
		{"discord", nil, true, false},
		{"discord", []string{"discord"}, true, false},
		{"slack", nil, true, false},
		{"matrix", nil, true, false},
		{"local", nil, true, false},
		{"myplugin", nil, true, false},
		{"myplugin", []string{"myplugin"}, true, true},
		{"myplugin", []string{"myplugin"}, false, false},
	}
	for _, tt := range tests {
		s := domain.ContextSettings{RedactPII: tt.redact, PIISafePlatforms: tt.plugins}
		if got := s.Redacts(tt.platform); got != tt.want {
			t.Errorf("ContextSettings{RedactPII: %t, PIISafePlatforms: %v}.Redacts(%q) = %t, want %t", tt.redact, tt.plugins, tt.platform, got, tt.want)
		}
	}
}
