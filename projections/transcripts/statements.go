package transcripts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"hermes/domain"
)

// The caps of the token and cost sums of a session row, as SQL literals
// (domain/clamp.go). SQLite turns an integer sum that overflows into a
// REAL, which MIN then brings back to the integer cap.
var (
	maxTokensSQL = strconv.FormatInt(domain.MaxTokens, 10)
	maxCostSQL   = strconv.FormatFloat(domain.MaxCostUSD, 'e', -1, 64)
)

// writeStatements are prepared once on the write connection and reused by
// every batch.
type writeStatements struct {
	conn *sql.Conn
	list []*sql.Stmt
	// multi holds the multi-row inserts of messages and message events,
	// by table and row count, prepared when first needed.
	multi map[multiKey]*sql.Stmt

	getVersion, setCheckpoint, setNextID *sql.Stmt
	// begin, commit, rollback and getCheckpoint run once per batch: parsed
	// once here rather than on every Apply.
	begin, commit, rollback, getCheckpoint *sql.Stmt

	createSession, ensureSession, endSession, reopenSession *sql.Stmt
	sessionSource, sessionExists                            *sql.Stmt
	getOrigin, setOrigin                                    *sql.Stmt
	forgetOriginUser, forgetSessionUser                     *sql.Stmt

	insertMessage, insertMessageEvent, setCounts *sql.Stmt
	deleteMessages, rewindMessages, countRewind  *sql.Stmt
	titleOwner, setTitle, updateMetadata         *sql.Stmt
	orphanChildren, deleteSession                *sql.Stmt
}

