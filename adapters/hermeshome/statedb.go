package hermeshome

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	_ "modernc.org/sqlite"

	"hermes/events"
)

// Columns of schema v11 (plus the later sessions.rewind_count and
// messages.active) that the import events carry by name. Any other column
// goes to the events' Extra.
var (
	sessionColumns = []string{"id", "source", "user_id", "model", "model_config", "system_prompt",
		"parent_session_id", "started_at", "ended_at", "end_reason", "message_count", "tool_call_count",
		"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
		"billing_provider", "billing_base_url", "billing_mode", "estimated_cost_usd", "actual_cost_usd",
		"cost_status", "cost_source", "pricing_version", "title", "api_call_count", "handoff_state",
		"handoff_platform", "handoff_error", "rewind_count"}
	messageColumns = []string{"id", "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name",
		"timestamp", "token_count", "finish_reason", "reasoning", "reasoning_content", "reasoning_details",
		"codex_reasoning_items", "codex_message_items", "active"}
)

// knownTables are the tables of state.db the import reads or knowingly
// leaves: FTS indexes are rebuilt from the messages, state_meta and
// schema_version are Hermes' own bookkeeping.
func knownTable(name string) bool {
	switch {
	case name == "sessions", name == "messages", name == "schema_version", name == "state_meta",
		name == "gateway_routing", name == "system_prompts", name == "session_turn_leases",
		name == "gateway_hygiene_state", name == "session_model_usage", name == "async_delegations",
		name == "compression_locks",
		strings.HasPrefix(name, "sqlite_"), name == "messages_fts", name == "messages_fts_trigram",
		strings.HasPrefix(name, "messages_fts_"):
		return true
	}
	return false
}

// ErrHermesReadModel: the state.db is the read model hermes itself builds
// (after an import into the same home, the Python file was moved aside).
var ErrHermesReadModel = errors.New("state.db is hermes' own read model, not a Python Hermes database")

// StateDB is a Hermes state.db opened read-only.
type StateDB struct {
	db           *sql.DB
	Version      int
	sessionCols  []string // present, in select order: known first, then extra
	sessionExtra int      // index in sessionCols where the extras start
	messageCols  []string
	messageExtra int
	hasActive    bool
	tables       map[string]bool
	promptHash   bool // sessions.system_prompt_hash and system_prompts exist (schema v25+)
	path         string
	settled      os.FileInfo // the file as opened immutable, or nil
}

// Changed reports whether a state.db opened immutable was written to
// while it was read (then the import read a moving file: run it again).
func (s *StateDB) Changed() bool {
	if s.settled == nil {
		return false
	}
	st, err := os.Stat(s.path)
	if err != nil {
		return true
	}
	if _, err := os.Stat(s.path + "-wal"); err == nil {
		return true
	}
	return st.Size() != s.settled.Size() || !st.ModTime().Equal(s.settled.ModTime())
}

// OpenStateDB opens path read-only (never creating it) and takes stock of
// its schema: the version, the columns it has beyond v11 (kept in the log)
// and the tables the import does not read (reported with their row
// counts).
//
// A state.db with no -wal and no -shm beside it (Hermes closed it
// cleanly) is opened immutable, so that reading it creates no file in the
// Hermes home; [StateDB.Changed] then tells whether anything wrote to it
// meanwhile. A state.db with a -wal is read through it (SQLite may then
// update the -shm index, never the database or the WAL).
func OpenStateDB(ctx context.Context, path string, rep *Report) (*StateDB, error) {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if st, err := os.Stat(p); err == nil && !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%w: %s is not a regular file (%s)", ErrUnsafeFile, p, describeMode(st.Mode()))
		}
	}
	q := url.Values{}
	q.Set("mode", "ro")
	var settled os.FileInfo
	_, errWAL := os.Stat(path + "-wal")
	_, errSHM := os.Stat(path + "-shm")
	if errors.Is(errWAL, os.ErrNotExist) && errors.Is(errSHM, os.ErrNotExist) {
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		settled = st
		q.Set("immutable", "1")
	} else {
		rep.Add(Info, "state.db", "has a -wal or -shm file (not closed cleanly, or in use): read through it, read-only")
	}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "query_only(1)")
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	s := &StateDB{db: db, path: path, settled: settled}
	if err := s.inventory(ctx, rep); err != nil {
		db.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return s, nil
}

