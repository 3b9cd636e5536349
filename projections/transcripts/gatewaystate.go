package transcripts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"hermes/events"
)

// The state a gateway keeps beside its transcripts (Hermes' state_meta,
// the sessions' handoff columns, the Telegram DM topic tables) joins the
// one list of state.db events here.
func init() {
	stateEvents[events.TypeMetaSet] = stateHandler{sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		m := e.(events.MetaSet)
		return a.setMeta(m.Key, m.Value)
	}}
	stateEvents[events.TypeSessionMetaSet] = stateHandler{sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		m := e.(events.SessionMetaSet)
		return a.setMeta(m.Key, m.Value)
	}}
	stateEvents[events.TypeHandoffRequested] = stateHandler{sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		h := e.(events.HandoffRequested)
		return a.handoff(h.SessionID, `handoff_state = 'pending', handoff_platform = ?, handoff_error = NULL`, h.Platform)
	}}
	stateEvents[events.TypeHandoffClaimed] = stateHandler{sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		return a.handoff(e.(events.HandoffClaimed).SessionID, `handoff_state = 'running'`)
	}}
	stateEvents[events.TypeHandoffCompleted] = stateHandler{sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		return a.handoff(e.(events.HandoffCompleted).SessionID, `handoff_state = 'completed', handoff_error = NULL`)
	}}
	stateEvents[events.TypeHandoffFailed] = stateHandler{sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		h := e.(events.HandoffFailed)
		return a.handoff(h.SessionID, `handoff_state = 'failed', handoff_error = ?`, h.Error)
	}}
	stateEvents[events.TypeTopicModeEnabled] = stateHandler{sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		return a.topicModeEnabled(e.(events.TopicModeEnabled))
	}}
	stateEvents[events.TypeTopicModeDisabled] = stateHandler{sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		return a.topicModeDisabled(e.(events.TopicModeDisabled))
	}}
	stateEvents[events.TypeTopicBound] = stateHandler{sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		return a.topicBound(e.(events.TopicBound))
	}}
	stateEvents[events.TypeTopicsErased] = stateHandler{sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		return a.topicsErased(e.(events.TopicsErased))
	}}
	// A deleted session takes its state along: its topic binding (Hermes'
	// ON DELETE CASCADE) and the state_meta values about it (their events
	// are erased with its transcript).
	deleted := stateEvents[events.TypeTranscriptDeleted]
	stateEvents[events.TypeTranscriptDeleted] = stateHandler{apply: func(a *applier, stream string, e events.Event) error {
		if err := deleted.apply(a, stream, e); err != nil {
			return err
		}
		return a.dropSessionState(e.(events.TranscriptDeleted).SessionID)
	}}
}

// createTopicTables creates Hermes' Telegram DM topic tables in their v2
// shape (a binding goes with its session) with the first topic event, as
// Hermes' /topic does: a state.db of a home that never used topic mode has
// none (and its readers answer as Hermes' do without them).
func (a *applier) createTopicTables() error {
	if a.topicTables {
		return nil
	}
	_, err := a.s.conn.ExecContext(a.ctx, `
		CREATE TABLE IF NOT EXISTS telegram_dm_topic_mode (
			chat_id TEXT PRIMARY KEY,
			user_id TEXT NOT NULL,
			enabled INTEGER NOT NULL DEFAULT 1,
			activated_at REAL NOT NULL,
			updated_at REAL NOT NULL,
			has_topics_enabled INTEGER,
			allows_users_to_create_topics INTEGER,
			capability_checked_at REAL,
			intro_message_id TEXT,
			pinned_message_id TEXT
		);
		CREATE TABLE IF NOT EXISTS telegram_dm_topic_bindings (
			chat_id TEXT NOT NULL,
			thread_id TEXT NOT NULL,
			user_id TEXT NOT NULL,
			session_key TEXT NOT NULL,
			session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
			managed_mode TEXT NOT NULL DEFAULT 'auto',
			linked_at REAL NOT NULL,
			updated_at REAL NOT NULL,
			PRIMARY KEY (chat_id, thread_id)
		);
		CREATE UNIQUE INDEX IF NOT EXISTS idx_telegram_dm_topic_bindings_session ON telegram_dm_topic_bindings(session_id);
		CREATE INDEX IF NOT EXISTS idx_telegram_dm_topic_bindings_user ON telegram_dm_topic_bindings(user_id, chat_id);`)
	if err != nil {
		return fmt.Errorf("create the Telegram topic tables: %w", err)
	}
	a.topicTables = true
	return nil
}