func prepareWrites(ctx context.Context, conn *sql.Conn) (*writeStatements, error) {
	s := &writeStatements{conn: conn, multi: make(map[multiKey]*sql.Stmt)}
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&s.getVersion, "SELECT version FROM hermes_stream_versions WHERE stream = ?"},
		{&s.begin, "BEGIN IMMEDIATE"},
		{&s.commit, "COMMIT"},
		{&s.rollback, "ROLLBACK"},
		{&s.getCheckpoint, "SELECT value FROM state_meta WHERE key = '" + metaCheckpoint + "'"},
		{&s.setCheckpoint, "INSERT INTO state_meta (key, value) VALUES ('" + metaCheckpoint + "', ?) " +
			"ON CONFLICT(key) DO UPDATE SET value = excluded.value"},

		{&s.setNextID, "INSERT INTO state_meta (key, value) VALUES ('" + metaNextMessageID + "', ?) " +
			"ON CONFLICT(key) DO UPDATE SET value = excluded.value"},

		{&s.createSession, "INSERT OR IGNORE INTO sessions (id, source, user_id, started_at) VALUES (?, ?, ?, ?)"},
		{&s.ensureSession, "INSERT OR IGNORE INTO sessions (id, source, started_at) VALUES (?, '" + sourceUnknown + "', ?)"},
		{&s.endSession, "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL"},
		{&s.reopenSession, "UPDATE sessions SET ended_at = NULL, end_reason = NULL WHERE id = ?"},
		{&s.sessionSource, "SELECT source, user_id FROM sessions WHERE id = ?"},
		{&s.sessionExists, "SELECT count(*) FROM sessions WHERE id = ?"},
		{&s.getOrigin, "SELECT platform, user_id FROM hermes_lane_origins WHERE session_key = ?"},
		{&s.setOrigin, "INSERT INTO hermes_lane_origins (session_key, platform, user_id) VALUES (?, ?, ?) " +
			"ON CONFLICT(session_key) DO UPDATE SET platform = excluded.platform, user_id = excluded.user_id"},

		{&s.forgetOriginUser, "UPDATE hermes_lane_origins SET user_id = NULL WHERE session_key = ?"},
		{&s.forgetSessionUser, "UPDATE sessions SET user_id = NULL WHERE id = ?"},

		{&s.insertMessage, "INSERT INTO messages (" + messageColumnsInsert + ") VALUES (" + placeholders(messageInsertArgs) + ")"},
		{&s.insertMessageEvent, "INSERT OR REPLACE INTO hermes_message_events (position, session_id, first_id, count) VALUES (?, ?, ?, ?)"},
		{&s.setCounts, "UPDATE sessions SET message_count = ?, tool_call_count = ? WHERE id = ?"},
		{&s.deleteMessages, "DELETE FROM messages WHERE session_id = ?"},
		{&s.rewindMessages, "UPDATE messages SET active = 0 WHERE session_id = ? AND id >= ? AND active = 1"},
		{&s.countRewind, "UPDATE sessions SET rewind_count = COALESCE(rewind_count, 0) + 1 WHERE id = ?"},
		{&s.titleOwner, "SELECT id FROM sessions WHERE title = ? AND id != ? LIMIT 1"},
		{&s.setTitle, "UPDATE sessions SET title = ? WHERE id = ?"},
		{&s.updateMetadata, `UPDATE sessions SET
			model = COALESCE(model, ?),
			billing_provider = COALESCE(billing_provider, ?),
			billing_base_url = COALESCE(billing_base_url, ?),
			billing_mode = COALESCE(billing_mode, ?),
			cost_status = COALESCE(?, cost_status),
			cost_source = COALESCE(?, cost_source),
			pricing_version = COALESCE(?, pricing_version),
			model_config = COALESCE(?, model_config),
			system_prompt = COALESCE(?, system_prompt),
			parent_session_id = CASE WHEN ? THEN ? ELSE parent_session_id END,
			input_tokens = MIN(COALESCE(input_tokens, 0) + ?, ` + maxTokensSQL + `),
			output_tokens = MIN(COALESCE(output_tokens, 0) + ?, ` + maxTokensSQL + `),
			cache_read_tokens = MIN(COALESCE(cache_read_tokens, 0) + ?, ` + maxTokensSQL + `),
			cache_write_tokens = MIN(COALESCE(cache_write_tokens, 0) + ?, ` + maxTokensSQL + `),
			reasoning_tokens = MIN(COALESCE(reasoning_tokens, 0) + ?, ` + maxTokensSQL + `),
			api_call_count = MIN(COALESCE(api_call_count, 0) + ?, ` + maxTokensSQL + `),
			estimated_cost_usd = CASE WHEN ? IS NULL THEN estimated_cost_usd ELSE MIN(COALESCE(estimated_cost_usd, 0) + ?, ` + maxCostSQL + `) END,
			actual_cost_usd = CASE WHEN ? IS NULL THEN actual_cost_usd ELSE MIN(COALESCE(actual_cost_usd, 0) + ?, ` + maxCostSQL + `) END
			WHERE id = ?
			RETURNING input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens,
				api_call_count, estimated_cost_usd, actual_cost_usd`},
		{&s.orphanChildren, "UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id = ?"},
		{&s.deleteSession, "DELETE FROM sessions WHERE id = ?"},
	} {
		stmt, err := conn.PrepareContext(ctx, p.sql)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("prepare %q: %w", p.sql, err), s.close())
		}
		*p.stmt = stmt
		s.list = append(s.list, stmt)
	}
	return s, nil
}

