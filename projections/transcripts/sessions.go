package transcripts

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Session is a sessions row, with Hermes' column names as JSON keys and
// NULL as nil.
type Session struct {
	ID               string   `json:"id"`
	Source           string   `json:"source"`
	UserID           *string  `json:"user_id"`
	Model            *string  `json:"model"`
	ModelConfig      *string  `json:"model_config"`
	SystemPrompt     *string  `json:"system_prompt"`
	ParentSessionID  *string  `json:"parent_session_id"`
	StartedAt        float64  `json:"started_at"`
	EndedAt          *float64 `json:"ended_at"`
	EndReason        *string  `json:"end_reason"`
	MessageCount     int64    `json:"message_count"`
	ToolCallCount    int64    `json:"tool_call_count"`
	InputTokens      int64    `json:"input_tokens"`
	OutputTokens     int64    `json:"output_tokens"`
	CacheReadTokens  int64    `json:"cache_read_tokens"`
	CacheWriteTokens int64    `json:"cache_write_tokens"`
	ReasoningTokens  int64    `json:"reasoning_tokens"`
	BillingProvider  *string  `json:"billing_provider"`
	BillingBaseURL   *string  `json:"billing_base_url"`
	BillingMode      *string  `json:"billing_mode"`
	EstimatedCostUSD *float64 `json:"estimated_cost_usd"`
	ActualCostUSD    *float64 `json:"actual_cost_usd"`
	CostStatus       *string  `json:"cost_status"`
	CostSource       *string  `json:"cost_source"`
	PricingVersion   *string  `json:"pricing_version"`
	Title            *string  `json:"title"`
	APICallCount     int64    `json:"api_call_count"`
	HandoffState     *string  `json:"handoff_state"`
	HandoffPlatform  *string  `json:"handoff_platform"`
	HandoffError     *string  `json:"handoff_error"`
	RewindCount      int64    `json:"rewind_count"`
	// Extra is an imported row's columns of a newer Hermes schema
	// (pinned, hidden, title_source, …) by name; absent for rows hermes
	// wrote itself.
	Extra json.RawMessage `json:"extra,omitempty"`
}

const sessionColumns = `s.id, s.source, s.user_id, s.model, s.model_config, s.system_prompt, s.parent_session_id,
	s.started_at, s.ended_at, s.end_reason, COALESCE(s.message_count, 0), COALESCE(s.tool_call_count, 0),
	COALESCE(s.input_tokens, 0), COALESCE(s.output_tokens, 0), COALESCE(s.cache_read_tokens, 0),
	COALESCE(s.cache_write_tokens, 0), COALESCE(s.reasoning_tokens, 0), s.billing_provider, s.billing_base_url,
	s.billing_mode, s.estimated_cost_usd, s.actual_cost_usd, s.cost_status, s.cost_source, s.pricing_version,
	s.title, COALESCE(s.api_call_count, 0), s.handoff_state, s.handoff_platform, s.handoff_error,
	COALESCE(s.rewind_count, 0), s.extra`

// scanSession scans sessionColumns followed by extra destinations.
func scanSession(rs rowScanner, extra ...any) (Session, error) {
	var s Session
	var userID, model, modelConfig, prompt, parent, endReason sql.NullString
	var billingProvider, billingURL, billingMode, costStatus, costSource, pricing, title sql.NullString
	var handoffState, handoffPlatform, handoffError sql.NullString
	var endedAt, estimated, actual sql.NullFloat64
	var extraCols sql.NullString
	dest := []any{&s.ID, &s.Source, &userID, &model, &modelConfig, &prompt, &parent,
		&s.StartedAt, &endedAt, &endReason, &s.MessageCount, &s.ToolCallCount,
		&s.InputTokens, &s.OutputTokens, &s.CacheReadTokens,
		&s.CacheWriteTokens, &s.ReasoningTokens, &billingProvider, &billingURL,
		&billingMode, &estimated, &actual, &costStatus, &costSource, &pricing,
		&title, &s.APICallCount, &handoffState, &handoffPlatform, &handoffError,
		&s.RewindCount, &extraCols}
	if err := rs.Scan(append(dest, extra...)...); err != nil {
		return Session{}, err
	}
	s.UserID, s.Model, s.ModelConfig, s.SystemPrompt = ptrOf(userID), ptrOf(model), ptrOf(modelConfig), ptrOf(prompt)
	s.ParentSessionID, s.EndReason = ptrOf(parent), ptrOf(endReason)
	s.BillingProvider, s.BillingBaseURL, s.BillingMode = ptrOf(billingProvider), ptrOf(billingURL), ptrOf(billingMode)
	s.CostStatus, s.CostSource, s.PricingVersion = ptrOf(costStatus), ptrOf(costSource), ptrOf(pricing)
	s.Title = ptrOf(title)
	s.HandoffState, s.HandoffPlatform, s.HandoffError = ptrOf(handoffState), ptrOf(handoffPlatform), ptrOf(handoffError)
	s.EndedAt, s.EstimatedCostUSD, s.ActualCostUSD = floatPtr(endedAt), floatPtr(estimated), floatPtr(actual)
	if extraCols.Valid && json.Valid([]byte(extraCols.String)) {
		s.Extra = json.RawMessage(extraCols.String)
	}
	return s, nil
}

