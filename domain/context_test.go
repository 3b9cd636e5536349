package domain_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hermes/domain"
)

var updateGoldens = flag.Bool("update", false, "rewrite the golden files in testdata/")

// promptSettings is a gateway with Telegram, Discord and Slack connected and
// home channels on Telegram and Discord (the Discord one has no name).
func promptSettings() domain.ContextSettings {
	return domain.ContextSettings{
		ConnectedPlatforms: []string{"telegram", "slack", "discord", "local", "telegram"},
		HomeChannels: map[string]domain.HomeChannel{
			"telegram": {ChatID: "-1002285219667", Name: "Ops Room"},
			"discord":  {ChatID: "112233445566"},
			// Not connected: never shown.
			"signal": {ChatID: "+15551234567", Name: "Phone"},
		},
		HermesHome: "~/.hermes",
	}
}

func redacted(s domain.ContextSettings) domain.ContextSettings {
	s.RedactPII = true
	return s
}

// TestSessionContextPrompt pins the whole prompt for each kind of source in
// a golden file (go test ./domain -run TestSessionContextPrompt -update
// rewrites them; review the diff).
func TestSessionContextPrompt(t *testing.T) {
	shared := domain.KeyOptions{GroupSessionsPerUser: false}
	perUser := domain.DefaultKeyOptions()
	tests := []struct {
		name     string
		src      domain.SessionSource
		keys     domain.KeyOptions
		settings domain.ContextSettings
		// lines must appear in the prompt as whole lines, a check on the
		// golden independent of -update.
		lines []string
		// absent must not appear anywhere.
		absent []string
	}{
		{
			name:     "telegram_dm",
			src:      domain.SessionSource{Platform: "telegram", ChatID: "12345", ChatType: "dm", UserID: "u1", UserName: "Alice"},
			keys:     perUser,
			settings: promptSettings(),
			lines: []string{
				"**Source:** Telegram (DM with Alice)", "**User:** Alice",
				"**Connected Platforms:** local (files on this machine), discord: Connected ✓, slack: Connected ✓, telegram: Connected ✓",
				"  - discord: Home (ID: 112233445566)", "  - telegram: Ops Room (ID: -1002285219667)",
				"- `\"origin\"` → Back to this chat (12345)",
				"- `\"local\"` → Save to local files only (~/.hermes/cron/output/)",
				"- `\"discord\"` → Home channel (Home)", "- `\"telegram\"` → Home channel (Ops Room)",
			},
			absent: []string{"signal", "Phone"},
		},
		{
			name:     "telegram_dm_user_id_only",
			src:      domain.SessionSource{Platform: "telegram", ChatID: "12345", ChatType: "dm", UserID: "u1"},
			keys:     perUser,
			settings: promptSettings(),
			lines:    []string{"**Source:** Telegram (DM with u1)", "**User ID:** u1"},
		},
		{
			name:     "telegram_dm_redacted",
			src:      domain.SessionSource{Platform: "telegram", ChatID: "12345", ChatType: "dm", UserID: "u1"},
			keys:     perUser,
			settings: redacted(promptSettings()),
			lines: []string{
				"**Source:** Telegram (DM with user_bb82030dbc2b)", "**User ID:** user_bb82030dbc2b",
				"  - telegram: Ops Room (ID: d7e77f26eb67)",
				"- `\"origin\"` → Back to this chat (5994471abb01)",
			},
			absent: []string{"u1", "12345", "-1002285219667"},
		},
		{
			name:     "telegram_dm_redacted_named",
			src:      domain.SessionSource{Platform: "telegram", ChatID: "telegram:12345", ChatName: "Alice", ChatType: "dm", UserID: "u1", UserName: "Alice"},
			keys:     perUser,
			settings: redacted(promptSettings()),
			lines:    []string{"**Source:** Telegram (DM with Alice)", "**User:** Alice", "- `\"origin\"` → Back to this chat (Alice)"},
			absent:   []string{"u1", "12345", "user_"},
		},
		{
			name:     "telegram_group",
			src:      domain.SessionSource{Platform: "telegram", ChatID: "-1002285219667", ChatName: "Ops Room", ChatType: "group", UserID: "42", UserName: "Bob"},
			keys:     perUser,
			settings: promptSettings(),
			lines:    []string{"**Source:** Telegram (group: Ops Room)", "**User:** Bob", "- `\"origin\"` → Back to this chat (Ops Room)"},
			absent:   []string{"Multi-user"},
		},
		{
			name:     "telegram_group_redacted_unnamed",
			src:      domain.SessionSource{Platform: "telegram", ChatID: "-1002285219667", ChatType: "group", UserID: "42"},
			keys:     perUser,
			settings: redacted(promptSettings()),
			lines: []string{
				"**Source:** Telegram (group: d7e77f26eb67)", "**User ID:** user_73475cb40a56",
				"- `\"origin\"` → Back to this chat (d7e77f26eb67)",
			},
			absent: []string{"-1002285219667"},
		},
		{
			name:     "telegram_thread_shared",
			src:      domain.SessionSource{Platform: "telegram", ChatID: "-1002285219667", ChatName: "Ops Room", ChatType: "group", UserID: "42", UserName: "Bob", ThreadID: "17585"},
			keys:     perUser,
			settings: promptSettings(),
			lines: []string{
				"**Source:** Telegram (group: Ops Room, thread: 17585)",
				"**Session type:** Multi-user thread — messages are prefixed with [sender name]. Multiple users may participate.",
			},
			absent: []string{"**User:**", "**User ID:**", "Bob"},
		},
		{
			name:     "telegram_thread_redacted",
			src:      domain.SessionSource{Platform: "telegram", ChatID: "-1002285219667", ChatType: "group", UserID: "42", ThreadID: "17585"},
			keys:     perUser,
			settings: redacted(promptSettings()),
			lines:    []string{"**Source:** Telegram (group: d7e77f26eb67)"},
			absent:   []string{"thread: ", "17585", "-1002285219667"},
		},
		{
			name: "telegram_thread_not_shared_quirk",
			// gspu=false, tspu=true: a shared key, yet reported as not
			// shared (catalogue §1.5), so a single user line.
			src:      domain.SessionSource{Platform: "telegram", ChatID: "-100", ChatType: "group", UserName: "Bob", ThreadID: "5"},
			keys:     domain.KeyOptions{GroupSessionsPerUser: false, ThreadSessionsPerUser: true},
			settings: promptSettings(),
			lines:    []string{"**User:** Bob"},
			absent:   []string{"Multi-user"},
		},
		{
			name:     "discord_shared_group_redact_on",
			src:      domain.SessionSource{Platform: "discord", ChatID: "998877", ChatType: "group", UserID: "u1", UserName: "Alice", GuildID: "g1"},
			keys:     shared,
			settings: redacted(promptSettings()),
			lines: []string{
				"**Source:** Discord (group: 998877)",
				"**Session type:** Multi-user session — messages are prefixed with [sender name]. Multiple users may participate.",
				"**Platform notes:** You are running inside Discord. You do NOT have access to Discord-specific APIs — you cannot search channel history, pin messages, manage roles, or list server members. Do not promise to perform these actions. If the user asks, explain that you can only read messages sent directly to you and respond.",
				"  - discord: Home (ID: 112233445566)", "  - telegram: Ops Room (ID: -1002285219667)",
				"- `\"origin\"` → Back to this chat (998877)",
			},
			absent: []string{"user_", "d7e77f26eb67"},
		},
		{
			name: "discord_thread_tools",
			src: domain.SessionSource{
				Platform: "discord", ChatID: "thread-456", ChatType: "thread", ChatName: "release-talk", UserID: "u1", UserName: "Alice",
				ThreadID: "thread-456", ParentChatID: "chan-1", GuildID: "guild-123", MessageID: "m-9",
			},
			keys:     perUser,
			settings: func() domain.ContextSettings { s := promptSettings(); s.DiscordToolsLoaded = true; return s }(),
			lines: []string{
				"**Source:** Discord (release-talk, thread: thread-456)",
				"**Discord IDs (for the `discord` / `discord_admin` tools):**",
				"  - Guild: `guild-123`", "  - Parent channel: `chan-1`",
				"  - Thread: `thread-456` (use as `channel_id` for fetch_messages etc.)",
				"  - Triggering message: `m-9`",
			},
			absent: []string{"**Platform notes:**"},
		},
		{
			name:     "slack_channel_topic",
			src:      domain.SessionSource{Platform: "slack", ChatID: "C123", ChatName: "general", ChatType: "channel", UserID: "U1", UserName: "Carol", ChatTopic: "Company-wide announcements"},
			keys:     perUser,
			settings: redacted(promptSettings()),
			lines: []string{
				"**Source:** Slack (channel: general)", "**Channel Topic:** Company-wide announcements", "**User:** Carol",
				"**Platform notes:** You are running inside Slack. You do NOT have access to Slack-specific APIs — you cannot search channel history, pin/unpin messages, manage channels, or list users. Do not promise to perform these actions. The gateway may inline the current message's Slack block/attachment payload when available, but you still cannot call Slack APIs yourself.",
			},
		},
		{
			name:     "local_cli",
			src:      domain.SessionSource{Platform: "local", ChatID: "cli", ChatType: "dm", UserName: "me"},
			keys:     perUser,
			settings: promptSettings(),
			lines:    []string{"**Source:** Local (the machine running this agent)", "**User:** me", "- `\"origin\"` → Local output (saved to files)"},
			absent:   []string{"CLI terminal", "Back to this chat"},
		},
		{
			name:     "matrix_room_thread",
			src:      domain.SessionSource{Platform: "matrix", ChatID: "!room:example.org", ChatType: "group", UserID: "@u:example.org", ThreadID: "$evt"},
			keys:     perUser,
			settings: domain.ContextSettings{ConnectedPlatforms: []string{"matrix"}, HermesHome: "/srv/hermes"},
			lines: []string{
				"**Matrix Room:** !room:example.org", "**Matrix Room ID:** !room:example.org", "**Matrix Thread:** $evt",
				"**Matrix room boundary:** Treat this turn as scoped to the current Matrix room/thread only. Do not assume unresolved references are about other Matrix rooms or projects unless the user explicitly says so.",
				"**Connected Platforms:** local (files on this machine), matrix: Connected ✓",
				"- `\"local\"` → Save to local files only (/srv/hermes/cron/output/)",
			},
			absent: []string{"Home Channels"},
		},
		{
			name:     "bluebubbles_dm_redacted",
			src:      domain.SessionSource{Platform: "bluebubbles", ChatID: "iMessage;-;+15551234567", ChatType: "dm", UserID: "+15551234567"},
			keys:     perUser,
			settings: domain.ContextSettings{ConnectedPlatforms: []string{"bluebubbles"}, RedactPII: true, HermesHome: "~/.hermes"},
			lines:    []string{"**Source:** Bluebubbles (DM with user_" + domain.HashID("+15551234567") + ")"},
			absent:   []string{"+15551234567"},
		},
		{
			name:     "whatsapp_group_redacted",
			src:      domain.SessionSource{Platform: "whatsapp", ChatID: "120363000000000000@g.us", ChatType: "group", UserID: "15551234567", UserName: "Dana"},
			keys:     perUser,
			settings: domain.ContextSettings{ConnectedPlatforms: []string{"whatsapp"}, RedactPII: true, HermesHome: "~/.hermes", HomeChannels: map[string]domain.HomeChannel{"whatsapp": {ChatID: "whatsapp:15550000000", Name: "Me"}}},
			lines: []string{
				"**Source:** Whatsapp (group: " + domain.HashID("120363000000000000@g.us") + ")", "**User:** Dana",
				"  - whatsapp: Me (ID: whatsapp:" + domain.HashID("15550000000") + ")",
			},
			absent: []string{"120363000000000000", "15550000000", "15551234567"},
		},
		{
			name:     "plugin_pii_safe_redacted",
			src:      domain.SessionSource{Platform: "api_server", ChatID: "conn-7", ChatType: "dm", UserID: "client-7"},
			keys:     perUser,
			settings: domain.ContextSettings{RedactPII: true, PIISafePlatforms: []string{"api_server"}, HermesHome: "~/.hermes"},
			lines: []string{
				"**Source:** Api_Server (DM with " + domain.RedactUserID("client-7") + ")",
				"**Connected Platforms:** local (files on this machine)",
			},
			absent: []string{"client-7", "conn-7"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := domain.SessionContextPrompt(tt.src, tt.keys, tt.settings)
			path := filepath.Join("testdata", "context", tt.name+".golden")
			if *updateGoldens {
				if err := os.WriteFile(path, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden: %v (run go test ./domain -run TestSessionContextPrompt -update)", err)
			}
			if diff := cmp.Diff(string(want), got+"\n"); diff != "" {
				t.Errorf("SessionContextPrompt(%s) differs from %s (-want +got):\n%s", tt.name, path, diff)
			}
			lines := strings.Split(got, "\n")
			if lines[0] != "## Current Session Context" || lines[1] != "" {
				t.Errorf("prompt starts %q, want the heading and a blank line", lines[:2])
			}
			if last := lines[len(lines)-1]; last != "*For explicit targeting, use `\"platform:chat_id\"` format if the user provides a specific chat ID.*" {
				t.Errorf("prompt ends %q, want the explicit targeting line", last)
			}
			for _, l := range tt.lines {
				if !containsLine(lines, l) {
					t.Errorf("prompt has no line %q:\n%s", l, got)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(got, a) {
					t.Errorf("prompt contains %q:\n%s", a, got)
				}
			}
		})
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

func TestSessionContextPrompt_IsStablePerLane(t *testing.T) {
	// A shared thread: another sender's message must not change the prompt
	// (it would bust the prompt cache).
	a := domain.SessionSource{Platform: "telegram", ChatID: "-100", ChatType: "group", ThreadID: "7", UserID: "1", UserName: "Alice"}
	b := a
	b.UserID, b.UserName = "2", "Bob"
	keys := domain.DefaultKeyOptions()
	if pa, pb := domain.SessionContextPrompt(a, keys, promptSettings()), domain.SessionContextPrompt(b, keys, promptSettings()); pa != pb {
		t.Errorf("prompts of two senders in a shared thread differ:\n%s\n---\n%s", pa, pb)
	}
}

func TestPlatformTitle(t *testing.T) {
	tests := []struct{ in, want string }{
		{"telegram", "Telegram"},
		{"discord", "Discord"},
		{"bluebubbles", "Bluebubbles"},
		{"api_server", "Api_Server"},
		{"x1y", "X1Y"},
		{"WhatsApp", "Whatsapp"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := domain.PlatformTitle(tt.in); got != tt.want {
			t.Errorf("PlatformTitle(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestInboundText(t *testing.T) {
	group := domain.SessionSource{Platform: "discord", ChatID: "c1", ChatType: "group", UserID: "u1", UserName: "Alice"}
	thread := group
	thread.ThreadID = "t1"
	dmSrc := domain.SessionSource{Platform: "discord", ChatID: "dm1", ChatType: "dm", UserName: "Alice"}
	noName := thread
	noName.UserName = ""
	sharedKeys := domain.KeyOptions{GroupSessionsPerUser: false}
	backfill := "[Recent channel messages]\n[Bob] first\n[Charlie [bot]] second"
	tests := []struct {
		name    string
		text    string
		src     domain.SessionSource
		keys    domain.KeyOptions
		context string
		want    string
	}{
		{"shared group", "hello world", group, sharedKeys, "", "[Alice] hello world"},
		{"shared thread", "hello world", thread, domain.DefaultKeyOptions(), "", "[Alice] hello world"},
		{"per-user group", "hello world", group, domain.DefaultKeyOptions(), "", "hello world"},
		{"dm", "hello world", dmSrc, sharedKeys, "", "hello world"},
		{"shared without a name", "hello world", noName, sharedKeys, "", "hello world"},
		{"back-fill is not prefixed", "hey everyone", group, sharedKeys, backfill, backfill + "\n\n[New message]\n[Alice] hey everyone"},
		{"back-fill in a dm", "hey everyone", dmSrc, sharedKeys, backfill, backfill + "\n\n[New message]\nhey everyone"},
	}
	for _, tt := range tests {
		if got := domain.InboundText(tt.text, tt.src, tt.keys, tt.context); got != tt.want {
			t.Errorf("%s: InboundText(%q) = %q, want %q", tt.name, tt.text, got, tt.want)
		}
	}
}