// Close closes the database.
func (s *StateDB) Close() error { return s.db.Close() }

func (s *StateDB) inventory(ctx context.Context, rep *Report) error {
	if err := s.requireTables(ctx); err != nil {
		return err
	}
	var owner string
	if err := s.db.QueryRowContext(ctx, "SELECT value FROM state_meta WHERE key = 'hermes_projection'").Scan(&owner); err == nil {
		return fmt.Errorf("%w (%s)", ErrHermesReadModel, owner)
	}
	var v sql.NullInt64
	err := s.db.QueryRowContext(ctx, "SELECT version FROM schema_version LIMIT 1").Scan(&v)
	switch {
	case err == nil:
		s.Version = int(v.Int64)
	case errors.Is(err, sql.ErrNoRows) || strings.Contains(err.Error(), "no such table"):
		rep.Add(Info, "state.db", "no schema_version: read by column names")
	default:
		return fmt.Errorf("schema version: %w", err)
	}
	if s.Version > 11 {
		rep.Add(Info, "state.db", "schema version %d is newer than 11: columns and tables beyond v11 are reported below", s.Version)
	}
	var err2 error
	s.sessionCols, s.sessionExtra, err2 = columns(ctx, s.db, "sessions", sessionColumns, []string{"id", "source", "started_at"}, rep)
	if err2 != nil {
		return err2
	}
	s.messageCols, s.messageExtra, err2 = columns(ctx, s.db, "messages", messageColumns, []string{"id", "session_id", "role", "timestamp"}, rep)
	if err2 != nil {
		return err2
	}
	s.hasActive = slices.Contains(s.messageCols[:s.messageExtra], "active")
	rows, err := s.db.QueryContext(ctx, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	var tables []string
	s.tables = map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return fmt.Errorf("list tables: %w", err)
		}
		tables = append(tables, name)
		s.tables[name] = true
	}
	rows.Close()
	s.promptHash = s.tables["system_prompts"] && slices.Contains(s.sessionCols, "system_prompt_hash")
	if err := s.reportUnimported(ctx, rep); err != nil {
		return err
	}
	for _, t := range tables {
		if t == "state_meta" {
			var n int
			_ = s.db.QueryRowContext(ctx, "SELECT count(*) FROM state_meta").Scan(&n)
			rep.Add(Info, "state.db table state_meta", "Hermes' bookkeeping (%d rows) not imported: hermes keeps its own", n)
			continue
		}
		if knownTable(t) {
			continue
		}
		var n int
		if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM "+quoteIdent(t)).Scan(&n); err != nil {
			rep.Add(Skipped, "state.db table "+t, "unknown table not imported (rows could not be counted: %v)", err)
			continue
		}
		rep.Add(Skipped, "state.db table "+t, "unknown table not imported (%d rows)", n)
	}
	return nil
}

// requireTables refuses a state.db where a name the import reads is not a
// table: a view (over an endless recursive query, say) or a trigger cannot
// stand in for Hermes' tables.
func (s *StateDB) requireTables(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, "SELECT name, type FROM sqlite_schema WHERE lower(name) IN ('sessions', 'messages', 'schema_version', 'state_meta', 'gateway_routing', 'system_prompts', 'session_turn_leases', 'gateway_hygiene_state') AND type != 'table'")
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	defer rows.Close()
	if rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return fmt.Errorf("list tables: %w", err)
		}
		return fmt.Errorf("%w: %s is a %s, not a table as in Hermes' state.db", ErrUnsafeFile, name, typ)
	}
	return rows.Err()
}

