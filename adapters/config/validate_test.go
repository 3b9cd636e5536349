package config_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hermes/adapters/config"
)

func TestValidate(t *testing.T) {
	const token = "0123456789abcdef"
	tests := []struct {
		name   string
		modify func(c *config.Config)
		want   []config.Error
	}{
		{name: "defaults", modify: func(*config.Config) {}},
		{name: "localhost", modify: func(c *config.Config) { c.API.Addr = "localhost:1" }},
		{name: "LOCALHOST", modify: func(c *config.Config) { c.API.Addr = "LOCALHOST:1" }},
		{name: "127.0.0.0/8", modify: func(c *config.Config) { c.API.Addr = "127.9.9.9:1" }},
		{name: "::1", modify: func(c *config.Config) { c.API.Addr = "[::1]:1" }},
		{name: "non-loopback with token", modify: func(c *config.Config) { c.API.Addr = "0.0.0.0:1"; c.API.Token = token }},
		{
			name:   "all interfaces",
			modify: func(c *config.Config) { c.API.Addr = "0.0.0.0:8642" },
			want:   []config.Error{{Path: "api.addr", Reason: `"0.0.0.0:8642": binding a non-loopback address requires api.token`}},
		},
		{
			name:   "empty host",
			modify: func(c *config.Config) { c.API.Addr = ":8642" },
			want:   []config.Error{{Path: "api.addr", Reason: `":8642": binding a non-loopback address requires api.token`}},
		},
		{
			name:   "host name",
			modify: func(c *config.Config) { c.API.Addr = "gateway.lan:8642" },
			want:   []config.Error{{Path: "api.addr", Reason: `"gateway.lan:8642": binding a non-loopback address requires api.token`}},
		},
		{
			name:   "IPv6 any",
			modify: func(c *config.Config) { c.API.Addr = "[::]:8642" },
			want:   []config.Error{{Path: "api.addr", Reason: `"[::]:8642": binding a non-loopback address requires api.token`}},
		},
		{name: "followers just below connections", modify: func(c *config.Config) { c.API.MaxConnections = 4; c.API.MaxFollowers = 3 }},
		{
			name:   "followers as many as connections",
			modify: func(c *config.Config) { c.API.MaxConnections = 4; c.API.MaxFollowers = 4 },
			want:   []config.Error{{Path: "api.max_followers", Reason: "4: must be below api.max_connections (4), so clients other than event streams keep room"}},
		},
		{name: "token with inner spaces", modify: func(c *config.Config) { c.API.Token = "0123 4567 89ab cdef" }},
		{
			name:   "short token",
			modify: func(c *config.Config) { c.API.Token = "0123456789abcde" },
			want:   []config.Error{{Path: "api.token", Reason: "has fewer than 16 non-space characters"}},
		},
		{
			name:   "blank token",
			modify: func(c *config.Config) { c.API.Token = " " },
			want:   []config.Error{{Path: "api.token", Reason: "is blank, which would turn auth off: unset it or give at least 16 non-space characters"}},
		},
		{
			name:   "16 spaces",
			modify: func(c *config.Config) { c.API.Token = strings.Repeat(" ", 16) },
			want:   []config.Error{{Path: "api.token", Reason: "is blank, which would turn auth off: unset it or give at least 16 non-space characters"}},
		},
		{
			name:   "16 characters counting spaces",
			modify: func(c *config.Config) { c.API.Token = "0123 4567 89ab c" },
			want:   []config.Error{{Path: "api.token", Reason: "has fewer than 16 non-space characters"}},
		},
		{
			name:   "token with a trailing newline",
			modify: func(c *config.Config) { c.API.Token = "0123456789abcdef\n" },
			want:   []config.Error{{Path: "api.token", Reason: "has leading or trailing white space, which an Authorization header cannot carry"}},
		},
		{
			name: "allowed hosts and origins",
			modify: func(c *config.Config) {
				c.API.AllowedHosts = []string{"gateway.lan", "192.168.1.5", "[fd00::1]", "fd00::2"}
				c.API.AllowedOrigins = []string{"http://gateway.lan:8642", "https://hermes.example"}
			},
		},
		{
			name: "bad allowed hosts and origins",
			modify: func(c *config.Config) {
				c.API.AllowedHosts = []string{"gateway.lan:8642"}
				c.API.AllowedOrigins = []string{"https://hermes.example/ui"}
			},
			want: []config.Error{
				{Path: "api.allowed_hosts", Reason: `"gateway.lan:8642" is not a host name or IP address without a port`},
				{Path: "api.allowed_origins", Reason: `"https://hermes.example/ui" is not an origin scheme://host[:port] (http or https, no path)`},
			},
		},
		{
			name:   "not host:port",
			modify: func(c *config.Config) { c.API.Addr = "127.0.0.1" },
			want:   []config.Error{{Path: "api.addr", Reason: `"127.0.0.1" is not host:port (missing port in address)`}},
		},
		{
			name: "ranges and enums",
			modify: func(c *config.Config) {
				c.SessionReset.Mode = "weekly"
				c.SessionReset.AtHour = 24
				c.Sessions.MinIntervalHours = -1
				c.Expiry.Interval = 0
				c.Timezone = "Not/AZone"
				c.Platforms = map[string]config.ResetPolicy{"x": {Mode: "idle", IdleMinutes: -2}}
				c.ResetByType = map[string]config.ResetPolicy{"dm": {Mode: "", AtHour: 1}}
			},
			want: []config.Error{
				{Path: "session_reset.mode", Reason: `"weekly" is not one of none, idle, daily, both`},
				{Path: "session_reset.at_hour", Reason: "24 is not between 0 and 23"},
				{Path: "sessions.min_interval_hours", Reason: "-1 is negative"},
				{Path: "timezone", Reason: `"Not/AZone" is not a known IANA time zone`},
				{Path: "expiry.interval_seconds", Reason: "0 is less than 1"},
				{Path: "platforms.x.session_reset.idle_minutes", Reason: "-2 is negative"},
				{Path: "reset_by_type.dm.mode", Reason: `"" is not one of none, idle, daily, both`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default()
			tt.modify(&c)
			if diff := cmp.Diff(tt.want, configErrors(t, c.Validate())); diff != "" {
				t.Errorf("Validate() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	docs := config.Describe()
	seenKey := map[string]bool{}
	seenEnv := map[string]string{}
	for _, d := range docs {
		if seenKey[d.Key] {
			t.Errorf("Describe() lists %s twice", d.Key)
		}
		seenKey[d.Key] = true
		if d.Type == "" || d.Description == "" {
			t.Errorf("Describe() entry %+v lacks a type or description", d)
		}
		perBlock := strings.Contains(d.Key, "<") || d.Key == "gateway.session_reset"
		if perBlock != (len(d.Env) == 0) {
			t.Errorf("Describe() entry %s has env %q; want env exactly for the scalar keys", d.Key, d.Env)
		}
		for _, e := range d.Env {
			if other, ok := seenEnv[e]; ok {
				t.Errorf("env %s names both %s and %s", e, other, d.Key)
			}
			seenEnv[e] = d.Key
		}
		if !perBlock {
			want := "HERMES_" + strings.ToUpper(strings.ReplaceAll(d.Key, ".", "_"))
			if d.Env[0] != want {
				t.Errorf("Describe() entry %s: Env[0] = %s, want %s", d.Key, d.Env[0], want)
			}
			// Every scalar key can be set by a flag, and its documented
			// default loads back as the default.
			value := strings.NewReplacer("[", "", "]", "").Replace(d.Default)
			got, err := config.Load(config.LoadOptions{Home: t.TempDir(), Flags: map[string]string{d.Key: value}})
			if err != nil {
				t.Errorf("Load(--%s=%q) error = %v", d.Key, value, err)
			} else if diff := cmp.Diff(config.Default(), got); diff != "" {
				t.Errorf("Load(--%s=%q) is not the default (-want +got):\n%s", d.Key, value, diff)
			}
		}
	}
	for _, k := range []string{
		"session_reset.mode", "session_reset.at_hour", "session_reset.idle_minutes", "session_reset.notify",
		"session_reset.notify_exclude_platforms", "platforms.<name>.session_reset.mode", "reset_by_type.<chat_type>.mode",
		"group_sessions_per_user", "thread_sessions_per_user", "session_store_max_age_days",
		"agent.gateway_auto_continue_freshness", "agent.restart_drain_timeout", "agent.shutdown_timeout",
		"sessions.auto_prune", "sessions.retention_days", "sessions.min_interval_hours",
		"sessions.vacuum_after_prune", "sessions.write_sessions_json", "privacy.redact_pii", "timezone",
		"api.addr", "api.token", "api.max_body_bytes", "api.allowed_hosts", "api.allowed_origins", "api.body_read_timeout_seconds",
		"api.max_connections", "api.max_followers", "api.follower_buffer_bytes", "expiry.interval_seconds", "recovery.recent_seconds",
		"multiplex_profiles", "profile", "gateway.session_reset",
	} {
		if !seenKey[k] {
			t.Errorf("Describe() does not list %s", k)
		}
	}
	if seenEnv["HERMES_RESTART_DRAIN_TIMEOUT"] != "agent.restart_drain_timeout" ||
		seenEnv["HERMES_AUTO_CONTINUE_FRESHNESS"] != "agent.gateway_auto_continue_freshness" {
		t.Errorf("Describe() does not list Hermes' env aliases: %v", seenEnv)
	}
}
