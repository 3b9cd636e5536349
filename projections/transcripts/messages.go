package transcripts

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Message is one row of a transcript as Hermes' get_messages returns it:
// every column, with content decoded (text as a JSON string, a list of
// parts or an object as itself, NULL as null) and tool_calls parsed
// (invalid JSON becomes []; absent is null).
type Message struct {
	ID                  int64           `json:"id"`
	SessionID           string          `json:"session_id"`
	Role                string          `json:"role"`
	Content             json.RawMessage `json:"content"`
	ToolCallID          *string         `json:"tool_call_id"`
	ToolCalls           json.RawMessage `json:"tool_calls"`
	ToolName            *string         `json:"tool_name"`
	Timestamp           float64         `json:"timestamp"`
	TokenCount          *int64          `json:"token_count"`
	FinishReason        *string         `json:"finish_reason"`
	Reasoning           *string         `json:"reasoning"`
	ReasoningContent    *string         `json:"reasoning_content"`
	ReasoningDetails    *string         `json:"reasoning_details"`
	CodexReasoningItems *string         `json:"codex_reasoning_items"`
	CodexMessageItems   *string         `json:"codex_message_items"`
	Active              bool            `json:"active"`
	// Extra is an imported row's columns of a newer Hermes schema by name;
	// absent for rows hermes wrote itself.
	Extra json.RawMessage `json:"extra,omitempty"`
}

const messageColumns = `id, session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp,
	token_count, finish_reason, reasoning, reasoning_content, reasoning_details,
	codex_reasoning_items, codex_message_items, COALESCE(active, 1), extra`

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface {
	Scan(dest ...any) error
}

// storedMessage is a messages row as stored.
type storedMessage struct {
	id                                              int64
	sessionID, role                                 string
	content, toolCallID, toolCalls, toolName        sql.NullString
	timestamp                                       float64
	tokenCount                                      sql.NullInt64
	finishReason, reasoning, reasoningContent       sql.NullString
	reasoningDetails, codexReasoning, codexMessages sql.NullString
	extra                                           sql.NullString
	active                                          int64
}

func scanMessage(s rowScanner) (storedMessage, error) {
	var m storedMessage
	err := s.Scan(&m.id, &m.sessionID, &m.role, &m.content, &m.toolCallID, &m.toolCalls, &m.toolName,
		&m.timestamp, &m.tokenCount, &m.finishReason, &m.reasoning, &m.reasoningContent,
		&m.reasoningDetails, &m.codexReasoning, &m.codexMessages, &m.active, &m.extra)
	return m, err
}

func (m storedMessage) message() Message {
	out := Message{
		ID:                  m.id,
		SessionID:           m.sessionID,
		Role:                m.role,
		Content:             decodeContent(m.content),
		ToolCallID:          ptrOf(m.toolCallID),
		ToolName:            ptrOf(m.toolName),
		Timestamp:           m.timestamp,
		FinishReason:        ptrOf(m.finishReason),
		Reasoning:           ptrOf(m.reasoning),
		ReasoningContent:    ptrOf(m.reasoningContent),
		ReasoningDetails:    ptrOf(m.reasoningDetails),
		CodexReasoningItems: ptrOf(m.codexReasoning),
		CodexMessageItems:   ptrOf(m.codexMessages),
		Active:              m.active != 0,
	}
	if m.tokenCount.Valid {
		n := m.tokenCount.Int64
		out.TokenCount = &n
	}
	if m.toolCalls.Valid && m.toolCalls.String != "" {
		out.ToolCalls = parseJSONOr(m.toolCalls.String, json.RawMessage("[]"))
	}
	if m.extra.Valid && json.Valid([]byte(m.extra.String)) {
		out.Extra = json.RawMessage(m.extra.String)
	}
	return out
}

func ptrOf(v sql.NullString) *string {
	if !v.Valid {
		return nil
	}
	s := v.String
	return &s
}

