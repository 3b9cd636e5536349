package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// kind is how a key's value is written and stored.
type kind int

const (
	kindBool    kind = iota // bool; YAML 1.1 words as PyYAML reads them
	kindInt                 // int or int64
	kindSeconds             // time.Duration written as (possibly fractional) seconds
	kindString              // string
	kindList                // []string; comma-separated in env and flags
	kindMode                // string, one of resetModes
)

var resetModes = []string{"none", "idle", "daily", "both"}

// key is one scalar setting: where it lives, how it is parsed and checked,
// and which field of Config holds it.
type key struct {
	path string
	kind kind
	// lo and hi bound kindInt and kindSeconds values (in seconds);
	// ±Inf when open.
	lo, hi float64
	// check is an extra rule for kindString values and for each item of a
	// kindList: it returns a reason, or "" when s is fine.
	check func(s string) string
	// secret values are never quoted in reasons.
	secret bool
	// aliases are further environment variables, after the derived one
	// and in falling precedence.
	aliases []string
	doc     string
	// ptr returns a pointer to the field in c: *bool, *int, *int64,
	// *time.Duration, *string or *[]string.
	ptr func(c *Config) any
}

// policyKey is a key of a session_reset block, relative to the block.
type policyKey struct {
	name   string
	kind   kind
	lo, hi float64
	doc    string
	ptr    func(p *ResetPolicy) any
}

var (
	inf  = math.Inf(1)
	ninf = math.Inf(-1)
)

var policyKeys = []policyKey{
	{name: "mode", kind: kindMode, lo: ninf, hi: inf,
		doc: "which rules replace a session: none, idle, daily or both (off/false/no mean none)",
		ptr: func(p *ResetPolicy) any { return &p.Mode }},
	{name: "at_hour", kind: kindInt, lo: 0, hi: 23,
		doc: "hour (0–23, in timezone) of the daily reset",
		ptr: func(p *ResetPolicy) any { return &p.AtHour }},
	{name: "idle_minutes", kind: kindInt, lo: 0, hi: inf,
		doc: "minutes of inactivity after which a session is replaced",
		ptr: func(p *ResetPolicy) any { return &p.IdleMinutes }},
	{name: "notify", kind: kindBool, lo: ninf, hi: inf,
		doc: "tell the user when their session was reset automatically",
		ptr: func(p *ResetPolicy) any { return &p.Notify }},
	{name: "notify_exclude_platforms", kind: kindList, lo: ninf, hi: inf,
		doc: "platforms that never get the reset notice",
		ptr: func(p *ResetPolicy) any { return &p.NotifyExcludePlatforms }},
}

// key is pk at path, without a Config field.
func (pk policyKey) key(path string) key {
	return key{path: path, kind: pk.kind, lo: pk.lo, hi: pk.hi, doc: pk.doc}
}

// keys are every scalar key, in the order Describe lists them.
var keys = buildKeys()