func floatPtr(v sql.NullFloat64) *float64 {
	if !v.Valid {
		return nil
	}
	f := v.Float64
	return &f
}

// Session returns the row of a session, or [ErrNotFound].
func (r *Reader) Session(ctx context.Context, id string) (Session, error) {
	s, err := getSession(ctx, r.db, id)
	if err != nil {
		return Session{}, fmt.Errorf("session %s: %w", id, err)
	}
	return s, nil
}

func getSession(ctx context.Context, q queryer, id string) (Session, error) {
	s, err := scanSession(q.QueryRowContext(ctx, "SELECT "+sessionColumns+" FROM sessions s WHERE s.id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, ErrNotFound
	}
	return s, err
}

// SessionExists reports whether a session row exists.
func (r *Reader) SessionExists(ctx context.Context, id string) (bool, error) {
	var n int
	st, err := r.stmts.Stmt(ctx, r.db, "SELECT count(*) FROM sessions WHERE id = ?")
	if err == nil {
		err = st.QueryRowContext(ctx, id).Scan(&n)
	}
	if err != nil {
		return false, fmt.Errorf("session exists %s: %w", id, err)
	}
	return n > 0, nil
}

// escapeLike escapes \, % and _ for a LIKE ... ESCAPE '\' pattern.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// ResolveSessionID is Hermes' resolve_session_id: an exact id, else the
// only session whose id starts with prefix (LIKE wildcards in prefix are
// literal). It fails with [ErrNotFound] when none or several match.
func (r *Reader) ResolveSessionID(ctx context.Context, prefix string) (string, error) {
	var id string
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, "SELECT id FROM sessions WHERE id = ?", prefix).Scan(&id)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		id, err = uniqueMatch(ctx, tx,
			`SELECT id FROM sessions WHERE id LIKE ? ESCAPE '\' ORDER BY started_at DESC LIMIT 2`, escapeLike(prefix)+"%")
		return err
	})
	if err != nil {
		return "", fmt.Errorf("resolve session %q: %w", prefix, err)
	}
	return id, nil
}

// LineageNode is one session of a lineage.
type LineageNode struct {
	ID              string  `json:"id"`
	Title           *string `json:"title"`
	StartedAt       float64 `json:"started_at"`
	ParentSessionID *string `json:"parent_session_id"`
	// Depth is the number of parent links between this session and the
	// one asked about (0 for itself).
	Depth int `json:"depth"`
}

// Lineage is a session's ancestors and descendants through
// parent_session_id (the seed's recursive queries).
type Lineage struct {
	// Ancestors starts with the session itself, then its parent, up to
	// the root.
	Ancestors []LineageNode `json:"ancestors"`
	// Descendants starts with the session itself, then its children by
	// depth (then started_at and id).
	Descendants []LineageNode `json:"descendants"`
}

// Lineage returns the ancestors and descendants of a session, or
// [ErrNotFound]. Each walk stops where it would visit a session twice, so
// a loop of parent links (which a metadata event can make) ends.
func (r *Reader) Lineage(ctx context.Context, id string) (Lineage, error) {
	var l Lineage
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		l.Ancestors, err = lineageNodes(ctx, tx, `
			WITH RECURSIVE lineage(id, depth, path) AS (
				SELECT id, 0, char(30) || id || char(30) FROM sessions WHERE id = ?
				UNION ALL
				SELECT s.parent_session_id, l.depth + 1, l.path || s.parent_session_id || char(30)
				FROM sessions s JOIN lineage l ON s.id = l.id
				WHERE s.parent_session_id IS NOT NULL
					AND instr(l.path, char(30) || s.parent_session_id || char(30)) = 0
			)
			SELECT s.id, s.title, s.started_at, s.parent_session_id, l.depth
			FROM lineage l JOIN sessions s ON s.id = l.id
			ORDER BY l.depth`, id)
		if err != nil {
			return err
		}
		if len(l.Ancestors) == 0 {
			return ErrNotFound
		}
		l.Descendants, err = lineageNodes(ctx, tx, `
			WITH RECURSIVE descendants(id, depth, path) AS (
				SELECT id, 0, char(30) || id || char(30) FROM sessions WHERE id = ?
				UNION ALL
				SELECT s.id, d.depth + 1, d.path || s.id || char(30)
				FROM sessions s JOIN descendants d ON s.parent_session_id = d.id
				WHERE instr(d.path, char(30) || s.id || char(30)) = 0
			)
			SELECT s.id, s.title, s.started_at, s.parent_session_id, d.depth
			FROM descendants d JOIN sessions s ON s.id = d.id
			ORDER BY d.depth, s.started_at, s.id`, id)
		return err
	})
	if err != nil {
		return Lineage{}, fmt.Errorf("lineage of %s: %w", id, err)
	}
	return l, nil
}