// Messages returns the messages of a session ordered by id, as Hermes'
// get_messages: only active rows unless includeInactive (rows hidden by a
// rewind). An unknown session has no messages.
func (r *Reader) Messages(ctx context.Context, sessionID string, includeInactive bool) ([]Message, error) {
	q := "SELECT " + messageColumns + " FROM messages WHERE session_id = ?"
	if !includeInactive {
		q += " AND active = 1"
	}
	q += " ORDER BY id"
	out, err := queryMessages(ctx, r.db, q, sessionID)
	if err != nil {
		return nil, fmt.Errorf("messages of %s: %w", sessionID, err)
	}
	return out, nil
}

func queryMessages(ctx context.Context, q queryer, query string, args ...any) ([]Message, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Message{} // a session without messages exports "messages": [], as Hermes' export_session
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m.message())
	}
	return out, rows.Err()
}

// ChatMessage is one message in the OpenAI chat format Hermes replays to a
// model (get_messages_as_conversation). Optional keys are left out as
// Hermes leaves them out: tool_call_id, tool_name, finish_reason and
// reasoning when empty; reasoning_content only when NULL (an empty string
// is kept); reasoning_details and the codex items when not stored (and
// null when stored but not valid JSON).
type ChatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// Timestamp is the message's time in Unix seconds, as Hermes gives it
	// (omitted only for a row without one).
	Timestamp           float64         `json:"timestamp,omitempty"`
	ToolCallID          string          `json:"tool_call_id,omitempty"`
	ToolName            string          `json:"tool_name,omitempty"`
	ToolCalls           json.RawMessage `json:"tool_calls,omitempty"`
	FinishReason        string          `json:"finish_reason,omitempty"`
	Reasoning           string          `json:"reasoning,omitempty"`
	ReasoningContent    *string         `json:"reasoning_content,omitempty"`
	ReasoningDetails    json.RawMessage `json:"reasoning_details,omitempty"`
	CodexReasoningItems json.RawMessage `json:"codex_reasoning_items,omitempty"`
	CodexMessageItems   json.RawMessage `json:"codex_message_items,omitempty"`
}

// maxLineageHops bounds the walk up parent_session_id links (Hermes: 100).
const maxLineageHops = 100

// Conversation returns a session's active messages in the OpenAI chat
// format, ordered by id, as Hermes' get_messages_as_conversation. With
// includeAncestors the messages of the whole parent chain come first (root
// to tip, at most 100 sessions), and a user message that repeats the
// previous user message with no assistant reply (content or tool calls)
// between them is dropped: a compression split replays the last prompt.
func (r *Reader) Conversation(ctx context.Context, sessionID string, includeAncestors bool) ([]ChatMessage, error) {
	var out []ChatMessage
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		ids := []string{sessionID}
		if includeAncestors {
			var err error
			if ids, err = lineageRootToTip(ctx, tx, sessionID); err != nil {
				return err
			}
		}
		q := "SELECT " + messageColumns + " FROM messages WHERE session_id IN (" + placeholders(len(ids)) +
			") AND active = 1 ORDER BY id"
		rows, err := tx.QueryContext(ctx, q, anySlice(ids)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			m, err := scanMessage(rows)
			if err != nil {
				return err
			}
			msg := m.chatMessage()
			if includeAncestors && replayedUserMessage(out, msg) {
				continue
			}
			out = append(out, msg)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("conversation of %s: %w", sessionID, err)
	}
	return out, nil
}