func buildKeys() []key {
	var ks []key
	for _, pk := range policyKeys {
		k := pk.key("session_reset." + pk.name)
		ptr := pk.ptr
		k.doc = "default policy: " + pk.doc
		k.ptr = func(c *Config) any { return ptr(&c.SessionReset) }
		ks = append(ks, k)
	}
	return append(ks,
		key{path: "group_sessions_per_user", kind: kindBool,
			doc: "isolate group and channel sessions per participant",
			ptr: func(c *Config) any { return &c.GroupSessionsPerUser }},
		key{path: "thread_sessions_per_user", kind: kindBool,
			doc: "isolate thread sessions per participant (needs group_sessions_per_user)",
			ptr: func(c *Config) any { return &c.ThreadSessionsPerUser }},
		key{path: "session_store_max_age_days", kind: kindInt, lo: 0, hi: inf,
			doc: "drop routing entries idle this many days; 0 keeps them forever",
			ptr: func(c *Config) any { return &c.SessionStoreMaxAgeDays }},
		key{path: "agent.gateway_auto_continue_freshness", kind: kindSeconds, lo: ninf, hi: inf,
			aliases: []string{"HERMES_AUTO_CONTINUE_FRESHNESS"},
			doc:     "seconds a resume-pending mark stays fresh; 0 or less: always fresh",
			ptr:     func(c *Config) any { return &c.Agent.GatewayAutoContinueFreshness }},
		key{path: "agent.restart_drain_timeout", kind: kindSeconds, lo: 0, hi: inf,
			aliases: []string{"HERMES_RESTART_DRAIN_TIMEOUT"},
			doc:     "seconds running turns may finish during a shutdown or restart (at most agent.shutdown_timeout less its reserve)",
			ptr:     func(c *Config) any { return &c.Agent.RestartDrainTimeout }},
		key{path: "agent.shutdown_timeout", kind: kindSeconds, lo: 1, hi: 3600,
			doc: "seconds a whole stop or restart may take; the drain gets at most this less a reserve (a quarter, at most 10 s); keep it under the service manager's stop timeout",
			ptr: func(c *Config) any { return &c.Agent.ShutdownTimeout }},
		key{path: "sessions.auto_prune", kind: kindBool,
			doc: "prune ended sessions older than retention_days at start-up",
			ptr: func(c *Config) any { return &c.Sessions.AutoPrune }},
		key{path: "sessions.retention_days", kind: kindInt, lo: 1, hi: inf,
			doc: "age in days of the ended sessions auto_prune removes",
			ptr: func(c *Config) any { return &c.Sessions.RetentionDays }},
		key{path: "sessions.min_interval_hours", kind: kindInt, lo: 0, hi: inf,
			doc: "hours between two automatic prunes",
			ptr: func(c *Config) any { return &c.Sessions.MinIntervalHours }},
		key{path: "sessions.vacuum_after_prune", kind: kindBool,
			doc: "VACUUM the database after an automatic prune removed rows",
			ptr: func(c *Config) any { return &c.Sessions.VacuumAfterPrune }},
		key{path: "sessions.write_sessions_json", kind: kindBool,
			doc: "keep the sessions.json routing index Python Hermes reads",
			ptr: func(c *Config) any { return &c.Sessions.WriteSessionsJSON }},
		key{path: "privacy.redact_pii", kind: kindBool,
			doc: "hash user and chat ids in the session context prompt",
			ptr: func(c *Config) any { return &c.Privacy.RedactPII }},
		key{path: "privacy.pii_safe_platforms", kind: kindList,
			doc: "further platforms whose ids are redacted (WhatsApp, Signal, Telegram, BlueBubbles always are)",
			ptr: func(c *Config) any { return &c.Privacy.PIISafePlatforms }},
		key{path: "gateway.busy_input_mode", kind: kindString, check: checkBusyMode,
			doc: "a follow-up sent while the agent is busy: queue merges it into the pending one; interrupt or steer replace it",
			ptr: func(c *Config) any { return &c.Gateway.BusyInputMode }},
		key{path: "gateway.queue.max_items", kind: kindInt, lo: 1, hi: 1024,
			doc: "queued items per lane; the next one is refused",
			ptr: func(c *Config) any { return &c.Gateway.QueueMaxItems }},
		key{path: "gateway.queue.ttl_seconds", kind: kindSeconds, lo: 1, hi: inf,
			doc: "seconds a queued item may wait before it is dropped",
			ptr: func(c *Config) any { return &c.Gateway.QueueTTL }},
		key{path: "hooks.start_at_head", kind: kindBool,
			doc: "a new hook checkpoint starts at the end of the log (no history flood)",
			ptr: func(c *Config) any { return &c.Hooks.StartAtHead }},
		key{path: "hooks.max_in_flight", kind: kindInt, lo: 1, hi: 256,
			doc: "webhook requests in flight at once",
			ptr: func(c *Config) any { return &c.Hooks.MaxInFlight }},
		key{path: "timezone", kind: kindString, check: checkTimezone,
			doc: "IANA time zone of daily resets and session ids; empty: the host's zone",
			ptr: func(c *Config) any { return &c.Timezone }},
		key{path: "api.addr", kind: kindString, check: checkAddr,
			doc: "host:port the HTTP API listens on",
			ptr: func(c *Config) any { return &c.API.Addr }},
		key{path: "api.token", kind: kindString, secret: true, check: checkToken,
			doc: "bearer token of the HTTP API (at least 16 non-space characters); required off loopback",
			ptr: func(c *Config) any { return &c.API.Token }},
		key{path: "api.max_body_bytes", kind: kindInt, lo: 1 << 10, hi: 64 << 20,
			doc: "largest request body the HTTP API accepts, in bytes (1 KiB–64 MiB)",
			ptr: func(c *Config) any { return &c.API.MaxBodyBytes }},
		key{path: "api.allowed_hosts", kind: kindList, check: checkAllowedHost,
			doc: "further host names or IPs the Host header may name (any port); loopback and the api.addr host always may",
			ptr: func(c *Config) any { return &c.API.AllowedHosts }},
		key{path: "api.allowed_origins", kind: kindList, check: checkAllowedOrigin,
			doc: "web origins (scheme://host[:port]) whose pages may call the HTTP API; none by default",
			ptr: func(c *Config) any { return &c.API.AllowedOrigins }},
		key{path: "api.body_read_timeout_seconds", kind: kindSeconds, lo: 1, hi: 3600,
			doc: "seconds a request body may take to arrive; a slower one is answered 408 (1–3600)",
			ptr: func(c *Config) any { return &c.API.BodyReadTimeout }},
		key{path: "api.max_connections", kind: kindInt, lo: 2, hi: 1 << 20,
			doc: "HTTP connections open at once; further ones wait in the listen backlog until one closes",
			ptr: func(c *Config) any { return &c.API.MaxConnections }},
		key{path: "api.max_followers", kind: kindInt, lo: 1, hi: 1 << 16,
			doc: "event streams (GET /v1/events?follow=1) open at once; one more is refused with 503 unavailable",
			ptr: func(c *Config) any { return &c.API.MaxFollowers }},
		key{path: "api.follower_buffer_bytes", kind: kindInt, lo: 4 << 10, hi: 64 << 20,
			doc: "bytes of events one event stream may hold for a client that does not keep up; past it the stream ends with a dropped event naming where to resume (4 KiB–64 MiB)",
			ptr: func(c *Config) any { return &c.API.FollowerBufferBytes }},
		key{path: "expiry.interval_seconds", kind: kindSeconds, lo: 1, hi: inf,
			doc: "seconds between two passes of the background expiry watcher",
			ptr: func(c *Config) any { return &c.Expiry.Interval }},
		key{path: "storage.broken_retention_seconds", kind: kindSeconds, lo: 0, hi: inf,
			doc: "seconds a damaged read model moved aside at start (<name>.broken-<time>) is kept before it is deleted (default 7 days)",
			ptr: func(c *Config) any { return &c.Storage.BrokenRetention }},
		key{path: "memory.gc_percent", kind: kindInt, lo: 10, hi: 1000,
			doc: "percent the Go heap may grow over its live data before a collection (Go's GOGC, which wins when set; default 100, Go's; lower trades CPU for memory) (10–1000)",
			ptr: func(c *Config) any { return &c.Memory.GCPercent }},
		key{path: "memory.soft_limit_mib", kind: kindInt, lo: 0, hi: 1 << 20,
			doc: "Go's soft memory limit in MiB (GOMEMLIMIT, which wins when set); 0 (default): follow the live heap, so memory freed after a burst is returned at once",
			ptr: func(c *Config) any { return &c.Memory.SoftLimitMiB }},
		key{path: "memory.cached_lanes", kind: kindInt, lo: 1000, hi: 100_000_000,
			doc: "lanes hermes serve keeps in memory, about 300 bytes each (default 200,000); a lane past it is read from its snapshot and the log when next used (1,000–100,000,000)",
			ptr: func(c *Config) any { return &c.Memory.CachedLanes }},
		key{path: "backup.interval_seconds", kind: kindSeconds, lo: 0, hi: inf,
			doc: "seconds between two snapshots of the event log taken by hermes serve into backup.dir (0: none)",
			ptr: func(c *Config) any { return &c.Backup.Interval }},
		key{path: "backup.dir", kind: kindString,
			doc: "directory of the periodic snapshots, outside the home (required with backup.interval_seconds)",
			ptr: func(c *Config) any { return &c.Backup.Dir }},
		key{path: "backup.keep", kind: kindInt, lo: 1, hi: 100000,
			doc: "periodic snapshots kept; older ones are deleted after each new one",
			ptr: func(c *Config) any { return &c.Backup.Keep }},
		key{path: "recovery.recent_seconds", kind: kindSeconds, lo: 0, hi: inf,
			doc: "after an unclean stop, sessions active this many seconds before it resume",
			ptr: func(c *Config) any { return &c.Recovery.Recent }},
		key{path: "recovery.stuck_loop_threshold", kind: kindInt, lo: 1, hi: inf,
			doc: "consecutive interrupted restarts of a session's turn after which it is suspended",
			ptr: func(c *Config) any { return &c.Recovery.StuckLoopThreshold }},
		key{path: "multiplex_profiles", kind: kindBool,
			doc: "put the active profile in session keys",
			ptr: func(c *Config) any { return &c.MultiplexProfiles }},
		key{path: "profile", kind: kindString,
			doc: "active profile name, used when multiplex_profiles is on",
			ptr: func(c *Config) any { return &c.Profile }},
		key{path: "store.url", kind: kindString, secret: true, check: checkStoreURL,
			doc: "event store: empty for the embedded SQLite store, a PostgreSQL URL (postgres://user:pass@host:5432/db?sslmode=require&hermes_schema=hermes), or a KurrentDB URL (esdb://host:2113?tls=false, kurrentdb://user:pass@host:2113)",
			ptr: func(c *Config) any { return &c.Store.URL }},
		key{path: "node.id", kind: kindString, check: checkNodeID,
			doc: "name of this node among the hermes serve processes sharing one store; empty: derived from the host name",
			ptr: func(c *Config) any { return &c.Node.ID }},
		key{path: "node.lease_seconds", kind: kindSeconds, lo: 1, hi: 86400,
			doc: "with several nodes on one store: how long a node's lease lasts (renewed every third of it); a node whose lease expired is adopted, and the leader lease moves",
			ptr: func(c *Config) any { return &c.Node.Lease }},
	)
}