// columns lists the columns of table the import selects: the known ones
// present, then the extra ones (reported). required must all be present.
func columns(ctx context.Context, db *sql.DB, table string, known, required []string, rep *Report) ([]string, int, error) {
	rows, err := db.QueryContext(ctx, "SELECT name FROM pragma_table_info(?)", table)
	if err != nil {
		return nil, 0, fmt.Errorf("columns of %s: %w", table, err)
	}
	defer rows.Close()
	present := map[string]bool{}
	var order []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, 0, fmt.Errorf("columns of %s: %w", table, err)
		}
		present[name] = true
		order = append(order, name)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("columns of %s: %w", table, err)
	}
	for _, c := range required {
		if !present[c] {
			return nil, 0, fmt.Errorf("table %s has no column %s: not a Hermes state.db", table, c)
		}
	}
	var cols []string
	for _, c := range known {
		if present[c] {
			cols = append(cols, c)
		}
	}
	n := len(cols)
	for _, c := range order {
		if !slices.Contains(known, c) {
			cols = append(cols, c)
			rep.Add(Kept, "state.db column "+table+"."+c, "not in schema v11: kept in the log (the events' extra), not in the read model")
		}
	}
	return cols, n, nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func selectList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = quoteIdent(c)
	}
	return strings.Join(q, ", ")
}

// SessionCount and MessageCount count the rows.
func (s *StateDB) Counts(ctx context.Context) (sessions, messages int64, err error) {
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM sessions").Scan(&sessions); err != nil {
		return 0, 0, fmt.Errorf("count sessions: %w", err)
	}
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM messages").Scan(&messages); err != nil {
		return 0, 0, fmt.Errorf("count messages: %w", err)
	}
	return sessions, messages, nil
}

// Session is a sessions row ready to import, with how many message rows
// it has.
type Session struct {
	Event    events.SessionImported
	Messages int64
}

// Sessions reads every sessions row, parents before their children (then
// by start and id), cleaning what an event cannot hold. Rows that cannot
// be transcripts are skipped and reported.
func (s *StateDB) Sessions(ctx context.Context, rep *Report) ([]Session, error) {
	counts := map[string]int64{}
	rows, err := s.db.QueryContext(ctx, "SELECT session_id, count(*) FROM messages GROUP BY session_id")
	if err != nil {
		return nil, fmt.Errorf("count messages: %w", err)
	}
	for rows.Next() {
		var id sql.NullString
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("count messages: %w", err)
		}
		counts[id.String] = n
	}
	rows.Close()

	prompts, err := s.systemPrompts(ctx)
	if err != nil {
		return nil, err
	}
	rows, err = s.db.QueryContext(ctx, "SELECT "+selectList(s.sessionCols)+" FROM sessions")
	if err != nil {
		return nil, fmt.Errorf("read sessions: %w", err)
	}
	defer rows.Close()
	var out []Session
	seen := map[string]bool{}
	vals := make([]any, len(s.sessionCols))
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("read sessions: %w", err)
		}
		c := cells{names: s.sessionCols, vals: vals, known: s.sessionExtra}
		id, _ := c.rawText("id")
		c.where = "state.db session " + printable(id)
		c.rep = rep
		seen[id] = true
		if err := validSessionID(id); err != nil {
			rep.Add(Skipped, c.where, "session id: %v (its %d messages are skipped with it)", err, counts[id])
			continue
		}
		e := events.SessionImported{
			SessionID:        id,
			Source:           deref(c.text("source")),
			UserID:           c.text("user_id"),
			Model:            c.text("model"),
			ModelConfig:      c.text("model_config"),
			SystemPrompt:     c.text("system_prompt"),
			ParentSessionID:  c.text("parent_session_id"),
			EndReason:        c.text("end_reason"),
			MessageCount:     c.counter("message_count"),
			ToolCallCount:    c.counter("tool_call_count"),
			InputTokens:      c.counter("input_tokens"),
			OutputTokens:     c.counter("output_tokens"),
			CacheReadTokens:  c.counter("cache_read_tokens"),
			CacheWriteTokens: c.counter("cache_write_tokens"),
			ReasoningTokens:  c.counter("reasoning_tokens"),
			BillingProvider:  c.text("billing_provider"),
			BillingBaseURL:   c.text("billing_base_url"),
			BillingMode:      c.text("billing_mode"),
			EstimatedCostUSD: c.real("estimated_cost_usd"),
			ActualCostUSD:    c.real("actual_cost_usd"),
			CostStatus:       c.text("cost_status"),
			CostSource:       c.text("cost_source"),
			PricingVersion:   c.text("pricing_version"),
			Title:            c.text("title"),
			APICallCount:     c.counter("api_call_count"),
			HandoffState:     c.text("handoff_state"),
			HandoffPlatform:  c.text("handoff_platform"),
			HandoffError:     c.text("handoff_error"),
			RewindCount:      c.counter("rewind_count"),
			Extra:            c.extra(),
		}
		if e.SystemPrompt == nil && prompts != nil {
			// Schema v25 keeps each prompt once in system_prompts: the row
			// names it by system_prompt_hash (Hermes reads
			// COALESCE(sp.prompt, s.system_prompt)).
			if h, ok := e.Extra["system_prompt_hash"]; ok {
				var hash string
				if json.Unmarshal(h, &hash) == nil && hash != "" {
					if p, ok := prompts[hash]; ok {
						e.SystemPrompt = &p
					} else {
						rep.Add(Clamped, c.where, "system_prompt_hash %s names no system_prompts row: no system prompt", printable(hash))
					}
				}
			}
		}
		if started := c.real("started_at"); started != nil {
			e.StartedAt = *started
		} else {
			rep.Add(Clamped, c.where, "started_at is not a time: 0")
		}
		e.EndedAt = c.real("ended_at")
		e.At = events.EpochTime(e.StartedAt)
		out = append(out, Session{Event: e, Messages: counts[id]})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read sessions: %w", err)
	}
	for id, n := range counts {
		if !seen[id] {
			rep.Add(Skipped, "state.db messages of "+printable(id), "%d messages of a session with no sessions row not imported", n)
		}
	}
	return parentsFirst(out), nil
}