// lineageRootToTip walks parent links up from id (at most 100 sessions,
// stopping at a loop or a missing row) and returns the chain root first.
func lineageRootToTip(ctx context.Context, q queryer, id string) ([]string, error) {
	var chain []string
	seen := map[string]bool{}
	current := id
	for range maxLineageHops {
		if current == "" || seen[current] {
			break
		}
		seen[current] = true
		chain = append(chain, current)
		var parent sql.NullString
		err := q.QueryRowContext(ctx, "SELECT parent_session_id FROM sessions WHERE id = ?", current).Scan(&parent)
		if errors.Is(err, sql.ErrNoRows) {
			break
		}
		if err != nil {
			return nil, err
		}
		current = parent.String
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	if len(chain) == 0 {
		chain = []string{id}
	}
	return chain, nil
}

func (m storedMessage) chatMessage() ChatMessage {
	content := decodeContent(m.content)
	if m.role == "user" || m.role == "assistant" {
		if s, ok := asString(content); ok {
			content = jsonString(strings.TrimSpace(stripMemoryContext(s)))
		}
	}
	out := ChatMessage{Role: m.role, Content: content, Timestamp: m.timestamp, ToolCallID: m.toolCallID.String, ToolName: m.toolName.String}
	if m.toolCalls.String != "" {
		out.ToolCalls = parseJSONOr(m.toolCalls.String, json.RawMessage("[]"))
	}
	if m.role == "assistant" {
		out.FinishReason = m.finishReason.String
		out.Reasoning = m.reasoning.String
		out.ReasoningContent = ptrOf(m.reasoningContent)
		if m.reasoningDetails.String != "" {
			out.ReasoningDetails = parseJSONOr(m.reasoningDetails.String, json.RawMessage("null"))
		}
		if m.codexReasoning.String != "" {
			out.CodexReasoningItems = parseJSONOr(m.codexReasoning.String, json.RawMessage("null"))
		}
		if m.codexMessages.String != "" {
			out.CodexMessageItems = parseJSONOr(m.codexMessages.String, json.RawMessage("null"))
		}
	}
	return out
}

// replayedUserMessage is Hermes' _is_duplicate_replayed_user_message.
func replayedUserMessage(prev []ChatMessage, msg ChatMessage) bool {
	if msg.Role != "user" {
		return false
	}
	text, ok := asString(msg.Content)
	if !ok || text == "" {
		return false
	}
	for i := len(prev) - 1; i >= 0; i-- {
		p := prev[i]
		if p.Role == "user" {
			if s, ok := asString(p.Content); ok && s == text {
				return true
			}
		}
		if p.Role == "assistant" && (truthy(p.Content) || truthy(p.ToolCalls)) {
			return false
		}
	}
	return false
}

// The memory context a memory provider injects into a prompt, which Hermes
// strips before replaying a transcript (agent/memory_manager.py
// sanitize_context): whole fenced blocks, the system note, stray fence tags.
var (
	memoryContextBlock = regexp.MustCompile(`(?i)<\s*memory-context\s*>[\s\S]*?</\s*memory-context\s*>`)
	memoryContextNote  = regexp.MustCompile(`(?i)\[System note:\s*The following is recalled memory context,\s*NOT new user input\.\s*Treat as (?:informational background data|authoritative reference data[^\]]*)\.\]\s*`)
	memoryContextFence = regexp.MustCompile(`(?i)</?\s*memory-context\s*>`)
)

func stripMemoryContext(s string) string {
	if !strings.Contains(strings.ToLower(s), "memory") {
		return s
	}
	for _, re := range []*regexp.Regexp{memoryContextBlock, memoryContextNote, memoryContextFence} {
		s = re.ReplaceAllLiteralString(s, "")
	}
	return s
}

// UserMessage is a user message as Hermes' list_recent_user_messages lists
// it for /rewind: the preview is its text with whitespace runs collapsed,
// cut to 77 characters plus "..." when longer than 80.
type UserMessage struct {
	ID        int64   `json:"id"`
	Timestamp float64 `json:"timestamp"`
	Preview   string  `json:"preview"`
}

// RecentUserMessages returns a session's active user messages, newest
// first, at most limit (limit < 1 reads none).
func (r *Reader) RecentUserMessages(ctx context.Context, sessionID string, limit int) ([]UserMessage, error) {
	var out []UserMessage
	err := r.recentUserMessages(ctx, sessionID, limit, func(m storedMessage) {
		out = append(out, UserMessage{ID: m.id, Timestamp: m.timestamp, Preview: rewindPreview(decodeContent(m.content))})
	})
	if err != nil {
		return nil, fmt.Errorf("recent user messages of %s: %w", sessionID, err)
	}
	return out, nil
}

func (r *Reader) recentUserMessages(ctx context.Context, sessionID string, limit int, each func(storedMessage)) error {
	if limit < 1 {
		return nil
	}
	rows, err := r.db.QueryContext(ctx, "SELECT "+messageColumns+
		" FROM messages WHERE session_id = ? AND role = 'user' AND active = 1 ORDER BY id DESC LIMIT ?", sessionID, limit)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return err
		}
		each(m)
	}
	return rows.Err()
}