func lineageNodes(ctx context.Context, tx *sql.Tx, query, id string) ([]LineageNode, error) {
	rows, err := tx.QueryContext(ctx, query, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []LineageNode
	for rows.Next() {
		var n LineageNode
		var title, parent sql.NullString
		if err := rows.Scan(&n.ID, &title, &n.StartedAt, &parent, &n.Depth); err != nil {
			return nil, err
		}
		n.Title, n.ParentSessionID = ptrOf(title), ptrOf(parent)
		out = append(out, n)
	}
	return out, rows.Err()
}

// RecentSession is a session with the preview and last activity Hermes'
// session list shows.
type RecentSession struct {
	Session
	// Preview is the first user message (by timestamp, then id) with CR
	// and LF as spaces, cut to 63 characters, trimmed, then cut to 60 plus
	// "..." when longer than 60; "" when there is none.
	Preview string `json:"preview"`
	// LastActive is the newest message timestamp, or started_at.
	LastActive float64 `json:"last_active"`
}

const previewColumns = `
	COALESCE((SELECT SUBSTR(REPLACE(REPLACE(m.content, char(13), ' '), char(10), ' '), 1, 63)
		FROM messages m
		WHERE m.session_id = s.id AND m.role = 'user' AND m.content IS NOT NULL
		ORDER BY m.timestamp, m.id LIMIT 1), '') AS preview,
	COALESCE((SELECT MAX(m2.timestamp) FROM messages m2 WHERE m2.session_id = s.id), s.started_at) AS last_active`

// Recent lists the newest sessions by started_at (limit < 1 means 20),
// with their preview and last activity (the seed's "recent sessions with
// preview" query).
func (r *Reader) Recent(ctx context.Context, limit int) ([]RecentSession, error) {
	if limit < 1 {
		limit = 20
	}
	out, err := recentSessions(ctx, r.db,
		"SELECT "+sessionColumns+", "+previewColumns+" FROM sessions s ORDER BY s.started_at DESC, s.id DESC LIMIT ?", limit)
	if err != nil {
		return nil, fmt.Errorf("recent sessions: %w", err)
	}
	return out, nil
}

func recentSessions(ctx context.Context, q queryer, query string, args ...any) ([]RecentSession, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []RecentSession
	for rows.Next() {
		var rs RecentSession
		var preview string
		s, err := scanSession(rows, &preview, &rs.LastActive)
		if err != nil {
			return nil, err
		}
		rs.Session = s
		rs.Preview = listPreview(preview)
		out = append(out, rs)
	}
	return out, rows.Err()
}

// listPreview finishes list_sessions_rich's preview in Go as Hermes does
// in Python: trim, then 60 characters plus "...".
func listPreview(raw string) string {
	text := strings.TrimSpace(raw)
	if runeLen(text) > 60 {
		return firstRunes(text, 60) + "..."
	}
	return text
}

// ModelUsage is the token use of the sessions of one model.
type ModelUsage struct {
	Model        string   `json:"model"`
	SessionCount int64    `json:"session_count"`
	TotalInput   int64    `json:"total_input"`
	TotalOutput  int64    `json:"total_output"`
	TotalCost    *float64 `json:"total_cost"`
}

// TokenStats returns token totals by model (sessions without a model are
// left out), the most expensive first (no cost last, then by model). The
// token totals saturate near the int64 maximum (at the largest float64
// below it) rather than fail: SQLite's SUM raises an error when an integer
// sum overflows, so they are summed as floats, exact below 2^53.
func (r *Reader) TokenStats(ctx context.Context) ([]ModelUsage, error) {
	rows, err := r.db.QueryContext(ctx, `
		SELECT model, COUNT(*) AS session_count,
			CAST(MIN(TOTAL(input_tokens), 9223372036854774784.0) AS INTEGER) AS total_input,
			CAST(MIN(TOTAL(output_tokens), 9223372036854774784.0) AS INTEGER) AS total_output,
			SUM(estimated_cost_usd) AS total_cost
		FROM sessions WHERE model IS NOT NULL
		GROUP BY model ORDER BY total_cost DESC, model`)
	if err != nil {
		return nil, fmt.Errorf("token stats: %w", err)
	}
	defer rows.Close()
	var out []ModelUsage
	for rows.Next() {
		var u ModelUsage
		var cost sql.NullFloat64
		if err := rows.Scan(&u.Model, &u.SessionCount, &u.TotalInput, &u.TotalOutput, &cost); err != nil {
			return nil, fmt.Errorf("token stats: %w", err)
		}
		u.TotalCost = floatPtr(cost)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("token stats: %w", err)
	}
	return out, nil
}

// SessionExport is a session row with its messages (Hermes'
// export_session): the active ones, as Messages returns them.
type SessionExport struct {
	Session
	Messages []Message `json:"messages"`
	// LastActive is the session's last activity (its latest message, or
	// its start) as ExportAll orders by, for the JSONL export, which
	// carries it as Hermes' export_all does; not part of the API's export.
	LastActive *float64 `json:"-"`
}

// ExportSession returns a session with its messages, or [ErrNotFound].
func (r *Reader) ExportSession(ctx context.Context, id string) (SessionExport, error) {
	var out SessionExport
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		s, err := getSession(ctx, tx, id)
		if err != nil {
			return err
		}
		msgs, err := queryMessages(ctx, tx, "SELECT "+messageColumns+
			" FROM messages WHERE session_id = ? AND active = 1 ORDER BY id", id)
		if err != nil {
			return err
		}
		out = SessionExport{Session: s, Messages: msgs}
		return nil
	})
	if err != nil {
		return SessionExport{}, fmt.Errorf("export session %s: %w", id, err)
	}
	return out, nil
}