// parentsFirst orders sessions by start then id, and moves every parent
// before its children, so the read model can link them as they come.
func parentsFirst(in []Session) []Session {
	slices.SortFunc(in, func(a, b Session) int {
		if a.Event.StartedAt != b.Event.StartedAt {
			if a.Event.StartedAt < b.Event.StartedAt {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Event.SessionID, b.Event.SessionID)
	})
	byID := make(map[string]int, len(in))
	for i, s := range in {
		byID[s.Event.SessionID] = i
	}
	done := make([]bool, len(in))
	out := make([]Session, 0, len(in))
	var visit func(i, depth int)
	visit = func(i, depth int) {
		if done[i] {
			return
		}
		done[i] = true // set first: a cycle ends here
		if p := in[i].Event.ParentSessionID; p != nil && depth < 1000 {
			if j, ok := byID[*p]; ok {
				visit(j, depth+1)
			}
		}
		out = append(out, in[i])
	}
	for i := range in {
		visit(i, 0)
	}
	return out
}

// Messages yields the messages of a session in id order, cleaned.
func (s *StateDB) Messages(ctx context.Context, sessionID string, rep *Report) iter.Seq2[events.ImportedMessage, error] {
	return func(yield func(events.ImportedMessage, error) bool) {
		rows, err := s.db.QueryContext(ctx, "SELECT "+selectList(s.messageCols)+" FROM messages WHERE session_id = ? ORDER BY id", sessionID)
		if err != nil {
			yield(events.ImportedMessage{}, fmt.Errorf("read messages of %s: %w", sessionID, err))
			return
		}
		defer rows.Close()
		vals := make([]any, len(s.messageCols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				yield(events.ImportedMessage{}, fmt.Errorf("read messages of %s: %w", sessionID, err))
				return
			}
			c := cells{names: s.messageCols, vals: vals, known: s.messageExtra, rep: rep}
			id, _ := vals[0].(int64)
			c.where = "state.db message " + strconv.FormatInt(id, 10)
			m := events.ImportedMessage{
				ID:                  id,
				Role:                deref(c.text("role")),
				Content:             c.text("content"),
				ToolCallID:          c.text("tool_call_id"),
				ToolCalls:           c.text("tool_calls"),
				ToolName:            c.text("tool_name"),
				TokenCount:          c.integer("token_count"),
				FinishReason:        c.text("finish_reason"),
				Reasoning:           c.text("reasoning"),
				ReasoningContent:    c.text("reasoning_content"),
				ReasoningDetails:    c.text("reasoning_details"),
				CodexReasoningItems: c.text("codex_reasoning_items"),
				CodexMessageItems:   c.text("codex_message_items"),
				Active:              true,
				Extra:               c.extra(),
			}
			if ts := c.real("timestamp"); ts != nil {
				m.Timestamp = *ts
			} else {
				rep.Add(Clamped, c.where, "timestamp is not a time: 0")
			}
			if s.hasActive {
				if a := c.integer("active"); a != nil && *a == 0 {
					m.Active = false
				}
			}
			if !yield(m, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(events.ImportedMessage{}, fmt.Errorf("read messages of %s: %w", sessionID, err))
		}
	}
}

// cells reads one row's values by column name, cleaning and reporting.
type cells struct {
	names []string
	vals  []any
	known int
	where string
	rep   *Report
}

func (c cells) get(name string) (any, bool) {
	for i := 0; i < c.known; i++ {
		if c.names[i] == name {
			return c.vals[i], true
		}
	}
	return nil, false
}

// rawText is the value as text, uncleaned.
func (c cells) rawText(name string) (string, bool) {
	v, _ := c.get(name)
	switch v := v.(type) {
	case string:
		return v, true
	case []byte:
		return string(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	}
	return "", false
}

// text is a TEXT column: nil for NULL; invalid UTF-8 replaced (reported).
func (c cells) text(name string) *string {
	s, ok := c.rawText(name)
	if !ok {
		return nil
	}
	if !utf8.ValidString(s) {
		c.rep.Add(Clamped, c.where, "%s is not valid UTF-8: invalid bytes replaced with U+FFFD", name)
		s = cleanString(s)
	}
	return &s
}

// integer is an INTEGER column: nil for NULL; a real is truncated, text
// that is not a number is reported and read as NULL.
func (c cells) integer(name string) *int64 {
	v, _ := c.get(name)
	var n int64
	switch v := v.(type) {
	case nil:
		return nil
	case int64:
		n = v
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > maxCount {
			c.rep.Add(Clamped, c.where, "%s %v is out of range: NULL", name, v)
			return nil
		}
		n = int64(v)
	default:
		s, _ := c.rawText(name)
		parsed, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			c.rep.Add(Clamped, c.where, "%s %q is not a number: NULL", name, printable(s))
			return nil
		}
		n = parsed
	}
	return &n
}

// counter is a counter column: NULL is 0; negatives and values past 2^53
// are clamped (reported).
func (c cells) counter(name string) int64 {
	p := c.integer(name)
	if p == nil {
		return 0
	}
	switch n := *p; {
	case n < 0:
		c.rep.Add(Clamped, c.where, "%s %d is negative: 0", name, n)
		return 0
	case n > maxCount:
		c.rep.Add(Clamped, c.where, "%s %d is out of range: %d", name, n, int64(maxCount))
		return maxCount
	default:
		return n
	}
}

// real is a REAL column: nil for NULL; Infinity (NaN cannot be stored) is
// reported and read as NULL.
func (c cells) real(name string) *float64 {
	v, _ := c.get(name)
	var f float64
	switch v := v.(type) {
	case nil:
		return nil
	case float64:
		f = v
	case int64:
		f = float64(v)
	default:
		s, _ := c.rawText(name)
		parsed, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			c.rep.Add(Clamped, c.where, "%s %q is not a number: NULL", name, printable(s))
			return nil
		}
		f = parsed
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		c.rep.Add(Clamped, c.where, "%s is %v: NULL", name, f)
		return nil
	}
	return &f
}

// extra is the row's columns beyond the known ones, as JSON values.
func (c cells) extra() map[string]json.RawMessage {
	if c.known == len(c.names) {
		return nil
	}
	out := make(map[string]json.RawMessage, len(c.names)-c.known)
	for i := c.known; i < len(c.names); i++ {
		var data []byte
		switch v := c.vals[i].(type) {
		case nil:
			data = []byte("null")
		case int64:
			data = strconv.AppendInt(nil, v, 10)
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				data = []byte("null")
			} else {
				data, _ = json.Marshal(v)
			}
		case string:
			data, _ = json.Marshal(cleanString(v))
		case []byte:
			if utf8.Valid(v) {
				data, _ = json.Marshal(string(v))
			} else {
				data, _ = json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(v)})
			}
		default:
			data, _ = json.Marshal(fmt.Sprint(v))
		}
		out[cleanString(c.names[i])] = data
	}
	return out
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