// hasTopicTables reports whether the topic tables exist (q: the writer's
// connection or a reader's transaction).
func hasTopicTables(ctx context.Context, q queryer) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'telegram_dm_topic_bindings'`).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look for the Telegram topic tables: %w", err)
	}
	return n > 0, nil
}

func (a *applier) setMeta(key, value string) error {
	_, err := a.s.conn.ExecContext(a.ctx, `INSERT INTO state_meta (key, value) VALUES (?, ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, value)
	if err != nil {
		return fmt.Errorf("set meta %q: %w", key, err)
	}
	return nil
}

// handoff updates a session's handoff columns (a session the read model no
// longer holds changes nothing).
func (a *applier) handoff(sessionID, set string, args ...any) error {
	_, err := a.s.conn.ExecContext(a.ctx, `UPDATE sessions SET `+set+` WHERE id = ?`, append(args, sessionID)...)
	if err != nil {
		return fmt.Errorf("handoff of %s: %w", sessionID, err)
	}
	return nil
}

func boolArg(b *bool) any {
	if b == nil {
		return nil
	}
	if *b {
		return 1
	}
	return 0
}

func (a *applier) topicModeEnabled(e events.TopicModeEnabled) error {
	if err := a.createTopicTables(); err != nil {
		return err
	}
	at := unixSeconds(e.At)
	_, err := a.s.conn.ExecContext(a.ctx, `INSERT INTO telegram_dm_topic_mode (
			chat_id, user_id, enabled, activated_at, updated_at, has_topics_enabled, allows_users_to_create_topics, capability_checked_at)
		VALUES (?, ?, 1, ?, ?, ?, ?, ?)
		ON CONFLICT(chat_id) DO UPDATE SET user_id = excluded.user_id, enabled = 1, updated_at = excluded.updated_at,
			has_topics_enabled = excluded.has_topics_enabled,
			allows_users_to_create_topics = excluded.allows_users_to_create_topics,
			capability_checked_at = excluded.capability_checked_at`,
		e.ChatID, e.UserID, at, at, boolArg(e.HasTopicsEnabled), boolArg(e.AllowsUsersToCreateTopics), at)
	if err != nil {
		return fmt.Errorf("enable topic mode of %s: %w", e.ChatID, err)
	}
	return nil
}

func (a *applier) topicModeDisabled(e events.TopicModeDisabled) error {
	if err := a.createTopicTables(); err != nil {
		return err
	}
	if _, err := a.s.conn.ExecContext(a.ctx, `UPDATE telegram_dm_topic_mode SET enabled = 0, updated_at = ? WHERE chat_id = ?`,
		unixSeconds(e.At), e.ChatID); err != nil {
		return fmt.Errorf("disable topic mode of %s: %w", e.ChatID, err)
	}
	if !e.ClearBindings {
		return nil
	}
	if _, err := a.s.conn.ExecContext(a.ctx, `DELETE FROM telegram_dm_topic_bindings WHERE chat_id = ?`, e.ChatID); err != nil {
		return fmt.Errorf("clear topic bindings of %s: %w", e.ChatID, err)
	}
	return nil
}

