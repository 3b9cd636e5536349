package transcripts

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"hermes/events"
)

// importedSessionColumns are the sessions columns an imported row sets:
// all of them.
const importedSessionColumns = `id, source, user_id, model, model_config, system_prompt, parent_session_id,
	started_at, ended_at, end_reason, message_count, tool_call_count, input_tokens, output_tokens,
	cache_read_tokens, cache_write_tokens, reasoning_tokens, billing_provider, billing_base_url,
	billing_mode, estimated_cost_usd, actual_cost_usd, cost_status, cost_source, pricing_version,
	title, api_call_count, handoff_state, handoff_platform, handoff_error, rewind_count, archived, extra`

// importedMessageColumns are the messages columns an imported row sets:
// all of them, its original id and active flag included.
const importedMessageColumns = `id, session_id, role, content, tool_call_id, tool_calls, tool_name,
	timestamp, token_count, finish_reason, reasoning, reasoning_content, reasoning_details,
	codex_reasoning_items, codex_message_items, active, extra`

const importedMessageArgs = 17

// statement returns the statement for sql under name, prepared on first
// use and closed with the others.
func (s *writeStatements) statement(ctx context.Context, name, query string) (*sql.Stmt, error) {
	k := multiKey{table: name}
	if st, ok := s.multi[k]; ok {
		return st, nil
	}
	st, err := s.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare %s: %w", name, err)
	}
	s.multi[k] = st
	return st, nil
}

// sessionImported writes Hermes' sessions row as it was. A row that
// exists already (a lane event named the session first) takes every
// imported column. A parent that is not in state.db is stored as NULL,
// and a title another session holds already as NULL, as for the native
// events: a batch must never fail on a constraint.
func (a *applier) sessionImported(e events.SessionImported) error {
	var parent any
	if e.ParentSessionID != nil && *e.ParentSessionID != "" && *e.ParentSessionID != e.SessionID {
		var n int
		if err := a.s.sessionExists.QueryRowContext(a.ctx, *e.ParentSessionID).Scan(&n); err != nil {
			return fmt.Errorf("read parent session: %w", err)
		}
		if n > 0 {
			parent = *e.ParentSessionID
		}
	}
	title := nullPtr(e.Title)
	if e.Title != nil {
		var owner string
		err := a.s.titleOwner.QueryRowContext(a.ctx, *e.Title, e.SessionID).Scan(&owner)
		switch {
		case err == nil:
			title = nil
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("read title owner: %w", err)
		}
	}
	cols := strings.Split(importedSessionColumns, ",")
	set := make([]string, 0, len(cols)-1)
	for _, c := range cols[1:] {
		c = strings.TrimSpace(c)
		set = append(set, c+" = excluded."+c)
	}
	st, err := a.s.statement(a.ctx, "import-session", "INSERT INTO sessions ("+importedSessionColumns+") VALUES ("+
		placeholders(len(cols))+") ON CONFLICT(id) DO UPDATE SET "+strings.Join(set, ", "))
	if err != nil {
		return err
	}
	a.known[e.SessionID] = true
	_, err = st.ExecContext(a.ctx, e.SessionID, e.Source, nullPtr(e.UserID), nullPtr(e.Model), nullPtr(e.ModelConfig),
		nullPtr(e.SystemPrompt), parent, e.StartedAt, nullPtr(e.EndedAt), nullPtr(e.EndReason),
		e.MessageCount, e.ToolCallCount, e.InputTokens, e.OutputTokens, e.CacheReadTokens, e.CacheWriteTokens,
		e.ReasoningTokens, nullPtr(e.BillingProvider), nullPtr(e.BillingBaseURL), nullPtr(e.BillingMode),
		nullPtr(e.EstimatedCostUSD), nullPtr(e.ActualCostUSD), nullPtr(e.CostStatus), nullPtr(e.CostSource),
		nullPtr(e.PricingVersion), title, e.APICallCount, nullPtr(e.HandoffState), nullPtr(e.HandoffPlatform),
		nullPtr(e.HandoffError), e.RewindCount, archivedOf(e.Extra), extraJSON(e.Extra))
	if err != nil {
		return fmt.Errorf("import session %s: %w", e.SessionID, err)
	}
	return nil
}