func keyByPath(path string) (key, bool) {
	for _, k := range keys {
		if k.path == path {
			return k, true
		}
	}
	return key{}, false
}

// envNames are the environment variables of k, in falling precedence:
// HERMES_ + the path upper-cased with dots as underscores, then aliases.
func (k key) envNames() []string {
	name := "HERMES_" + strings.ToUpper(strings.ReplaceAll(k.path, ".", "_"))
	return append([]string{name}, k.aliases...)
}

// bounded gives kindBool, kindString and friends open bounds, so the zero
// lo/hi of a literal without them means "unbounded" rather than [0, 0].
func (k key) bounded() (lo, hi float64) {
	if k.kind != kindInt && k.kind != kindSeconds {
		return ninf, inf
	}
	return k.lo, k.hi
}

// fromString parses an environment or flag value. It returns the value
// (bool, int64, time.Duration, string or []string) or a reason.
func (k key) fromString(s string) (any, string) {
	switch k.kind {
	case kindBool:
		b, ok := parseBool(s)
		if !ok {
			return nil, notBool(s)
		}
		return b, ""
	case kindInt:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Sprintf("%q is not an integer", s)
		}
		return n, k.checkValue(n)
	case kindSeconds:
		d, reason := parseSeconds(s)
		if reason != "" {
			return nil, reason
		}
		return d, k.checkValue(d)
	case kindList:
		var out []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out, ""
	case kindMode:
		m := normalizeMode(s)
		return m, k.checkValue(m)
	default:
		return s, k.checkValue(s)
	}
}