func (s *writeStatements) close() error {
	var errs []error
	for _, st := range s.list {
		errs = append(errs, st.Close())
	}
	for _, st := range s.multi {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

// messageColumnsInsert are the columns a message insert sets: the id the
// projection numbered (messageIDs), the message (active takes its
// default, 1).
const messageColumnsInsert = `id, session_id, role, content, tool_call_id, tool_calls, tool_name,
	timestamp, token_count, finish_reason, reasoning, reasoning_content, reasoning_details,
	codex_reasoning_items, codex_message_items`

const messageInsertArgs = 15

type multiKey struct {
	table string
	rows  int
}

// paddedMessageRows is the size of the padded message insert that takes n
// rows (1 <= n <= maxMessageChunk): the next power of two, so that a few
// cached statements cover any count.
func paddedMessageRows(n int) int {
	c := 1
	for c < n {
		c *= 2
	}
	return c
}

// paddedMessageInsert returns the statement inserting up to rows messages
// at once: rows sets of messageInsertArgs parameters, of which the sets
// whose id is NULL (the padding after the real rows) insert nothing. One
// statement per batch matters: SQLite opens a statement savepoint for each
// INSERT that fires triggers, and FTS5 writes what it holds as a new
// segment of both indexes at every savepoint, so k statements for one
// batch would write k segments of each index (and merge them later).
func (s *writeStatements) paddedMessageInsert(ctx context.Context, rows int) (*sql.Stmt, error) {
	k := multiKey{"messages padded", rows}
	if st, ok := s.multi[k]; ok {
		return st, nil
	}
	var b strings.Builder
	b.WriteString("INSERT INTO messages (" + messageColumnsInsert + ") SELECT ")
	for i := range messageInsertArgs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "column%d", i+1)
	}
	b.WriteString(" FROM (VALUES ")
	row := "(" + placeholders(messageInsertArgs) + ")"
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	b.WriteString(") WHERE column1 IS NOT NULL")
	st, err := s.conn.PrepareContext(ctx, b.String())
	if err != nil {
		return nil, fmt.Errorf("prepare padded insert of %d messages: %w", rows, err)
	}
	s.multi[k] = st
	return st, nil
}

// Multi-row statements of a batch (multiStatement): one statement writes
// many rows, instead of one statement (and its database/sql and driver
// round trip) per row.
const (
	multiMessageEvents  = "hermes_message_events"
	multiStreamVersions = "hermes_stream_versions"
	multiSessionCounts  = "session counts"
)

// multiStatement returns the statement writing rows rows of kind
// (multiMessageEvents, multiStreamVersions or multiSessionCounts).
func (s *writeStatements) multiStatement(ctx context.Context, kind string, rows int) (*sql.Stmt, error) {
	k := multiKey{kind, rows}
	if st, ok := s.multi[k]; ok {
		return st, nil
	}
	var head, row, tail string
	switch kind {
	case multiMessageEvents:
		head = "INSERT OR REPLACE INTO hermes_message_events (position, session_id, first_id, count) VALUES "
		row = "(?, ?, ?, ?)"
	case multiStreamVersions:
		head = "INSERT INTO hermes_stream_versions (stream, version) VALUES "
		row = "(?, ?)"
		tail = " ON CONFLICT(stream) DO UPDATE SET version = excluded.version"
	case multiSessionCounts:
		// Each row: session id, messages and tool calls to add.
		head = "UPDATE sessions SET message_count = COALESCE(message_count, 0) + v.column2, " +
			"tool_call_count = COALESCE(tool_call_count, 0) + v.column3 FROM (VALUES "
		row = "(?, ?, ?)"
		tail = ") AS v WHERE sessions.id = v.column1"
	default:
		return nil, fmt.Errorf("prepare %d rows of %s: no such statement", rows, kind)
	}
	var b strings.Builder
	b.WriteString(head)
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	b.WriteString(tail)
	st, err := s.conn.PrepareContext(ctx, b.String())
	if err != nil {
		return nil, fmt.Errorf("prepare %d rows of %s: %w", rows, kind, err)
	}
	s.multi[k] = st
	return st, nil
}

// execMulti writes rows with the multi-row statements of kind, at most
// chunkSize rows a statement; appendRow appends one row's parameters.
func execMulti[T any](ctx context.Context, s *writeStatements, kind string, rows []T, appendRow func(args []any, row T) []any) error {
	var args []any
	for start, size := 0, 0; start < len(rows); start += size {
		size = chunkSize(len(rows) - start)
		st, err := s.multiStatement(ctx, kind, size)
		if err != nil {
			return err
		}
		args = args[:0]
		for _, row := range rows[start : start+size] {
			args = appendRow(args, row)
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("write %s: %w", kind, err)
		}
	}
	return nil
}
