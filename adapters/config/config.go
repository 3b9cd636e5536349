package config

import (
	"fmt"
	"strings"
	"time"

	"hermes/commands"
)

// Config is hermes' effective configuration. The yaml key of each field is
// given in its comment; Describe lists them all with their defaults and
// environment variables.
type Config struct {
	// SessionReset is session_reset (or gateway.session_reset when the
	// top-level key is missing or null): the default reset policy.
	SessionReset ResetPolicy
	// Platforms is platforms.<name>.session_reset: the policy of one
	// platform, which wins over ResetByType and SessionReset.
	Platforms map[string]ResetPolicy
	// PlatformSettings is the rest of each platforms.<name> block.
	PlatformSettings map[string]Platform
	// ResetByType is reset_by_type.<chat_type>: the policy of one chat type
	// (dm, group, channel, thread, ...), which wins over SessionReset.
	ResetByType map[string]ResetPolicy
	// GroupSessionsPerUser is group_sessions_per_user.
	GroupSessionsPerUser bool
	// ThreadSessionsPerUser is thread_sessions_per_user.
	ThreadSessionsPerUser bool
	// SessionStoreMaxAgeDays is session_store_max_age_days (0 disables
	// pruning of the routing index).
	SessionStoreMaxAgeDays int
	Agent                  Agent
	Sessions               Sessions
	Privacy                Privacy
	// Timezone is timezone: an IANA name, or "" for the host's local zone.
	Timezone string
	API      API
	Expiry   Expiry
	Recovery Recovery
	Hooks    Hooks
	Gateway  Gateway
	Storage  Storage
	Memory   Memory
	Backup   Backup
	// MultiplexProfiles is multiplex_profiles.
	MultiplexProfiles bool
	// Profile is profile: the active profile name.
	Profile string
	// Store is the store block: where the event log lives.
	Store Store
	// Node is the node block: this process among several on one store.
	Node Node
}

// Store is the store block.
type Store struct {
	// URL is store.url: "" for the embedded SQLite store under the home,
	// a PostgreSQL URL (postgres://, postgresql://), or a KurrentDB
	// connection string (esdb://, esdb+discover://, kurrentdb://,
	// kurrentdb+discover://).
	URL string
}

// Node is the node block.
type Node struct {
	// ID is node.id: the name of this hermes serve among the nodes sharing
	// one store (its gateway stream is gateway-<id>); "" derives it from
	// the host name.
	ID string
	// Lease is node.lease_seconds: with several nodes, how long a node's
	// lease (its liveness, and the leader lease of the singleton duties)
	// lasts; it is renewed every third of it.
	Lease time.Duration
}

// ResetPolicy is one session_reset block: Hermes' SessionResetPolicy as
// written in config.yaml.
type ResetPolicy struct {
	// Mode is mode: none, idle, daily or both.
	Mode string
	// AtHour is at_hour (0–23).
	AtHour int
	// IdleMinutes is idle_minutes (≥ 0).
	IdleMinutes int
	// Notify is notify.
	Notify bool
	// NotifyExcludePlatforms is notify_exclude_platforms.
	NotifyExcludePlatforms []string
}

// Agent is the agent block.
type Agent struct {
	// GatewayAutoContinueFreshness is agent.gateway_auto_continue_freshness
	// (seconds); 0 or less means a resume mark never goes stale.
	GatewayAutoContinueFreshness time.Duration
	// RestartDrainTimeout is agent.restart_drain_timeout (seconds).
	RestartDrainTimeout time.Duration
	// ShutdownTimeout is agent.shutdown_timeout (seconds): the bound on a
	// whole stop or restart, from the signal to the exit. The drain waits
	// at most this less a reserve for recording the stop, whatever
	// RestartDrainTimeout says, so a service manager never has to kill
	// hermes (systemd's default TimeoutStopSec is 90 s).
	ShutdownTimeout time.Duration
}

// Sessions is the sessions block: pruning of the session database.
type Sessions struct {
	AutoPrune         bool // sessions.auto_prune
	RetentionDays     int  // sessions.retention_days
	MinIntervalHours  int  // sessions.min_interval_hours
	VacuumAfterPrune  bool // sessions.vacuum_after_prune
	WriteSessionsJSON bool // sessions.write_sessions_json
}