// topicBound upserts the topic's binding as Hermes does; a session bound to
// another topic before (the command refuses that; a rebuild keeps the log's
// order) gives that binding up first, and a session the read model no
// longer holds is bound to nothing.
func (a *applier) topicBound(e events.TopicBound) error {
	if err := a.createTopicTables(); err != nil {
		return err
	}
	at := unixSeconds(e.At)
	if _, err := a.s.conn.ExecContext(a.ctx, `DELETE FROM telegram_dm_topic_bindings
		WHERE session_id = ? AND NOT (chat_id = ? AND thread_id = ?)`, e.SessionID, e.ChatID, e.ThreadID); err != nil {
		return fmt.Errorf("bind topic %s: %w", e.ThreadID, err)
	}
	_, err := a.s.conn.ExecContext(a.ctx, `INSERT INTO telegram_dm_topic_bindings (
			chat_id, thread_id, user_id, session_key, session_id, managed_mode, linked_at, updated_at)
		SELECT ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?)
		ON CONFLICT(chat_id, thread_id) DO UPDATE SET user_id = excluded.user_id, session_key = excluded.session_key,
			session_id = excluded.session_id, managed_mode = excluded.managed_mode, updated_at = excluded.updated_at`,
		e.ChatID, e.ThreadID, e.UserID, e.SessionKey, e.SessionID, e.ManagedMode, at, at, e.SessionID)
	if err != nil {
		return fmt.Errorf("bind topic %s: %w", e.ThreadID, err)
	}
	return nil
}

// topicsErased forgets the user of a chat's topic rows (a person erasure).
func (a *applier) topicsErased(e events.TopicsErased) error {
	if err := a.createTopicTables(); err != nil {
		return err
	}
	for _, q := range []string{`UPDATE telegram_dm_topic_mode SET user_id = '' WHERE chat_id = ?`,
		`UPDATE telegram_dm_topic_bindings SET user_id = '' WHERE chat_id = ?`} {
		if _, err := a.s.conn.ExecContext(a.ctx, q, e.ChatID); err != nil {
			return fmt.Errorf("erase topic users of %s: %w", e.ChatID, err)
		}
	}
	return nil
}

// dropSessionState removes a deleted session's topic binding and its
// state_meta values (keys ending in ":<session id>").
func (a *applier) dropSessionState(sessionID string) error {
	tables := a.topicTables
	if !tables {
		var err error
		if tables, err = hasTopicTables(a.ctx, a.s.conn); err != nil {
			return err
		}
	}
	if tables {
		if _, err := a.s.conn.ExecContext(a.ctx, `DELETE FROM telegram_dm_topic_bindings WHERE session_id = ?`, sessionID); err != nil {
			return fmt.Errorf("drop topic binding of %s: %w", sessionID, err)
		}
	}
	suffix := ":" + sessionID
	if _, err := a.s.conn.ExecContext(a.ctx, `DELETE FROM state_meta WHERE length(key) > ? AND substr(key, -?) = ?`,
		len(suffix), len(suffix), suffix); err != nil {
		return fmt.Errorf("drop meta of %s: %w", sessionID, err)
	}
	return nil
}