func rewindPreview(content json.RawMessage) string {
	text := strings.Join(strings.Fields(previewText(content, " ")), " ")
	if runeLen(text) > 80 {
		return firstRunes(text, 77) + "..."
	}
	return text
}

// ErrNoUserMessages: a rewind was asked of a session with no active user
// message.
var ErrNoUserMessages = errors.New("no user messages to rewind to")

// Rewind is the target of a /rewind (Hermes' gateway rewind_session):
// the user message to rewind to, how many turns that undoes, and its text
// (to put back in the input box; a list of parts gives its text parts
// joined by newlines).
type Rewind struct {
	TargetID    int64  `json:"target_id"`
	TurnsUndone int    `json:"turns_undone"`
	TargetText  string `json:"target_text"`
}

// RewindTarget finds the user message n turns back (n < 1 counts as 1;
// past the oldest user message, the oldest). It fails with
// [ErrNoUserMessages] when the session has none. The caller appends
// events.TurnsRewound for it.
func (r *Reader) RewindTarget(ctx context.Context, sessionID string, n int) (Rewind, error) {
	if n < 1 {
		n = 1
	}
	var recents []storedMessage
	err := r.recentUserMessages(ctx, sessionID, max(n, 10), func(m storedMessage) { recents = append(recents, m) })
	if err != nil {
		return Rewind{}, fmt.Errorf("rewind %s: %w", sessionID, err)
	}
	if len(recents) == 0 {
		return Rewind{}, fmt.Errorf("rewind %s: %w", sessionID, ErrNoUserMessages)
	}
	idx := min(n-1, len(recents)-1)
	target := recents[idx]
	content := decodeContent(target.content)
	text, ok := asString(content)
	if !ok {
		parts, _ := textParts(content)
		text = strings.Join(parts, "\n")
	}
	return Rewind{TargetID: target.id, TurnsUndone: idx + 1, TargetText: text}, nil
}

// MessageRange is what one event inserted into messages: Count rows from
// FirstID on (ids are consecutive within one event).
type MessageRange struct {
	SessionID string `json:"session_id"`
	FirstID   int64  `json:"first_id"`
	Count     int    `json:"count"`
}

// IDs lists the row ids of the range.
func (m MessageRange) IDs() []int64 {
	ids := make([]int64, m.Count)
	for i := range ids {
		ids[i] = m.FirstID + int64(i)
	}
	return ids
}

// MessageIDs returns the message rows inserted by the event at a global
// position (a message_appended: one row; a rewrite: all of them). It fails
// with [ErrNotFound] when that event inserted no message or has not been
// applied yet (wait for the projection first).
func (r *Reader) MessageIDs(ctx context.Context, position uint64) (MessageRange, error) {
	var m MessageRange
	var first sql.NullInt64
	st, err := r.stmts.Stmt(ctx, r.db, "SELECT session_id, first_id, count FROM hermes_message_events WHERE position = ?")
	if err == nil {
		err = st.QueryRowContext(ctx, int64(position)).Scan(&m.SessionID, &first, &m.Count)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return MessageRange{}, fmt.Errorf("message ids of position %d: %w", position, ErrNotFound)
	}
	if err != nil {
		return MessageRange{}, fmt.Errorf("message ids of position %d: %w", position, err)
	}
	m.FirstID = first.Int64
	return m, nil
}

func placeholders(n int) string {
	if n == 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