// Privacy is the privacy block.
type Privacy struct {
	RedactPII bool // privacy.redact_pii
	// PIISafePlatforms are further platforms whose ids may be redacted
	// (privacy.pii_safe_platforms), beyond WhatsApp, Signal, Telegram and
	// BlueBubbles.
	PIISafePlatforms []string
}

// Platform is what hermes reads of a platforms.<name> block besides its
// session_reset policy: whether the platform is connected and its home
// channel, for the session context prompt.
type Platform struct {
	// Enabled is platforms.<name>.enabled.
	Enabled bool
	// HomeChannel is platforms.<name>.home_channel {chat_id, name}.
	HomeChannel *HomeChannel
}

// HomeChannel is where a platform delivers scheduled output.
type HomeChannel struct {
	ChatID string
	Name   string
}

// Gateway is the gateway block: how busy lanes queue input.
type Gateway struct {
	// BusyInputMode is gateway.busy_input_mode: queue (merge follow-ups
	// into the pending one), interrupt or steer (replace it).
	BusyInputMode string
	// QueueMaxItems is gateway.queue.max_items: queued items per lane.
	QueueMaxItems int
	// QueueTTL is gateway.queue.ttl_seconds: how long an item may wait.
	QueueTTL time.Duration
}

// Hooks is the hooks block: webhooks fed from the event log.
type Hooks struct {
	// StartAtHead is hooks.start_at_head: a new hook checkpoint starts at
	// the end of the log instead of replaying history to the receivers.
	StartAtHead bool
	// MaxInFlight is hooks.max_in_flight (1–256).
	MaxInFlight int
	// Webhooks is hooks.webhooks.
	Webhooks []Webhook
}

// Webhook is one receiver of hooks.webhooks.
type Webhook struct {
	Name       string        // name (required, unique)
	URL        string        // url (http or https)
	EventTypes []string      // event_types (empty: every event)
	Secret     string        // secret for the HMAC signature (never printed)
	MaxRetries int           // max_retries (0: the default 5; -1: none)
	Backoff    time.Duration // backoff_seconds (default 1)
	MaxBackoff time.Duration // max_backoff_seconds (default 60)
	Timeout    time.Duration // timeout_seconds (default 10)
}

// API is the api block: hermes' HTTP API.
type API struct {
	// Addr is api.addr, host:port.
	Addr string
	// Token is api.token, the bearer token; required off loopback.
	Token string
	// MaxBodyBytes is api.max_body_bytes.
	MaxBodyBytes int64
	// AllowedHosts is api.allowed_hosts: Host names accepted besides
	// loopback and the host of Addr.
	AllowedHosts []string
	// AllowedOrigins is api.allowed_origins: web origins whose pages may
	// call the API.
	AllowedOrigins []string
	// BodyReadTimeout is api.body_read_timeout_seconds: how long reading
	// one request body may take.
	BodyReadTimeout time.Duration
	// MaxConnections is api.max_connections: open connections at once;
	// further ones wait in the listen backlog until one closes.
	MaxConnections int
	// MaxFollowers is api.max_followers: event streams
	// (GET /v1/events?follow=1) open at once; one more is refused with 503.
	MaxFollowers int
	// FollowerBufferBytes is api.follower_buffer_bytes: how much of the
	// log one event stream may hold for a client that does not keep up
	// before it is dropped (told where to resume).
	FollowerBufferBytes int
}

// Expiry is the expiry block: the background expiry watcher.
type Expiry struct {
	Interval time.Duration // expiry.interval_seconds
}

// Backup is the backup block: periodic snapshots of the event log taken by
// hermes serve.
type Backup struct {
	// Interval is backup.interval_seconds: time between two snapshots (0:
	// none; hermes backup from cron does the same).
	Interval time.Duration
	// Dir is backup.dir: where the snapshots go, outside the home (erasure
	// does not reach into backups); required with Interval.
	Dir string
	// Keep is backup.keep: how many snapshots are kept; older ones are
	// deleted after each new one.
	Keep int
}

// Storage is the storage block: the files of the home.
type Storage struct {
	// BrokenRetention is storage.broken_retention_seconds: how long a
	// damaged read model moved aside at start (<name>.broken-<time>) is
	// kept before it is deleted; it may hold content erased since.
	BrokenRetention time.Duration
}