// checkValue applies k's range, enum or string rule to a parsed value.
func (k key) checkValue(v any) string {
	lo, hi := k.bounded()
	switch v := v.(type) {
	case int64:
		return checkRange(strconv.FormatInt(v, 10), float64(v), lo, hi)
	case time.Duration:
		return checkRange(formatSeconds(v), v.Seconds(), lo, hi)
	case string:
		if k.kind == kindMode {
			for _, m := range resetModes {
				if v == m {
					return ""
				}
			}
			return fmt.Sprintf("%q is not one of %s", v, strings.Join(resetModes, ", "))
		}
		if k.check != nil {
			return k.check(v)
		}
	case []string:
		if k.check != nil {
			for _, item := range v {
				if r := k.check(item); r != "" {
					return r
				}
			}
		}
	}
	return ""
}

func checkRange(text string, v, lo, hi float64) string {
	switch {
	case !math.IsInf(lo, 0) && !math.IsInf(hi, 0) && (v < lo || v > hi):
		return fmt.Sprintf("%s is not between %s and %s", text, fmtBound(lo), fmtBound(hi))
	case v < lo && lo == 0:
		return fmt.Sprintf("%s is negative", text)
	case v < lo:
		return fmt.Sprintf("%s is less than %s", text, fmtBound(lo))
	case v > hi:
		return fmt.Sprintf("%s is greater than %s", text, fmtBound(hi))
	}
	return ""
}