// messagesImported inserts Hermes' rows with their original ids, columns
// and active flags; the session's counters are the imported ones and do
// not change. A row whose id is taken already (the home had messages of
// its own before the import) gets the next free id instead: the same one
// on every replay, since the log fixes the order.
func (a *applier) messagesImported(e events.MessagesImported) error {
	if len(e.Messages) == 0 {
		return nil
	}
	if err := a.ensureSession(e.SessionID, e.At); err != nil {
		return err
	}
	taken, err := a.takenIDs(e.Messages)
	if err != nil {
		return err
	}
	free := make([]events.ImportedMessage, 0, len(e.Messages))
	var moved []events.ImportedMessage
	for _, m := range e.Messages {
		if taken[m.ID] {
			moved = append(moved, m)
			continue
		}
		free = append(free, m)
	}
	for start, size := 0, 0; start < len(free); start += size {
		size = chunkSize(len(free) - start)
		if err := a.insertImported(e.SessionID, free[start:start+size], true); err != nil {
			return err
		}
	}
	for _, m := range moved {
		if err := a.insertImported(e.SessionID, []events.ImportedMessage{m}, false); err != nil {
			return err
		}
	}
	return nil
}

// takenIDs returns which of the messages' ids are in use already.
func (a *applier) takenIDs(msgs []events.ImportedMessage) (map[int64]bool, error) {
	lo, hi := msgs[0].ID, msgs[0].ID
	for _, m := range msgs {
		lo, hi = min(lo, m.ID), max(hi, m.ID)
	}
	st, err := a.s.statement(a.ctx, "import-taken", "SELECT id FROM messages WHERE id BETWEEN ? AND ?")
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(a.ctx, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("read message ids: %w", err)
	}
	defer rows.Close()
	inRange := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("read message ids: %w", err)
		}
		inRange[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read message ids: %w", err)
	}
	taken := map[int64]bool{}
	for _, m := range msgs {
		if inRange[m.ID] {
			taken[m.ID] = true
		}
	}
	return taken, nil
}

func (a *applier) insertImported(sessionID string, msgs []events.ImportedMessage, keepID bool) error {
	name := fmt.Sprintf("import-messages-%d", len(msgs))
	if !keepID {
		name = "import-message-moved"
	}
	row := "(" + placeholders(importedMessageArgs) + ")"
	var b strings.Builder
	b.WriteString("INSERT INTO messages (" + importedMessageColumns + ") VALUES ")
	for i := range msgs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	st, err := a.s.statement(a.ctx, name, b.String())
	if err != nil {
		return err
	}
	args := make([]any, 0, len(msgs)*importedMessageArgs)
	for _, m := range msgs {
		var id any = m.ID
		if !keepID {
			id = nil
		}
		active := 0
		if m.Active {
			active = 1
		}
		args = append(args, id, sessionID, m.Role, nullPtr(m.Content), nullPtr(m.ToolCallID), nullPtr(m.ToolCalls),
			nullPtr(m.ToolName), m.Timestamp, nullPtr(m.TokenCount), nullPtr(m.FinishReason), nullPtr(m.Reasoning),
			nullPtr(m.ReasoningContent), nullPtr(m.ReasoningDetails), nullPtr(m.CodexReasoningItems),
			nullPtr(m.CodexMessageItems), active, extraJSON(m.Extra))
	}
	if _, err := st.ExecContext(a.ctx, args...); err != nil {
		return fmt.Errorf("import messages of %s: %w", sessionID, err)
	}
	return nil
}

// extraJSON is an imported row's columns beyond schema 11 as one JSON
// object (keys sorted), or NULL when it had none.
func extraJSON(extra map[string]json.RawMessage) any {
	if len(extra) == 0 {
		return nil
	}
	data, err := json.Marshal(extra)
	if err != nil {
		return nil
	}
	return string(data)
}

// archivedOf is Hermes' sessions.archived (set_session_archived, schema
// v20+), which hermes has too: 1 when the imported row had it set.
func archivedOf(extra map[string]json.RawMessage) int {
	var v float64
	if raw, ok := extra["archived"]; ok && json.Unmarshal(raw, &v) == nil && v != 0 {
		return 1
	}
	return 0
}

// laneImported records the lane's platform and user for the sessions a
// later /new starts on it. The session row itself comes from state.db
// (transcript.session_imported), not from the routing entry.
func (a *applier) laneImported(stream string, e events.LaneImported) error {
	return a.setOrigin(stream, originOf(e.Platform, e.Origin))
}
