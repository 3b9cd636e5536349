package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hermes/adapters/config"
)

// home makes a temporary HERMES_HOME holding config.yaml with body, or no
// file at all when body is "".
func home(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if body != "" {
		if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func load(t *testing.T, body string, env []string, flags map[string]string) (config.Config, error) {
	t.Helper()
	return config.Load(config.LoadOptions{Home: home(t, body), Environ: env, Flags: flags})
}

func mustLoad(t *testing.T, body string, env []string, flags map[string]string) config.Config {
	t.Helper()
	c, err := load(t, body, env, flags)
	if err != nil {
		t.Fatalf("Load() error = %v", err)
	}
	return c
}

// configErrors flattens a joined error into its *config.Error values,
// failing the test on anything else.
func configErrors(t *testing.T, err error) []config.Error {
	t.Helper()
	var out []config.Error
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var ce *config.Error
		if !errors.As(e, &ce) {
			t.Errorf("error %v (%T) is not a *config.Error", e, e)
			return
		}
		out = append(out, *ce)
	}
	if err != nil {
		walk(err)
	}
	return out
}

func TestLoadDefaultsWithoutFile(t *testing.T) {
	got := mustLoad(t, "", nil, nil)
	want := config.Config{
		SessionReset: config.ResetPolicy{
			Mode: "both", AtHour: 4, IdleMinutes: 1440, Notify: true,
			NotifyExcludePlatforms: []string{"api_server", "webhook"},
		},
		GroupSessionsPerUser:   true,
		ThreadSessionsPerUser:  false,
		SessionStoreMaxAgeDays: 90,
		Agent:                  config.Agent{GatewayAutoContinueFreshness: time.Hour, RestartDrainTimeout: 180 * time.Second, ShutdownTimeout: time.Minute},
		Sessions:               config.Sessions{AutoPrune: false, RetentionDays: 90, MinIntervalHours: 24, VacuumAfterPrune: true, WriteSessionsJSON: true},
		Privacy:                config.Privacy{RedactPII: false},
		Timezone:               "",
		API:                    config.API{Addr: "127.0.0.1:8642", Token: "", MaxBodyBytes: 1048576, BodyReadTimeout: 30 * time.Second, MaxConnections: 1024, MaxFollowers: 64, FollowerBufferBytes: 1 << 20},
		Expiry:                 config.Expiry{Interval: 300 * time.Second},
		Recovery:               config.Recovery{Recent: 120 * time.Second, StuckLoopThreshold: 3},
		Hooks:                  config.Hooks{StartAtHead: true, MaxInFlight: 8},
		Gateway:                config.Gateway{BusyInputMode: "interrupt", QueueMaxItems: 32, QueueTTL: 24 * time.Hour},
		Storage:                config.Storage{BrokenRetention: 7 * 24 * time.Hour},
		Memory:                 config.Memory{GCPercent: 100, CachedLanes: 200_000},
		Backup:                 config.Backup{Keep: 7},
		Node:                   config.Node{Lease: time.Minute},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load() without a file mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(config.Default(), got); diff != "" {
		t.Errorf("Load() without a file differs from Default() (-want +got):\n%s", diff)
	}
}

func TestLoadEmptyAndCommentOnlyFiles(t *testing.T) {
	for _, body := range []string{"\n", "# nothing here\n", "---\n", "~\n"} {
		got := mustLoad(t, body, nil, nil)
		if diff := cmp.Diff(config.Default(), got); diff != "" {
			t.Errorf("Load(%q) mismatch (-want +got):\n%s", body, diff)
		}
	}
}

func TestLoadEveryKeyFromFile(t *testing.T) {
	body := `
session_reset:
  mode: idle
  at_hour: 6
  idle_minutes: 90
  notify: false
  notify_exclude_platforms: [webhook]
platforms:
  telegram:
    session_reset:
      mode: daily
      at_hour: 2
      idle_minutes: 30
      notify: true
      notify_exclude_platforms: []
reset_by_type:
  thread:
    mode: none
group_sessions_per_user: false
thread_sessions_per_user: true
session_store_max_age_days: 0
agent:
  gateway_auto_continue_freshness: 0
  restart_drain_timeout: 2.5
  shutdown_timeout: 20
sessions:
  auto_prune: true
  retention_days: 30
  min_interval_hours: 0
  vacuum_after_prune: false
  write_sessions_json: false
privacy:
  redact_pii: true
timezone: Europe/Berlin
api:
  addr: "[::1]:9000"
  token: 0123456789abcdef
  max_body_bytes: 2048
  body_read_timeout_seconds: 7.5
  max_connections: 100
  max_followers: 10
  follower_buffer_bytes: 65536
expiry:
  interval_seconds: 60
recovery:
  recent_seconds: 0
  stuck_loop_threshold: 5
gateway:
  busy_input_mode: queue
  queue:
    max_items: 5
    ttl_seconds: 3600
storage:
  broken_retention_seconds: 3600
memory:
  gc_percent: 80
  soft_limit_mib: 256
  cached_lanes: 50000
backup:
  interval_seconds: 21600
  dir: /var/backups/hermes
  keep: 3
multiplex_profiles: true
profile: coder
node:
  lease_seconds: 30
`
	got := mustLoad(t, body, nil, nil)
	want := config.Config{
		SessionReset: config.ResetPolicy{Mode: "idle", AtHour: 6, IdleMinutes: 90, Notify: false, NotifyExcludePlatforms: []string{"webhook"}},
		Platforms: map[string]config.ResetPolicy{
			"telegram": {Mode: "daily", AtHour: 2, IdleMinutes: 30, Notify: true, NotifyExcludePlatforms: []string{}},
		},
		ResetByType: map[string]config.ResetPolicy{
			"thread": {Mode: "none", AtHour: 4, IdleMinutes: 1440, Notify: true, NotifyExcludePlatforms: []string{"api_server", "webhook"}},
		},
		GroupSessionsPerUser:   false,
		ThreadSessionsPerUser:  true,
		SessionStoreMaxAgeDays: 0,
		Agent:                  config.Agent{GatewayAutoContinueFreshness: 0, RestartDrainTimeout: 2500 * time.Millisecond, ShutdownTimeout: 20 * time.Second},
		Sessions:               config.Sessions{AutoPrune: true, RetentionDays: 30, MinIntervalHours: 0, VacuumAfterPrune: false, WriteSessionsJSON: false},
		Privacy:                config.Privacy{RedactPII: true},
		Timezone:               "Europe/Berlin",
		API:                    config.API{Addr: "[::1]:9000", Token: "0123456789abcdef", MaxBodyBytes: 2048, BodyReadTimeout: 7500 * time.Millisecond, MaxConnections: 100, MaxFollowers: 10, FollowerBufferBytes: 64 << 10},
		Expiry:                 config.Expiry{Interval: time.Minute},
		Recovery:               config.Recovery{Recent: 0, StuckLoopThreshold: 5},
		Hooks:                  config.Hooks{StartAtHead: true, MaxInFlight: 8},
		Gateway:                config.Gateway{BusyInputMode: "queue", QueueMaxItems: 5, QueueTTL: time.Hour},
		Storage:                config.Storage{BrokenRetention: time.Hour},
		Memory:                 config.Memory{GCPercent: 80, SoftLimitMiB: 256, CachedLanes: 50_000},
		Backup:                 config.Backup{Interval: 6 * time.Hour, Dir: "/var/backups/hermes", Keep: 3},
		PlatformSettings:       map[string]config.Platform{"telegram": {}},
		MultiplexProfiles:      true,
		Profile:                "coder",
		Node:                   config.Node{Lease: 30 * time.Second},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load() mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadBooleans(t *testing.T) {
	tests := []struct {
		written string
		want    bool
	}{
		{"yes", true}, {"Yes", true}, {"YES", true}, {"on", true}, {"On", true}, {"ON", true},
		{"true", true}, {"True", true}, {"y", true}, {"Y", true}, {`"yes"`, true}, {"1", true},
		{"no", false}, {"No", false}, {"NO", false}, {"off", false}, {"Off", false}, {"OFF", false},
		{"false", false}, {"FALSE", false}, {"n", false}, {"N", false}, {"'off'", false}, {"0", false},
	}
	for _, tt := range tests {
		t.Run(tt.written, func(t *testing.T) {
			// Each default is the opposite of want for one of the two keys,
			// so both directions are exercised.
			body := "group_sessions_per_user: " + tt.written + "\nsessions:\n  auto_prune: " + tt.written + "\n"
			got := mustLoad(t, body, nil, nil)
			if got.GroupSessionsPerUser != tt.want || got.Sessions.AutoPrune != tt.want {
				t.Errorf("file %q: group_sessions_per_user, sessions.auto_prune = %v, %v, want %v",
					tt.written, got.GroupSessionsPerUser, got.Sessions.AutoPrune, tt.want)
			}
			raw := strings.Trim(tt.written, `"'`)
			got = mustLoad(t, "", []string{"HERMES_PRIVACY_REDACT_PII=" + raw}, map[string]string{"multiplex_profiles": raw})
			if got.Privacy.RedactPII != tt.want || got.MultiplexProfiles != tt.want {
				t.Errorf("env/flag %q: privacy.redact_pii, multiplex_profiles = %v, %v, want %v",
					raw, got.Privacy.RedactPII, got.MultiplexProfiles, tt.want)
			}
		})
	}
}

func TestLoadModeOffIsNone(t *testing.T) {
	// PyYAML reads `mode: off` as False, which Hermes treats as no reset.
	for _, written := range []string{"off", "false", "no", "OFF", "none", "None"} {
		got := mustLoad(t, "session_reset:\n  mode: "+written+"\n", nil, nil)
		if got.SessionReset.Mode != "none" {
			t.Errorf("mode: %s loads as %q, want none", written, got.SessionReset.Mode)
		}
	}
	got := mustLoad(t, "", []string{"HERMES_SESSION_RESET_MODE=off"}, nil)
	if got.SessionReset.Mode != "none" {
		t.Errorf("HERMES_SESSION_RESET_MODE=off loads as %q, want none", got.SessionReset.Mode)
	}
}

func TestLoadNullsAreDefaults(t *testing.T) {
	body := `
session_reset:
  mode: ~
  at_hour: null
  idle_minutes:
  notify: ~
  notify_exclude_platforms: ~
platforms:
reset_by_type: ~
group_sessions_per_user: ~
thread_sessions_per_user: ~
session_store_max_age_days: ~
agent:
  gateway_auto_continue_freshness: ~
  restart_drain_timeout: ~
sessions: ~
privacy:
  redact_pii: ~
timezone: ~
api:
  addr: ~
  token: ~
  max_body_bytes: ~
expiry: {interval_seconds: ~}
recovery: {recent_seconds: null}
multiplex_profiles: ~
profile: ~
`
	got := mustLoad(t, body, nil, nil)
	if diff := cmp.Diff(config.Default(), got); diff != "" {
		t.Errorf("Load() of nulls mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadPolicies(t *testing.T) {
	def := config.DefaultResetPolicy()
	tests := []struct {
		name       string
		body       string
		wantPlat   map[string]config.ResetPolicy
		wantByType map[string]config.ResetPolicy
	}{
		{
			name: "missing keys take Hermes' defaults, not the top-level policy",
			body: `
session_reset: {mode: none, at_hour: 9, idle_minutes: 5, notify: no}
platforms:
  discord:
    session_reset: {mode: idle}
reset_by_type:
  group: {at_hour: 1}
`,
			wantPlat:   map[string]config.ResetPolicy{"discord": {Mode: "idle", AtHour: 4, IdleMinutes: 1440, Notify: true, NotifyExcludePlatforms: def.NotifyExcludePlatforms}},
			wantByType: map[string]config.ResetPolicy{"group": {Mode: "both", AtHour: 1, IdleMinutes: 1440, Notify: true, NotifyExcludePlatforms: def.NotifyExcludePlatforms}},
		},
		{
			name: "explicit nulls are the defaults",
			body: `
platforms:
  slack:
    session_reset: {mode: daily, at_hour: ~, idle_minutes: ~, notify: ~, notify_exclude_platforms: ~}
reset_by_type:
  dm: {mode: ~}
`,
			wantPlat:   map[string]config.ResetPolicy{"slack": {Mode: "daily", AtHour: 4, IdleMinutes: 1440, Notify: true, NotifyExcludePlatforms: def.NotifyExcludePlatforms}},
			wantByType: map[string]config.ResetPolicy{"dm": def},
		},
		{
			name: "a null or absent block is no override; other platform settings are ignored",
			body: `
platforms:
  telegram: {token: "123:abc", enabled: true}
  discord:
    session_reset: ~
  matrix: ~
reset_by_type:
  thread: ~
`,
		},
		{
			name: "an empty block is the default policy",
			body: `
platforms:
  whatsapp: {session_reset: {}}
reset_by_type:
  channel: {}
`,
			wantPlat:   map[string]config.ResetPolicy{"whatsapp": def},
			wantByType: map[string]config.ResetPolicy{"channel": def},
		},
		{
			name: "anchors and merge keys",
			body: `
reset_by_type:
  group: &quiet {mode: idle, idle_minutes: 60, notify: off}
  thread:
    <<: *quiet
    idle_minutes: 30
platforms:
  signal:
    session_reset: *quiet
`,
			wantPlat: map[string]config.ResetPolicy{"signal": {Mode: "idle", AtHour: 4, IdleMinutes: 60, Notify: false, NotifyExcludePlatforms: def.NotifyExcludePlatforms}},
			wantByType: map[string]config.ResetPolicy{
				"group":  {Mode: "idle", AtHour: 4, IdleMinutes: 60, Notify: false, NotifyExcludePlatforms: def.NotifyExcludePlatforms},
				"thread": {Mode: "idle", AtHour: 4, IdleMinutes: 30, Notify: false, NotifyExcludePlatforms: def.NotifyExcludePlatforms},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustLoad(t, tt.body, nil, nil)
			if diff := cmp.Diff(tt.wantPlat, got.Platforms); diff != "" {
				t.Errorf("Platforms mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantByType, got.ResetByType); diff != "" {
				t.Errorf("ResetByType mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadGatewaySessionResetFallback(t *testing.T) {
	tests := []struct {
		name string
		body string
		want config.ResetPolicy
	}{
		{
			name: "only gateway.session_reset",
			body: "gateway:\n  session_reset:\n    mode: daily\n    at_hour: 3\n",
			want: config.ResetPolicy{Mode: "daily", AtHour: 3, IdleMinutes: 1440, Notify: true, NotifyExcludePlatforms: []string{"api_server", "webhook"}},
		},
		{
			name: "top-level wins",
			body: "session_reset: {mode: idle}\ngateway:\n  session_reset:\n    mode: daily\n",
			want: config.ResetPolicy{Mode: "idle", AtHour: 4, IdleMinutes: 1440, Notify: true, NotifyExcludePlatforms: []string{"api_server", "webhook"}},
		},
		{
			name: "top-level null counts as missing",
			body: "session_reset: ~\ngateway:\n  session_reset: {mode: none}\n",
			want: config.ResetPolicy{Mode: "none", AtHour: 4, IdleMinutes: 1440, Notify: true, NotifyExcludePlatforms: []string{"api_server", "webhook"}},
		},
		{
			name: "gateway without session_reset",
			body: "gateway:\n  busy_input_mode: queue\n",
			want: config.DefaultResetPolicy(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustLoad(t, tt.body, nil, nil)
			if diff := cmp.Diff(tt.want, got.SessionReset); diff != "" {
				t.Errorf("SessionReset mismatch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("errors name the gateway path", func(t *testing.T) {
		_, err := load(t, "gateway:\n  session_reset:\n    at_hour: 30\n", nil, nil)
		errs := configErrors(t, err)
		if len(errs) != 1 || errs[0].Path != "gateway.session_reset.at_hour" || errs[0].Line != 3 {
			t.Errorf("Load() errors = %+v, want one at gateway.session_reset.at_hour line 3", errs)
		}
	})
}

func TestLoadIgnoresUnknownKeys(t *testing.T) {
	body := `
model:
  default: anthropic/claude
  provider: openrouter
toolsets: [web, terminal]
terminal: {backend: local, timeout: 180}
agent:
  max_turns: 90
  reasoning_effort: high
  restart_drain_timeout: 30
session_reset:
  mode: daily
  bg_process_max_age_hours: 24
sessions:
  something_new: [1, 2]
api:
  cors: {origins: ["*"]}
gateway:
  streaming: true
compression: ~
42: answer
`
	got := mustLoad(t, body, []string{"HERMES_MAX_ITERATIONS=90", "HERMES_HOME_MODE=x", "OTHER=1"}, nil)
	want := config.Default()
	want.Agent.RestartDrainTimeout = 30 * time.Second
	want.SessionReset.Mode = "daily"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load() mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadDuplicateKeyLaterWins(t *testing.T) {
	// PyYAML keeps the last of repeated keys; so does Load.
	got := mustLoad(t, "session_reset: {mode: idle, at_hour: 1}\nsession_reset: {mode: daily}\nprofile: a\nprofile: b\n", nil, nil)
	if got.SessionReset.Mode != "daily" || got.SessionReset.AtHour != 4 || got.Profile != "b" {
		t.Errorf("Load() = mode %q, at_hour %d, profile %q; want daily, 4, b", got.SessionReset.Mode, got.SessionReset.AtHour, got.Profile)
	}
}

func TestLoadPrecedence(t *testing.T) {
	const (
		file = "api:\n  addr: 127.0.0.1:1001\n"
		env  = "HERMES_API_ADDR=127.0.0.1:1002"
		flag = "127.0.0.1:1003"
	)
	tests := []struct {
		name  string
		body  string
		env   []string
		flags map[string]string
		want  string
	}{
		{name: "defaults", want: "127.0.0.1:8642"},
		{name: "file over defaults", body: file, want: "127.0.0.1:1001"},
		{name: "env over file", body: file, env: []string{env}, want: "127.0.0.1:1002"},
		{name: "flag over env", body: file, env: []string{env}, flags: map[string]string{"api.addr": flag}, want: flag},
		{name: "flag over file", body: file, flags: map[string]string{"api.addr": flag}, want: flag},
		{name: "empty env is unset", body: file, env: []string{"HERMES_API_ADDR="}, want: "127.0.0.1:1001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustLoad(t, tt.body, tt.env, tt.flags)
			if got.API.Addr != tt.want {
				t.Errorf("Load().API.Addr = %q, want %q", got.API.Addr, tt.want)
			}
		})
	}
}

func TestLoadEnvAndFlagValues(t *testing.T) {
	env := []string{
		"HERMES_SESSION_RESET_MODE=daily",
		"HERMES_SESSION_RESET_AT_HOUR= 7 ",
		"HERMES_SESSION_RESET_NOTIFY_EXCLUDE_PLATFORMS=webhook, api_server ,cli",
		"HERMES_SESSION_STORE_MAX_AGE_DAYS=7",
		"HERMES_AGENT_GATEWAY_AUTO_CONTINUE_FRESHNESS=-1",
		"HERMES_TIMEZONE=Asia/Tokyo",
		"HERMES_API_TOKEN=0123456789abcdef",
		"HERMES_EXPIRY_INTERVAL_SECONDS=0.5e1",
	}
	flags := map[string]string{"profile": "coder", "api.max_body_bytes": "4096", "session_reset.notify_exclude_platforms": ""}
	got := mustLoad(t, "", env, flags)
	want := config.Default()
	want.SessionReset.Mode = "daily"
	want.SessionReset.AtHour = 7
	want.SessionReset.NotifyExcludePlatforms = nil
	want.SessionStoreMaxAgeDays = 7
	want.Agent.GatewayAutoContinueFreshness = -time.Second
	want.Timezone = "Asia/Tokyo"
	want.API.Token = "0123456789abcdef"
	want.API.MaxBodyBytes = 4096
	want.Expiry.Interval = 5 * time.Second
	want.Profile = "coder"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load() mismatch (-want +got):\n%s", diff)
	}

	got = mustLoad(t, "", []string{"HERMES_SESSION_RESET_NOTIFY_EXCLUDE_PLATFORMS=webhook, api_server ,cli"}, nil)
	if diff := cmp.Diff([]string{"webhook", "api_server", "cli"}, got.SessionReset.NotifyExcludePlatforms); diff != "" {
		t.Errorf("notify_exclude_platforms from env mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadHermesEnvAliases(t *testing.T) {
	tests := []struct {
		name          string
		env           []string
		body          string
		wantDrain     time.Duration
		wantFreshness time.Duration
	}{
		{
			name:          "aliases alone",
			env:           []string{"HERMES_RESTART_DRAIN_TIMEOUT=60", "HERMES_AUTO_CONTINUE_FRESHNESS=600"},
			wantDrain:     time.Minute,
			wantFreshness: 10 * time.Minute,
		},
		{
			name: "HERMES_AGENT_ names win over the aliases",
			env: []string{
				"HERMES_RESTART_DRAIN_TIMEOUT=60", "HERMES_AGENT_RESTART_DRAIN_TIMEOUT=5",
				"HERMES_AUTO_CONTINUE_FRESHNESS=600", "HERMES_AGENT_GATEWAY_AUTO_CONTINUE_FRESHNESS=7",
			},
			wantDrain:     5 * time.Second,
			wantFreshness: 7 * time.Second,
		},
		{
			name:          "aliases win over the file",
			body:          "agent:\n  restart_drain_timeout: 1\n  gateway_auto_continue_freshness: 2\n",
			env:           []string{"HERMES_RESTART_DRAIN_TIMEOUT=60", "HERMES_AUTO_CONTINUE_FRESHNESS=600"},
			wantDrain:     time.Minute,
			wantFreshness: 10 * time.Minute,
		},
		{
			name:          "an empty HERMES_AGENT_ name falls through to the alias",
			env:           []string{"HERMES_AGENT_RESTART_DRAIN_TIMEOUT=", "HERMES_RESTART_DRAIN_TIMEOUT=0"},
			wantDrain:     0,
			wantFreshness: time.Hour,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustLoad(t, tt.body, tt.env, nil)
			if got.Agent.RestartDrainTimeout != tt.wantDrain || got.Agent.GatewayAutoContinueFreshness != tt.wantFreshness {
				t.Errorf("Load().Agent = %+v, want drain %v, freshness %v", got.Agent, tt.wantDrain, tt.wantFreshness)
			}
		})
	}

	t.Run("a bad alias names itself", func(t *testing.T) {
		_, err := load(t, "", []string{"HERMES_RESTART_DRAIN_TIMEOUT=soon"}, nil)
		want := []config.Error{{Source: "HERMES_RESTART_DRAIN_TIMEOUT", Path: "agent.restart_drain_timeout", Reason: `"soon" is not a number of seconds`}}
		if diff := cmp.Diff(want, configErrors(t, err)); diff != "" {
			t.Errorf("Load() errors mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestLoadErrors(t *testing.T) {
	const file = "FILE" // replaced by the config file's path
	tests := []struct {
		name      string
		body      string
		env       []string
		flags     map[string]string
		flagNames map[string]string
		want      []config.Error
	}{
		{
			name: "at_hour 25",
			body: "model: x\nsession_reset:\n  at_hour: 25\n",
			want: []config.Error{{Source: file, Line: 3, Path: "session_reset.at_hour", Reason: "25 is not between 0 and 23"}},
		},
		{
			name: "unknown mode",
			body: "session_reset:\n  mode: sometimes\n",
			want: []config.Error{{Source: file, Line: 2, Path: "session_reset.mode", Reason: `"sometimes" is not one of none, idle, daily, both`}},
		},
		{
			name: "mode on is not a mode",
			body: "session_reset:\n  mode: on\n",
			want: []config.Error{{Source: file, Line: 2, Path: "session_reset.mode", Reason: `"on" is not one of none, idle, daily, both`}},
		},
		{
			name: "negative idle_minutes",
			body: "session_reset:\n  idle_minutes: -1\n",
			want: []config.Error{{Source: file, Line: 2, Path: "session_reset.idle_minutes", Reason: "-1 is negative"}},
		},
		{
			name: "string where an int is wanted",
			body: "sessions:\n  retention_days: forever\n",
			want: []config.Error{{Source: file, Line: 2, Path: "sessions.retention_days", Reason: `"forever" is not an integer`}},
		},
		{
			name: "float where an int is wanted",
			body: "session_reset:\n  at_hour: 4.5\n",
			want: []config.Error{{Source: file, Line: 2, Path: "session_reset.at_hour", Reason: "4.5 is not an integer"}},
		},
		{
			name: "mapping where an int is wanted",
			body: "session_store_max_age_days:\n  days: 3\n",
			want: []config.Error{{Source: file, Line: 2, Path: "session_store_max_age_days", Reason: "want an integer, got a mapping"}},
		},
		{
			name: "retention_days below 1",
			body: "sessions:\n  retention_days: 0\n",
			want: []config.Error{{Source: file, Line: 2, Path: "sessions.retention_days", Reason: "0 is less than 1"}},
		},
		{
			name: "max_body_bytes out of range",
			body: "api:\n  max_body_bytes: 100\n",
			want: []config.Error{{Source: file, Line: 2, Path: "api.max_body_bytes", Reason: "100 is not between 1024 and 67108864"}},
		},
		{
			name: "body_read_timeout_seconds out of range",
			body: "api:\n  body_read_timeout_seconds: 0\n",
			want: []config.Error{{Source: file, Line: 2, Path: "api.body_read_timeout_seconds", Reason: "0 is not between 1 and 3600"}},
		},
		{
			name: "negative drain timeout",
			body: "agent:\n  restart_drain_timeout: -5\n",
			want: []config.Error{{Source: file, Line: 2, Path: "agent.restart_drain_timeout", Reason: "-5 is negative"}},
		},
		{
			name: "bad bool in the file",
			body: "privacy:\n  redact_pii: maybe\n",
			want: []config.Error{{Source: file, Line: 2, Path: "privacy.redact_pii", Reason: `"maybe" is not a boolean (true/false, yes/no, on/off, y/n, 1/0)`}},
		},
		{
			name: "scalar where a list is wanted",
			body: "session_reset:\n  notify_exclude_platforms: webhook\n",
			want: []config.Error{{Source: file, Line: 2, Path: "session_reset.notify_exclude_platforms", Reason: `want a list, got "webhook"`}},
		},
		{
			name: "bad timezone",
			body: "timezone: Mars/Olympus\n",
			want: []config.Error{{Source: file, Line: 1, Path: "timezone", Reason: `"Mars/Olympus" is not a known IANA time zone`}},
		},
		{
			name: "per-platform and per-type values",
			body: "platforms:\n  telegram:\n    session_reset:\n      at_hour: -1\nreset_by_type:\n  group:\n    mode: weekly\n",
			want: []config.Error{
				{Source: file, Line: 4, Path: "platforms.telegram.session_reset.at_hour", Reason: "-1 is not between 0 and 23"},
				{Source: file, Line: 7, Path: "reset_by_type.group.mode", Reason: `"weekly" is not one of none, idle, daily, both`},
			},
		},
		{
			name: "a section that is not a mapping",
			body: "agent: fast\n",
			want: []config.Error{{Source: file, Line: 1, Path: "agent", Reason: `want a mapping, got "fast"`}},
		},
		{
			name: "every problem is reported",
			body: "session_reset:\n  at_hour: 25\n  idle_minutes: -1\n",
			env:  []string{"HERMES_SESSIONS_AUTO_PRUNE=perhaps"},
			want: []config.Error{
				{Source: file, Line: 2, Path: "session_reset.at_hour", Reason: "25 is not between 0 and 23"},
				{Source: file, Line: 3, Path: "session_reset.idle_minutes", Reason: "-1 is negative"},
				{Source: "HERMES_SESSIONS_AUTO_PRUNE", Path: "sessions.auto_prune", Reason: `"perhaps" is not a boolean (true/false, yes/no, on/off, y/n, 1/0)`},
			},
		},
		{
			name: "bad bool in env",
			env:  []string{"HERMES_GROUP_SESSIONS_PER_USER=sure"},
			want: []config.Error{{Source: "HERMES_GROUP_SESSIONS_PER_USER", Path: "group_sessions_per_user", Reason: `"sure" is not a boolean (true/false, yes/no, on/off, y/n, 1/0)`}},
		},
		{
			name: "bad int in env",
			env:  []string{"HERMES_SESSION_RESET_AT_HOUR=4am"},
			want: []config.Error{{Source: "HERMES_SESSION_RESET_AT_HOUR", Path: "session_reset.at_hour", Reason: `"4am" is not an integer`}},
		},
		{
			name: "bad timezone in env",
			env:  []string{"HERMES_TIMEZONE=Nowhere/Land"},
			want: []config.Error{{Source: "HERMES_TIMEZONE", Path: "timezone", Reason: `"Nowhere/Land" is not a known IANA time zone`}},
		},
		{
			name: "bad addr in env",
			env:  []string{"HERMES_API_ADDR=localhost"},
			want: []config.Error{{Source: "HERMES_API_ADDR", Path: "api.addr", Reason: `"localhost" is not host:port (missing port in address)`}},
		},
		{
			name:      "bad flag, named as typed",
			flags:     map[string]string{"api.addr": "127.0.0.1:http"},
			flagNames: map[string]string{"api.addr": "--addr"},
			want:      []config.Error{{Source: "--addr", Path: "api.addr", Reason: `"127.0.0.1:http" has no numeric port between 0 and 65535`}},
		},
		{
			name:  "bad flag, default name",
			flags: map[string]string{"expiry.interval_seconds": "0"},
			want:  []config.Error{{Source: "--expiry.interval_seconds", Path: "expiry.interval_seconds", Reason: "0 is less than 1"}},
		},
		{
			name:  "flag for an unknown key",
			flags: map[string]string{"platforms.telegram.session_reset.mode": "idle"},
			want:  []config.Error{{Source: "--platforms.telegram.session_reset.mode", Path: "platforms.telegram.session_reset.mode", Reason: "is not a configuration key that flags can set"}},
		},
		{
			name: "non-loopback addr without token, from the file",
			body: "api:\n  addr: 0.0.0.0:8642\n",
			want: []config.Error{{Source: file, Line: 2, Path: "api.addr", Reason: `"0.0.0.0:8642": binding a non-loopback address requires api.token`}},
		},
		{
			name:  "non-loopback addr without token, from a flag",
			flags: map[string]string{"api.addr": ":8642"},
			want:  []config.Error{{Source: "--api.addr", Path: "api.addr", Reason: `":8642": binding a non-loopback address requires api.token`}},
		},
		{
			name: "short token",
			env:  []string{"HERMES_API_TOKEN=hunter2"},
			want: []config.Error{{Source: "HERMES_API_TOKEN", Path: "api.token", Reason: "has fewer than 16 non-space characters"}},
		},
		{
			// A blank variable counts as unset for every other key; a
			// blank token would turn auth off while looking set.
			name: "blank token in env",
			env:  []string{"HERMES_API_TOKEN= "},
			want: []config.Error{{Source: "HERMES_API_TOKEN", Path: "api.token", Reason: "is blank, which would turn auth off: unset it or give at least 16 non-space characters"}},
		},
		{
			name: "15-character token in the file",
			body: "api:\n  token: 0123456789abcde\n",
			want: []config.Error{{Source: file, Line: 2, Path: "api.token", Reason: "has fewer than 16 non-space characters"}},
		},
		{
			name: "blank token in the file",
			body: "api:\n  token: \"                \"\n",
			want: []config.Error{{Source: file, Line: 2, Path: "api.token", Reason: "is blank, which would turn auth off: unset it or give at least 16 non-space characters"}},
		},
		{
			name: "allowed origin with a path, from env",
			env:  []string{"HERMES_API_ALLOWED_ORIGINS=http://localhost:3000, http://ui.lan/app"},
			want: []config.Error{{Source: "HERMES_API_ALLOWED_ORIGINS", Path: "api.allowed_origins", Reason: `"http://ui.lan/app" is not an origin scheme://host[:port] (http or https, no path)`}},
		},
		{
			name: "malformed YAML",
			body: "session_reset:\n  mode: idle\n at_hour: 4\n",
			// yaml.v3 reports the line of the block the bad line breaks.
			want: []config.Error{{Source: file, Line: 2, Reason: "not valid YAML: did not find expected key"}},
		},
		{
			name: "malformed YAML: tab indentation",
			body: "session_reset:\n\tmode: idle\n",
			want: []config.Error{{Source: file, Line: 2, Reason: "not valid YAML: found character that cannot start any token"}},
		},
		{
			name: "not a mapping",
			body: "- a\n- b\n",
			want: []config.Error{{Source: file, Line: 1, Reason: "the document is a list, not a mapping of keys"}},
		},
		{
			name: "two documents",
			body: "profile: a\n---\nprofile: b\n",
			want: []config.Error{{Source: file, Line: 2, Reason: "holds more than one YAML document"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := home(t, tt.body)
			path := filepath.Join(dir, "config.yaml")
			c, err := config.Load(config.LoadOptions{Home: dir, Environ: tt.env, Flags: tt.flags, FlagNames: tt.flagNames})
			if err == nil {
				t.Fatalf("Load() = %+v, nil; want an error", c)
			}
			want := make([]config.Error, len(tt.want))
			for i, e := range tt.want {
				if e.Source == file {
					e.Source = path
				}
				want[i] = e
			}
			if diff := cmp.Diff(want, configErrors(t, err)); diff != "" {
				t.Errorf("Load() errors mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(config.Config{}, c); diff != "" {
				t.Errorf("Load() config on error is not zero (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorString(t *testing.T) {
	tests := []struct {
		err  config.Error
		want string
	}{
		{config.Error{Source: "config.yaml", Line: 3, Path: "session_reset.at_hour", Reason: "25 is not between 0 and 23"},
			"config.yaml:3: session_reset.at_hour: 25 is not between 0 and 23"},
		{config.Error{Source: "HERMES_API_ADDR", Path: "api.addr", Reason: "bad"}, "HERMES_API_ADDR: api.addr: bad"},
		{config.Error{Source: "config.yaml", Line: 1, Reason: "not valid YAML: x"}, "config.yaml:1: not valid YAML: x"},
		{config.Error{Path: "api.token", Reason: "has fewer than 16 non-space characters"}, "api.token: has fewer than 16 non-space characters"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("(%+v).Error() = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestLoadNeverQuotesTheToken(t *testing.T) {
	const token = "s3cr3t"
	_, err := load(t, "api:\n  addr: 0.0.0.0:1\n  token: "+token+"\n", nil, nil)
	if err == nil || strings.Contains(err.Error(), token) {
		t.Errorf("Load() error = %v, want an error that does not contain the token", err)
	}
}

func TestLoadConfigPath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "elsewhere.yaml")
	if err := os.WriteFile(path, []byte("profile: other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := config.Load(config.LoadOptions{Home: home(t, "profile: home\n"), ConfigPath: path})
	if err != nil || got.Profile != "other" {
		t.Errorf("Load(ConfigPath) = %q, %v; want other, nil", got.Profile, err)
	}
	got, err = config.Load(config.LoadOptions{Environ: []string{"HERMES_HOME=" + home(t, "profile: env-home\n")}})
	if err != nil || got.Profile != "env-home" {
		t.Errorf("Load(HERMES_HOME) = %q, %v; want env-home, nil", got.Profile, err)
	}
	_, err = config.Load(config.LoadOptions{ConfigPath: dir}) // a directory: unreadable, not missing
	var ce *config.Error
	if err == nil || errors.As(err, &ce) {
		t.Errorf("Load(directory) error = %v, want a plain I/O error", err)
	}
}

func TestHome(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		flag    string
		want    string
	}{
		{"flag wins", []string{"HERMES_HOME=/env", "HOME=/u"}, "/flag", "/flag"},
		{"HERMES_HOME", []string{"HERMES_HOME=/env", "HOME=/u"}, "", "/env"},
		{"HERMES_HOME is trimmed", []string{"HERMES_HOME= /env ", "HOME=/u"}, "", "/env"},
		{"blank HERMES_HOME is unset", []string{"HERMES_HOME=  ", "HOME=/u"}, "", filepath.Join("/u", ".hermes")},
		{"default", []string{"HOME=/u"}, "", filepath.Join("/u", ".hermes")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := config.Home(tt.environ, tt.flag); got != tt.want {
				t.Errorf("Home(%q, %q) = %q, want %q", tt.environ, tt.flag, got, tt.want)
			}
		})
	}
}

func TestLoadPlatformSettingsAndHooks(t *testing.T) {
	cfg := mustLoad(t, `
platforms:
  telegram:
    enabled: yes
    home_channel: {chat_id: "-1001", name: Ops}
  discord:
    enabled: off
privacy:
  pii_safe_platforms: [matrix]
hooks:
  max_in_flight: 4
  webhooks:
    - name: audit
      url: http://127.0.0.1:9/hook
      event_types: [lane.]
      secret: s3cret
      backoff_seconds: 0.5
`, nil, nil)
	tg := cfg.PlatformSettings["telegram"]
	if !tg.Enabled || tg.HomeChannel == nil || tg.HomeChannel.ChatID != "-1001" || tg.HomeChannel.Name != "Ops" {
		t.Fatalf("telegram settings = %+v", tg)
	}
	if cfg.PlatformSettings["discord"].Enabled {
		t.Fatal("discord enabled: off read as enabled")
	}
	if len(cfg.Privacy.PIISafePlatforms) != 1 || cfg.Privacy.PIISafePlatforms[0] != "matrix" {
		t.Fatalf("pii_safe_platforms = %v", cfg.Privacy.PIISafePlatforms)
	}
	if cfg.Hooks.MaxInFlight != 4 || len(cfg.Hooks.Webhooks) != 1 {
		t.Fatalf("hooks = %+v", cfg.Hooks)
	}
	w := cfg.Hooks.Webhooks[0]
	if w.Name != "audit" || w.Secret != "s3cret" || w.Backoff != 500*time.Millisecond || w.Timeout != 10*time.Second || len(w.EventTypes) != 1 {
		t.Fatalf("webhook = %+v", w)
	}
}

func TestLoadBadHooks(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{"hooks:\n  webhooks:\n    - name: a\n      url: ftp://x\n", "hooks.webhooks[0].url"},
		{"hooks:\n  webhooks:\n    - url: http://127.0.0.1:1/\n", "hooks.webhooks[0].name"},
		{"hooks:\n  webhooks:\n    - {name: a, url: 'http://127.0.0.1:1/'}\n    - {name: a, url: 'http://127.0.0.1:2/'}\n", "is used by another webhook"},
		{"hooks:\n  webhooks:\n    - {name: a, url: 'http://127.0.0.1:1/', colour: red}\n", "hooks.webhooks[0].colour"},
		{"hooks:\n  max_in_flight: 0\n", "hooks.max_in_flight"},
		{"platforms:\n  telegram:\n    home_channel: {name: x}\n", "platforms.telegram.home_channel.chat_id"},
	} {
		_, err := load(t, tt.yaml, nil, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%q) = %v, want an error naming %s", tt.yaml, err, tt.want)
		}
	}
}