// Memory is the memory block: how hermes serve trades memory for CPU in
// Go's garbage collector. The GOGC and GOMEMLIMIT environment variables
// win over it when set.
type Memory struct {
	// GCPercent is memory.gc_percent: the heap may grow this many percent
	// over the live data before a collection (Go's GOGC; Go's default is
	// 100).
	GCPercent int
	// SoftLimitMiB is memory.soft_limit_mib: Go's soft memory limit in
	// MiB; 0 makes it follow the live heap (the heap GCPercent allows plus
	// a margin), so memory freed after a burst goes back to the system at
	// once instead of over minutes.
	SoftLimitMiB int
	// CachedLanes is memory.cached_lanes: how many lanes hermes serve
	// keeps folded in memory (about 300 bytes each); a lane past it is
	// read from its snapshot and the log when next used.
	CachedLanes int
}

// Recovery is the recovery block: restart recovery.
type Recovery struct {
	// Recent is recovery.recent_seconds: sessions updated this recently
	// before an unclean stop are marked resume-pending.
	Recent time.Duration
	// StuckLoopThreshold is recovery.stuck_loop_threshold: a lane whose
	// turn was cut by this many consecutive interrupted restarts is
	// suspended at the next start (Hermes' _STUCK_LOOP_THRESHOLD).
	StuckLoopThreshold int
}

// DefaultResetPolicy is Hermes' SessionResetPolicy defaults.
func DefaultResetPolicy() ResetPolicy {
	return ResetPolicy{
		Mode:                   "both",
		AtHour:                 4,
		IdleMinutes:            1440,
		Notify:                 true,
		NotifyExcludePlatforms: []string{"api_server", "webhook"},
	}
}

// Default is the configuration with no file, environment or flags.
func Default() Config {
	return Config{
		SessionReset:           DefaultResetPolicy(),
		GroupSessionsPerUser:   true,
		SessionStoreMaxAgeDays: 90,
		Agent: Agent{
			GatewayAutoContinueFreshness: time.Hour,
			RestartDrainTimeout:          180 * time.Second,
			ShutdownTimeout:              60 * time.Second,
		},
		Sessions: Sessions{
			RetentionDays:     90,
			MinIntervalHours:  24,
			VacuumAfterPrune:  true,
			WriteSessionsJSON: true,
		},
		API: API{
			Addr:                "127.0.0.1:8642",
			MaxBodyBytes:        1 << 20,
			BodyReadTimeout:     30 * time.Second,
			MaxConnections:      1024,
			MaxFollowers:        64,
			FollowerBufferBytes: 1 << 20,
		},
		Expiry:   Expiry{Interval: 300 * time.Second},
		Recovery: Recovery{Recent: 120 * time.Second, StuckLoopThreshold: 3},
		Hooks:    Hooks{StartAtHead: true, MaxInFlight: 8},
		Node:     Node{Lease: 60 * time.Second},
		Gateway:  Gateway{BusyInputMode: "interrupt", QueueMaxItems: 32, QueueTTL: 24 * time.Hour},
		Storage:  Storage{BrokenRetention: 7 * 24 * time.Hour},
		Memory:   Memory{GCPercent: 100, CachedLanes: commands.DefaultCachedLanes},
		Backup:   Backup{Keep: 7},
	}
}

// Location is the time zone named by Timezone: time.Local for "", and
// time.Local as well for a name that does not load (Validate reports it).
func (c Config) Location() *time.Location {
	if c.Timezone == "" {
		return time.Local
	}
	loc, err := time.LoadLocation(c.Timezone)
	if err != nil {
		return time.Local
	}
	return loc
}

// Error is one configuration problem. Load and Validate return one or more
// of them joined with errors.Join; errors.As(err, new(*Error)) tells a
// configuration problem from an I/O failure.
type Error struct {
	// Source is where the value came from: the config file's path, an
	// environment variable's name or a flag ("--addr"); "" for a Config
	// validated on its own.
	Source string
	// Path is the key path ("session_reset.at_hour"); "" when the file as a
	// whole is bad.
	Path string
	// Reason says what is wrong. It never quotes api.token.
	Reason string
	// Line is the 1-based line in Source, for file values; 0 otherwise.
	Line int
}

// Error formats e as "source:line: path: reason", leaving out empty parts.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}