func fmtBound(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// parseBool reads the booleans of YAML 1.1 as Python users write them, in
// any case, plus 1 and 0.
func parseBool(s string) (value, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "yes", "y", "on", "1":
		return true, true
	case "false", "no", "n", "off", "0":
		return false, true
	}
	return false, false
}

func notBool(s string) string {
	return fmt.Sprintf("%q is not a boolean (true/false, yes/no, on/off, y/n, 1/0)", s)
}

// normalizeMode lower-cases a reset mode and maps YAML 1.1's false words to
// "none": PyYAML reads `mode: off` as False, which matches no rule in
// Hermes, i.e. behaves as none.
func normalizeMode(s string) string {
	m := strings.ToLower(strings.TrimSpace(s))
	switch m {
	case "off", "false", "no", "n":
		return "none"
	}
	return m
}

// maxSeconds keeps a seconds value well inside time.Duration.
const maxSeconds = 1e9

func parseSeconds(s string) (time.Duration, string) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Sprintf("%q is not a number of seconds", s)
	}
	return secondsValue(s, f)
}

func secondsValue(text string, f float64) (time.Duration, string) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Sprintf("%s is not a finite number of seconds", text)
	}
	if math.Abs(f) > maxSeconds {
		return 0, fmt.Sprintf("%s seconds is out of range (at most %g)", text, maxSeconds)
	}
	return time.Duration(math.Round(f * float64(time.Second))), ""
}

func formatSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

func checkBusyMode(s string) string {
	switch s {
	case "queue", "interrupt", "steer":
		return ""
	}
	return fmt.Sprintf("%q is not queue, interrupt or steer", s)
}

func checkTimezone(s string) string {
	if s == "" {
		return ""
	}
	if _, err := time.LoadLocation(s); err != nil {
		return fmt.Sprintf("%q is not a known IANA time zone", s)
	}
	return ""
}

// storeSchemes are the URL schemes of store.url (PostgreSQL's and
// KurrentDB's).
var storeSchemes = []string{"postgres", "postgresql", "esdb", "esdb+discover", "kurrentdb", "kurrentdb+discover", "kurrent", "kurrent+discover"}

func checkStoreURL(s string) string {
	if s == "" {
		return ""
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || rest == "" {
		return "is not a URL (want postgres://host/db, esdb://host:port or kurrentdb://host:port)"
	}
	for _, sc := range storeSchemes {
		if strings.EqualFold(scheme, sc) {
			return ""
		}
	}
	return fmt.Sprintf("has scheme %q; want one of %s", scheme, strings.Join(storeSchemes, ", "))
}

// checkNodeID keeps node ids usable in stream names and file names.
func checkNodeID(s string) string {
	if len(s) > 64 {
		return "is longer than 64 characters"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Sprintf("contains %q; use letters, digits, '-', '_' and '.'", r)
		}
	}
	return ""
}

func checkAddr(s string) string {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("%q is not host:port (%v)", s, addrErrReason(err))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("%q has no numeric port between 0 and 65535", s)
	}
	return ""
}

// checkToken refuses a token that is blank (it would turn auth off while
// looking set), short, or padded with white space (an Authorization header
// loses it, so no request could match). It never quotes the token.
func checkToken(s string) string {
	if s == "" {
		return ""
	}
	if strings.TrimSpace(s) == "" {
		return fmt.Sprintf("is blank, which would turn auth off: unset it or give at least %d non-space characters", minTokenLength)
	}
	if strings.TrimSpace(s) != s {
		return "has leading or trailing white space, which an Authorization header cannot carry"
	}
	n := 0
	for _, r := range s {
		if !unicode.IsSpace(r) {
			n++
		}
	}
	if n < minTokenLength {
		return fmt.Sprintf("has fewer than %d non-space characters", minTokenLength)
	}
	return ""
}

