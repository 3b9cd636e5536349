package hermeshome

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sort"
	"unicode/utf8"
)

// Bounds on the gateway tables of schema v25+ read whole: Hermes keeps one
// row per lane in each.
const (
	maxRoutingRows = 1 << 20
	maxPromptBytes = 1 << 30 // all system prompts together
)

// systemPrompts reads schema v25's system_prompts (hash → prompt), or nil
// when the schema has none.
func (s *StateDB) systemPrompts(ctx context.Context) (map[string]string, error) {
	if !s.promptHash {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, "SELECT hash, prompt FROM system_prompts")
	if err != nil {
		return nil, fmt.Errorf("read system_prompts: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	total := 0
	for rows.Next() {
		var hash, prompt sql.NullString
		if err := rows.Scan(&hash, &prompt); err != nil {
			return nil, fmt.Errorf("read system_prompts: %w", err)
		}
		total += len(prompt.String)
		if total > maxPromptBytes {
			return nil, fmt.Errorf("%w: system_prompts holds more than %d bytes", ErrUnsafeFile, maxPromptBytes)
		}
		out[hash.String] = cleanString(prompt.String)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read system_prompts: %w", err)
	}
	return out, nil
}

// reportUnimported says what the schema v25+ tables hold that the import
// does not carry: per-model usage rows (hermes keeps each session's
// totals, which the sessions row has) and async delegations (hermes runs
// no subagents, so a pending result has nowhere to go).
func (s *StateDB) reportUnimported(ctx context.Context, rep *Report) error {
	if s.tables["session_model_usage"] {
		var n, sessions int64
		if err := s.db.QueryRowContext(ctx, "SELECT count(*), count(DISTINCT session_id) FROM session_model_usage").Scan(&n, &sessions); err != nil {
			return fmt.Errorf("count session_model_usage: %w", err)
		}
		rep.Add(Info, "state.db table session_model_usage", "%d per-model usage rows of %d sessions not imported (each session's totals come with its sessions row)", n, sessions)
	}
	if s.tables["async_delegations"] {
		var n, open int64
		if err := s.db.QueryRowContext(ctx, "SELECT count(*), count(CASE WHEN state IN ('running', 'finalizing') OR delivery_state = 'pending' THEN 1 END) FROM async_delegations").Scan(&n, &open); err != nil {
			return fmt.Errorf("count async_delegations: %w", err)
		}
		rep.Add(Info, "state.db table async_delegations", "%d async delegations (%d running or undelivered) not imported: hermes runs no subagents, so their results are not delivered", n, open)
	}
	if s.tables["compression_locks"] {
		var n int64
		if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM compression_locks").Scan(&n); err != nil {
			return fmt.Errorf("count compression_locks: %w", err)
		}
		rep.Add(Info, "state.db table compression_locks", "%d compression locks not imported: they guard a running Hermes' compressions", n)
	}
	return nil
}

// RoutingRow is one gateway_routing row: a SessionEntry as JSON.
type RoutingRow struct {
	Key       string
	EntryJSON []byte
}

// GatewayRouting reads the routing index Hermes keeps in state.db since
// schema v25 (gateway_routing: scope, session_key, entry_json). Its scope
// is the sessions directory the gateway resolved (its realpath), so a
// state.db shared by several profiles holds one scope each. The rows of
// the scope that is sessionsDir are read; a home moved elsewhere has none,
// and then a single scope, whatever it names, is taken (reported). With
// several scopes and none that is sessionsDir, nothing is read and each
// is reported: which profile the home is cannot be told.
func (s *StateDB) GatewayRouting(ctx context.Context, sessionsDir string, rep *Report) ([]RoutingRow, error) {
	if !s.tables["gateway_routing"] {
		return nil, nil
	}
	cols := map[string]bool{}
	crows, err := s.db.QueryContext(ctx, "SELECT name FROM pragma_table_info('gateway_routing')")
	if err != nil {
		return nil, fmt.Errorf("columns of gateway_routing: %w", err)
	}
	for crows.Next() {
		var name string
		if err := crows.Scan(&name); err != nil {
			crows.Close()
			return nil, fmt.Errorf("columns of gateway_routing: %w", err)
		}
		cols[name] = true
	}
	crows.Close()
	if !cols["session_key"] || !cols["entry_json"] {
		var n int
		_ = s.db.QueryRowContext(ctx, "SELECT count(*) FROM gateway_routing").Scan(&n)
		rep.Add(Skipped, "state.db table gateway_routing", "not Hermes' routing index (no session_key or entry_json column): unknown table not imported (%d rows)", n)
		return nil, nil
	}
	// The first builds of the routing table (#59203) had no scope: one
	// store per state.db.
	scopeCol := "''"
	if cols["scope"] {
		scopeCol = "scope"
	}
	scopes := map[string]int{}
	rows, err := s.db.QueryContext(ctx, "SELECT "+scopeCol+", count(*) FROM gateway_routing GROUP BY 1")
	if err != nil {
		return nil, fmt.Errorf("read gateway_routing: %w", err)
	}
	for rows.Next() {
		var scope sql.NullString
		var n int
		if err := rows.Scan(&scope, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read gateway_routing: %w", err)
		}
		scopes[scope.String] = n
	}
	rows.Close()
	if len(scopes) == 0 {
		return nil, nil
	}
	want := sessionsDir
	if resolved, err := filepath.EvalSymlinks(sessionsDir); err == nil {
		want = resolved
	}
	scope, ok := "", false
	if _, found := scopes[want]; found {
		scope, ok = want, true
	} else if _, found := scopes[sessionsDir]; found {
		scope, ok = sessionsDir, true
	} else if len(scopes) == 1 {
		for sc := range scopes {
			scope, ok = sc, true
		}
		rep.Add(Info, "state.db gateway_routing", "scope %s is not this home's sessions directory (the home was moved): its %d rows are read", printable(scope), scopes[scope])
	}
	names := make([]string, 0, len(scopes))
	for sc := range scopes {
		names = append(names, sc)
	}
	sort.Strings(names)
	for _, sc := range names {
		if ok && sc == scope {
			continue
		}
		rep.Add(Skipped, "state.db gateway_routing scope "+printable(sc), "%d routing rows of another sessions directory (another profile sharing this state.db) not imported", scopes[sc])
	}
	if !ok {
		return nil, nil
	}
	if scopes[scope] > maxRoutingRows {
		return nil, fmt.Errorf("%w: gateway_routing holds %d rows, more than %d", ErrUnsafeFile, scopes[scope], maxRoutingRows)
	}
	rows, err = s.db.QueryContext(ctx, "SELECT session_key, entry_json FROM gateway_routing WHERE "+scopeCol+" = ? ORDER BY session_key", scope)
	if err != nil {
		return nil, fmt.Errorf("read gateway_routing: %w", err)
	}
	defer rows.Close()
	var out []RoutingRow
	total := 0
	for rows.Next() {
		var key sql.NullString
		var entry []byte
		if err := rows.Scan(&key, &entry); err != nil {
			return nil, fmt.Errorf("read gateway_routing: %w", err)
		}
		total += len(entry)
		if total > MaxSessionsJSONBytes {
			return nil, fmt.Errorf("%w: gateway_routing's entries are more than %d bytes", ErrUnsafeFile, MaxSessionsJSONBytes)
		}
		out = append(out, RoutingRow{Key: key.String, EntryJSON: entry})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read gateway_routing: %w", err)
	}
	return out, nil
}

// TurnLease is a session_turn_leases row (schema v26): a turn that held
// the conversation when Hermes stopped (a finished turn deletes its row).
type TurnLease struct {
	// ConversationID is the session id of the lineage root: compression
	// continues a conversation in child sessions under one lease.
	ConversationID string
	Holder         string
	AcquiredAt     float64
	ExpiresAt      float64
}

// TurnLeases reads session_turn_leases; none before schema v26.
func (s *StateDB) TurnLeases(ctx context.Context) ([]TurnLease, error) {
	if !s.tables["session_turn_leases"] {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, "SELECT conversation_id, holder, acquired_at, expires_at FROM session_turn_leases ORDER BY conversation_id LIMIT ?", maxRoutingRows)
	if err != nil {
		return nil, fmt.Errorf("read session_turn_leases: %w", err)
	}
	defer rows.Close()
	var out []TurnLease
	for rows.Next() {
		var id, holder sql.NullString
		var acquired, expires sql.NullFloat64
		if err := rows.Scan(&id, &holder, &acquired, &expires); err != nil {
			return nil, fmt.Errorf("read session_turn_leases: %w", err)
		}
		out = append(out, TurnLease{ConversationID: id.String, Holder: cleanString(holder.String), AcquiredAt: acquired.Float64, ExpiresAt: expires.Float64})
	}
	return out, rows.Err()
}

// HygieneStreaks reads gateway_hygiene_state (schema v26): session key →
// consecutive failed session-hygiene compressions, clamped like the
// restart counts.
func (s *StateDB) HygieneStreaks(ctx context.Context, rep *Report) (map[string]int, error) {
	if !s.tables["gateway_hygiene_state"] {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, "SELECT session_key, failure_streak FROM gateway_hygiene_state ORDER BY session_key LIMIT ?", maxRoutingRows)
	if err != nil {
		return nil, fmt.Errorf("read gateway_hygiene_state: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var key sql.NullString
		var n sql.NullInt64
		if err := rows.Scan(&key, &n); err != nil {
			return nil, fmt.Errorf("read gateway_hygiene_state: %w", err)
		}
		where := "state.db gateway_hygiene_state " + printable(key.String)
		switch {
		case !utf8.ValidString(key.String) || key.String == "":
			rep.Add(Skipped, where, "session key is empty or not valid UTF-8")
			continue
		case n.Int64 < 0:
			rep.Add(Clamped, where, "failure_streak %d is negative: 0", n.Int64)
			continue
		case n.Int64 > 1000:
			rep.Add(Clamped, where, "failure_streak %d is out of range: 1000", n.Int64)
			n.Int64 = 1000
		}
		if n.Int64 > 0 {
			out[key.String] = int(n.Int64)
		}
	}
	return out, rows.Err()
}