// Meta returns a state_meta value set through set_meta (hermes' own keys,
// hermes_*, are not answered), and false when unset.
func (r *Reader) Meta(ctx context.Context, key string) (string, bool, error) {
	if strings.HasPrefix(key, "hermes_") {
		return "", false, nil
	}
	var v sql.NullString
	err := r.db.QueryRowContext(ctx, `SELECT value FROM state_meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("meta %q: %w", key, err)
	}
	return v.String, v.Valid, nil
}

// HandoffState returns the session's handoff columns (state "" when none),
// and ErrNotFound for an unknown session.
func (r *Reader) HandoffState(ctx context.Context, sessionID string) (state, platform, reason *string, err error) {
	err = r.db.QueryRowContext(ctx, `SELECT handoff_state, handoff_platform, handoff_error FROM sessions WHERE id = ?`, sessionID).
		Scan(&state, &platform, &reason)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, nil, fmt.Errorf("session %s: %w", sessionID, ErrNotFound)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("handoff of %s: %w", sessionID, err)
	}
	return state, platform, reason, nil
}

// PendingHandoffs is Hermes' list_pending_handoffs: the session rows in
// handoff_state 'pending', oldest started first.
func (r *Reader) PendingHandoffs(ctx context.Context) ([]map[string]any, error) {
	return r.queryMaps(ctx, "pending handoffs", `SELECT * FROM sessions WHERE handoff_state = 'pending' ORDER BY started_at ASC, id ASC`)
}

func (r *Reader) queryMaps(ctx context.Context, what, query string, args ...any) ([]map[string]any, error) {
	return r.queryMapsOr(ctx, what, query, "", args...)
}

// queryMapsOr runs query, or, when the Telegram topic tables do not exist
// and fallback is not "", fallback (with the same arguments); a topic query
// without fallback then answers no rows.
func (r *Reader) queryMapsOr(ctx context.Context, what, query, fallback string, args ...any) ([]map[string]any, error) {
	var out []map[string]any
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		if strings.Contains(query, "telegram_dm_topic_") {
			ok, err := hasTopicTables(ctx, tx)
			if err != nil {
				return err
			}
			if !ok && fallback == "" {
				return nil
			}
			if !ok {
				query = fallback
			}
		}
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = scanMaps(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// TopicMode returns the topic-mode row of a chat, or nil.
func (r *Reader) TopicMode(ctx context.Context, chatID string) (map[string]any, error) {
	rows, err := r.queryMaps(ctx, "topic mode", `SELECT * FROM telegram_dm_topic_mode WHERE chat_id = ?`, chatID)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return rows[0], nil
}

// TopicBinding returns the binding of a chat's topic, or nil.
func (r *Reader) TopicBinding(ctx context.Context, chatID, threadID string) (map[string]any, error) {
	rows, err := r.queryMaps(ctx, "topic binding", `SELECT * FROM telegram_dm_topic_bindings WHERE chat_id = ? AND thread_id = ?`, chatID, threadID)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return rows[0], nil
}

// TopicBindings returns a chat's bindings, most recently updated first.
func (r *Reader) TopicBindings(ctx context.Context, chatID string) ([]map[string]any, error) {
	return r.queryMaps(ctx, "topic bindings", `SELECT * FROM telegram_dm_topic_bindings WHERE chat_id = ? ORDER BY updated_at DESC, thread_id`, chatID)
}

// TopicBindingOfSession returns the binding of a session, or nil.
func (r *Reader) TopicBindingOfSession(ctx context.Context, sessionID string) (map[string]any, error) {
	rows, err := r.queryMaps(ctx, "topic binding", `SELECT * FROM telegram_dm_topic_bindings WHERE session_id = ?`, sessionID)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return rows[0], nil
}

// UnlinkedTelegramSessions is Hermes' list_unlinked_telegram_sessions_for_user:
// the user's telegram sessions bound to no topic, with preview and
// last_active, most recently active first.
func (r *Reader) UnlinkedTelegramSessions(ctx context.Context, userID string, limit int) ([]map[string]any, error) {
	const query = `SELECT s.*,
		COALESCE((SELECT SUBSTR(REPLACE(REPLACE(m.content, X'0A', ' '), X'0D', ' '), 1, 63) FROM messages m
			WHERE m.session_id = s.id AND m.role = 'user' AND m.content IS NOT NULL
			ORDER BY m.timestamp, m.id LIMIT 1), '') AS preview,
		COALESCE((SELECT MAX(m2.timestamp) FROM messages m2 WHERE m2.session_id = s.id), s.started_at) AS last_active
		FROM sessions s
		WHERE s.source = 'telegram' AND s.user_id = ? %s
		ORDER BY last_active DESC, s.started_at DESC LIMIT ?`
	// Without the topic tables no session is bound (Hermes' fallback).
	out, err := r.queryMapsOr(ctx, "unlinked telegram sessions",
		fmt.Sprintf(query, "AND NOT EXISTS (SELECT 1 FROM telegram_dm_topic_bindings b WHERE b.session_id = s.id)"),
		fmt.Sprintf(query, ""), userID, limit)
	if err != nil {
		return nil, err
	}
	for _, row := range out {
		row["preview"] = preview(row["preview"])
	}
	return out, nil
}

// Around is Hermes' get_messages_around: up to window messages before the
// anchor, the anchor and up to window after, by id (rewound rows too, as
// Hermes' query has them), with the counts of those before and after. An
// anchor not in the session gives an empty window.
type Around struct {
	Window         []Message `json:"window"`
	MessagesBefore int       `json:"messages_before"`
	MessagesAfter  int       `json:"messages_after"`
}

// MessagesAround returns the window around message anchor of sessionID.
func (r *Reader) MessagesAround(ctx context.Context, sessionID string, anchor int64, window int) (Around, error) {
	window = max(window, 0)
	out := Around{Window: []Message{}}
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM messages WHERE id = ? AND session_id = ?`, anchor, sessionID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		before, err := queryMessages(ctx, tx, "SELECT "+messageColumns+" FROM messages WHERE session_id = ? AND id <= ? ORDER BY id DESC LIMIT ?",
			sessionID, anchor, window+1)
		if err != nil {
			return err
		}
		after, err := queryMessages(ctx, tx, "SELECT "+messageColumns+" FROM messages WHERE session_id = ? AND id > ? ORDER BY id ASC LIMIT ?",
			sessionID, anchor, window)
		if err != nil {
			return err
		}
		for i := len(before) - 1; i >= 0; i-- {
			out.Window = append(out.Window, before[i])
		}
		out.Window = append(out.Window, after...)
		out.MessagesBefore, out.MessagesAfter = max(0, len(before)-1), len(after)
		return nil
	})
	if err != nil {
		return Around{}, fmt.Errorf("messages around %d of %s: %w", anchor, sessionID, err)
	}
	return out, nil
}