// checkAllowedHost accepts a host name or an IP address, without a port.
func checkAllowedHost(s string) string {
	h := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if net.ParseIP(h) != nil {
		return ""
	}
	if h == "" || strings.ContainsAny(h, ":/@*?# ") {
		return fmt.Sprintf("%q is not a host name or IP address without a port", s)
	}
	return ""
}

// checkAllowedOrigin accepts an origin as browsers send it in the Origin
// header: http or https, a host, an optional port, nothing else.
func checkAllowedOrigin(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Sprintf("%q is not an origin scheme://host[:port] (http or https, no path)", s)
	}
	return ""
}

func addrErrReason(err error) string {
	if ae, ok := err.(*net.AddrError); ok {
		return ae.Err
	}
	return err.Error()
}

// isLoopbackHost reports whether host is localhost or in 127.0.0.0/8 or
// ::1. An empty host binds every interface, so it is not loopback.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// store writes a parsed value (from fromString or fromNode) to the field ptr.
func store(ptr, v any) {
	switch p := ptr.(type) {
	case *bool:
		*p = v.(bool)
	case *int:
		*p = int(v.(int64))
	case *int64:
		*p = v.(int64)
	case *time.Duration:
		*p = v.(time.Duration)
	case *string:
		*p = v.(string)
	case *[]string:
		*p = v.([]string)
	default:
		panic(fmt.Sprintf("config: no store for %T", ptr))
	}
}

// current reads a field through ptr in the parsed form store takes.
func current(ptr any) any {
	switch p := ptr.(type) {
	case *bool:
		return *p
	case *int:
		return int64(*p)
	case *int64:
		return *p
	case *time.Duration:
		return *p
	case *string:
		return *p
	case *[]string:
		return *p
	}
	panic(fmt.Sprintf("config: no value for %T", ptr))
}

// KeyDoc documents one configuration key for `hermes config keys`.
type KeyDoc struct {
	// Key is the config.yaml path; <name> and <chat_type> stand for any
	// platform or chat type.
	Key string
	// Type is bool, int, seconds, string, list or an enum as a|b|c.
	Type string
	// Default is the default as written in config.yaml ("" for none).
	Default string
	// Env are the environment variables that set the key, in falling
	// precedence; none for the per-platform and per-type policies.
	Env []string
	// Description is one line.
	Description string
}

// Describe lists every key hermes reads, in a stable order: the scalar keys
// first, then the per-platform, per-type and gateway.session_reset blocks.
func Describe() []KeyDoc {
	def := Default()
	var out []KeyDoc
	for _, k := range keys {
		out = append(out, KeyDoc{
			Key:         k.path,
			Type:        typeName(k.kind),
			Default:     formatValue(current(k.ptr(&def))),
			Env:         k.envNames(),
			Description: k.doc,
		})
	}
	dp := DefaultResetPolicy()
	for _, block := range []struct{ prefix, what string }{
		{"platforms.<name>.session_reset.", "one platform's policy (wins over reset_by_type)"},
		{"reset_by_type.<chat_type>.", "one chat type's policy (wins over session_reset)"},
	} {
		for _, pk := range policyKeys {
			out = append(out, KeyDoc{
				Key:         block.prefix + pk.name,
				Type:        typeName(pk.kind),
				Default:     formatValue(current(pk.ptr(&dp))),
				Description: block.what + ": " + pk.doc + "; unset: the default, not session_reset's",
			})
		}
	}
	return append(out, KeyDoc{
		Key:         "gateway.session_reset",
		Type:        "mapping",
		Description: "read as session_reset when the top-level session_reset is missing or null",
	})
}

func typeName(k kind) string {
	switch k {
	case kindBool:
		return "bool"
	case kindInt:
		return "int"
	case kindSeconds:
		return "seconds"
	case kindList:
		return "list"
	case kindMode:
		return strings.Join(resetModes, "|")
	}
	return "string"
}

func formatValue(v any) string {
	switch v := v.(type) {
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case time.Duration:
		return formatSeconds(v)
	case []string:
		return "[" + strings.Join(v, ", ") + "]"
	}
	return fmt.Sprint(v)
}