// maxExportSessions is Hermes' export_all page (search_sessions limit).
const maxExportSessions = 100000

// ExportAll exports every session ("" for any source) with its messages,
// most recently active first (then started_at and id, newest first).
func (r *Reader) ExportAll(ctx context.Context, source string) ([]SessionExport, error) {
	var out []SessionExport
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		q := "SELECT " + sessionColumns + ", " + previewColumns + " FROM sessions s"
		var args []any
		if source != "" {
			q += " WHERE s.source = ?"
			args = append(args, source)
		}
		q += " ORDER BY last_active DESC, s.started_at DESC, s.id DESC LIMIT ?"
		args = append(args, maxExportSessions)
		sessions, err := recentSessions(ctx, tx, q, args...)
		if err != nil {
			return err
		}
		for _, s := range sessions {
			msgs, err := queryMessages(ctx, tx, "SELECT "+messageColumns+
				" FROM messages WHERE session_id = ? AND active = 1 ORDER BY id", s.ID)
			if err != nil {
				return err
			}
			last := s.LastActive
			out = append(out, SessionExport{Session: s.Session, Messages: msgs, LastActive: &last})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("export sessions: %w", err)
	}
	return out, nil
}

// PrunableSessions returns the ids of the sessions Hermes' prune_sessions
// would delete at now: ended, and started before now − olderThan (age
// counts from the start, and a session still open is never pruned), of
// one source unless source is "". Oldest first. The caller appends
// events.TranscriptDeleted (reason pruned) for each.
func (r *Reader) PrunableSessions(ctx context.Context, olderThan time.Duration, source string, now time.Time) ([]string, error) {
	q := "SELECT id FROM sessions WHERE started_at < ? AND ended_at IS NOT NULL"
	args := []any{unixSeconds(now) - olderThan.Seconds()}
	if source != "" {
		q += " AND source = ?"
		args = append(args, source)
	}
	q += " ORDER BY started_at, id"
	rows, err := r.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("prunable sessions: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("prunable sessions: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("prunable sessions: %w", err)
	}
	return ids, nil
}

// uniqueMatch runs a query that selects at most two session ids and
// returns the id when exactly one matched, else ErrNotFound (none, or
// ambiguous).
func uniqueMatch(ctx context.Context, tx *sql.Tx, query string, args ...any) (string, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return "", err
		}
		found = append(found, s)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if len(found) != 1 {
		return "", ErrNotFound
	}
	return found[0], nil
}