// Anchored is Hermes' get_anchored_view: the window around the anchor
// (filtered to keepRoles, the anchor always kept) and the session's first
// and last bookend messages outside it (of keepRoles, with content).
type Anchored struct {
	Around
	BookendStart []Message `json:"bookend_start"`
	BookendEnd   []Message `json:"bookend_end"`
}

// AnchoredView returns the anchored view; keepRoles nil keeps every role.
func (r *Reader) AnchoredView(ctx context.Context, sessionID string, anchor int64, window, bookend int, keepRoles []string) (Anchored, error) {
	bookend = max(bookend, 0)
	around, err := r.MessagesAround(ctx, sessionID, anchor, window)
	if err != nil {
		return Anchored{}, err
	}
	out := Anchored{Around: around, BookendStart: []Message{}, BookendEnd: []Message{}}
	if len(around.Window) == 0 {
		return out, nil
	}
	if keepRoles != nil {
		keep := map[string]bool{}
		for _, role := range keepRoles {
			keep[role] = true
		}
		filtered := []Message{}
		for _, m := range around.Window {
			if m.ID == anchor || keep[m.Role] {
				filtered = append(filtered, m)
			}
		}
		out.Window = filtered
	}
	if bookend == 0 {
		return out, nil
	}
	first, last := around.Window[0].ID, around.Window[len(around.Window)-1].ID
	roles, args := "", []any{}
	if keepRoles != nil {
		roles = " AND role IN (" + placeholders(len(keepRoles)) + ")"
		args = anySlice(keepRoles)
	}
	err = r.readTx(ctx, func(tx *sql.Tx) error {
		start, err := queryMessages(ctx, tx, "SELECT "+messageColumns+" FROM messages WHERE session_id = ? AND id < ?"+roles+
			" AND length(content) > 0 ORDER BY id ASC LIMIT ?", append(append([]any{sessionID, first}, args...), bookend)...)
		if err != nil {
			return err
		}
		end, err := queryMessages(ctx, tx, "SELECT "+messageColumns+" FROM messages WHERE session_id = ? AND id > ?"+roles+
			" AND length(content) > 0 ORDER BY id DESC LIMIT ?", append(append([]any{sessionID, last}, args...), bookend)...)
		if err != nil {
			return err
		}
		out.BookendStart = append(out.BookendStart, start...)
		for i := len(end) - 1; i >= 0; i-- {
			out.BookendEnd = append(out.BookendEnd, end[i])
		}
		return nil
	})
	if err != nil {
		return Anchored{}, fmt.Errorf("anchored view of %s: %w", sessionID, err)
	}
	return out, nil
}
