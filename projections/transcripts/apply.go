package transcripts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"hermes/events"
)

// Hermes' end_reason strings for the sessions a lane leaves behind.
const (
	EndSessionReset  = "session_reset"
	EndSessionSwitch = "session_switch"
)

// sourceUnknown is the source Hermes gives a session row it had to create
// without knowing where the session came from.
const sourceUnknown = "unknown"

// writeStatements are prepared once on the write connection and reused by
// every batch.
type writeStatements struct {
	conn *sql.Conn
	list []*sql.Stmt
	// multi holds the multi-row inserts of messages and message events,
	// by table and row count, prepared when first needed.
	multi map[multiKey]*sql.Stmt

	getVersion, setVersion, setCheckpoint *sql.Stmt

	createSession, ensureSession, endSession, reopenSession *sql.Stmt
	sessionSource, sessionExists                            *sql.Stmt
	getOrigin, setOrigin                                    *sql.Stmt

	insertMessage, insertMessageEvent, addCounts, setCounts *sql.Stmt
	deleteMessages, rewindMessages, countRewind             *sql.Stmt
	titleOwner, setTitle, updateMetadata                    *sql.Stmt
	orphanChildren, deleteSession                           *sql.Stmt
}

func prepareWrites(ctx context.Context, conn *sql.Conn) (*writeStatements, error) {
	s := &writeStatements{conn: conn, multi: make(map[multiKey]*sql.Stmt)}
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&s.getVersion, "SELECT version FROM hermes_stream_versions WHERE stream = ?"},
		{&s.setVersion, "INSERT INTO hermes_stream_versions (stream, version) VALUES (?, ?) " +
			"ON CONFLICT(stream) DO UPDATE SET version = excluded.version"},
		{&s.setCheckpoint, "INSERT INTO state_meta (key, value) VALUES ('" + metaCheckpoint + "', ?) " +
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

		{&s.insertMessage, "INSERT INTO messages (" + messageColumnsInsert + ") VALUES (" + placeholders(messageInsertArgs) + ")"},
		{&s.insertMessageEvent, "INSERT OR REPLACE INTO hermes_message_events (position, session_id, first_id, count) VALUES (?, ?, ?, ?)"},
		{&s.addCounts, "UPDATE sessions SET message_count = COALESCE(message_count, 0) + ?, " +
			"tool_call_count = COALESCE(tool_call_count, 0) + ? WHERE id = ?"},
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
			input_tokens = COALESCE(input_tokens, 0) + ?,
			output_tokens = COALESCE(output_tokens, 0) + ?,
			cache_read_tokens = COALESCE(cache_read_tokens, 0) + ?,
			cache_write_tokens = COALESCE(cache_write_tokens, 0) + ?,
			reasoning_tokens = COALESCE(reasoning_tokens, 0) + ?,
			api_call_count = COALESCE(api_call_count, 0) + ?,
			estimated_cost_usd = CASE WHEN ? IS NULL THEN estimated_cost_usd ELSE COALESCE(estimated_cost_usd, 0) + ? END,
			actual_cost_usd = CASE WHEN ? IS NULL THEN actual_cost_usd ELSE COALESCE(actual_cost_usd, 0) + ? END
			WHERE id = ?`},
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

// messageColumnsInsert are the columns a message insert sets (active
// takes its default, 1).
const messageColumnsInsert = `session_id, role, content, tool_call_id, tool_calls, tool_name,
	timestamp, token_count, finish_reason, reasoning, reasoning_content, reasoning_details,
	codex_reasoning_items, codex_message_items`

const messageInsertArgs = 14

type multiKey struct {
	table string
	rows  int
}

// multiInsert returns the statement inserting rows rows into table
// (messages or hermes_message_events).
func (s *writeStatements) multiInsert(ctx context.Context, table string, rows int) (*sql.Stmt, error) {
	k := multiKey{table, rows}
	if st, ok := s.multi[k]; ok {
		return st, nil
	}
	var head, row string
	switch table {
	case "messages":
		head = "INSERT INTO messages (" + messageColumnsInsert + ") VALUES "
		row = "(" + placeholders(messageInsertArgs) + ")"
	default:
		head = "INSERT OR REPLACE INTO hermes_message_events (position, session_id, first_id, count) VALUES "
		row = "(?, ?, ?, ?)"
	}
	var b strings.Builder
	b.WriteString(head)
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	st, err := s.conn.PrepareContext(ctx, b.String())
	if err != nil {
		return nil, fmt.Errorf("prepare insert of %d %s: %w", rows, table, err)
	}
	s.multi[k] = st
	return st, nil
}

// Apply folds a batch of envelopes in one transaction and records the
// position of the last one as the checkpoint. Envelopes at or below the
// checkpoint, or at or below the version already applied for their stream,
// are skipped, so a redelivered batch changes nothing. Lane events
// (SessionCreated, SessionAutoReset, SessionReset, SessionSwitched) create,
// end and reopen session rows; transcript events change messages and
// sessions; every other event only moves the checkpoint. An error leaves
// the file as it was before the batch.
func (p *Projection) Apply(ctx context.Context, batch []events.Envelope) (err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("apply: %w", ErrClosed)
	}
	if len(batch) == 0 {
		return nil
	}
	if _, err := p.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("apply: begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			if _, rbErr := p.conn.ExecContext(context.Background(), "ROLLBACK"); rbErr != nil {
				err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
			}
		}
	}()
	cp, err := readCheckpoint(ctx, p.conn)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	a := &applier{ctx: ctx, s: p.stmts, versions: make(map[string]uint64), dirty: make(map[string]bool),
		known: make(map[string]bool)}
	last := cp
	for _, env := range batch {
		if env.Position <= last {
			continue
		}
		last = env.Position
		if !affectsTranscripts(env.Event) {
			// Touches, turns, queue and gateway events leave state.db as
			// it is: no version to guard, nothing to write.
			continue
		}
		fresh, err := a.guard(env)
		if err != nil {
			return fmt.Errorf("apply position %d (%s v%d): %w", env.Position, env.Stream, env.Version, err)
		}
		if !fresh {
			continue
		}
		if err := a.apply(env); err != nil {
			return fmt.Errorf("apply position %d (%s v%d %s): %w", env.Position, env.Stream, env.Version, env.Type, err)
		}
	}
	if last == cp {
		return nil // everything was at or below the checkpoint: nothing to write
	}
	if err := a.flush(); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if err := a.flushVersions(); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if _, err := p.stmts.setCheckpoint.ExecContext(ctx, strconv.FormatUint(last, 10)); err != nil {
		return fmt.Errorf("apply: write checkpoint: %w", err)
	}
	if _, err := p.conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("apply: commit: %w", err)
	}
	committed = true
	return nil
}

// applier applies the envelopes of one batch inside its transaction.
type applier struct {
	ctx context.Context
	s   *writeStatements
	// versions holds the stream versions read or applied in this batch;
	// dirty ones are written once, at the end of the batch.
	versions map[string]uint64
	dirty    map[string]bool
	order    []string // dirty streams, in the order first applied
	env      events.Envelope

	// known holds the sessions whose row exists in this transaction.
	known map[string]bool
	// pending holds appended messages not inserted yet: see flush.
	pending []pendingMessage
}

// pendingMessage is a message_appended waiting in the batch.
type pendingMessage struct {
	position  uint64
	sessionID string
	msg       events.Message
	ts        float64
}

// maxPending bounds the messages gathered for one flush, and maxChunk the
// rows of one INSERT (14 parameters a row, below SQLite's 32766).
const (
	maxPending = 4096
	maxChunk   = 1024
)

// chunkSize is the size of the next INSERT for n rows: the largest power
// of two up to maxChunk, so that a few cached statements cover any count.
func chunkSize(n int) int {
	c := maxChunk
	for c > n {
		c /= 2
	}
	return c
}

// guard reports whether env is new for its stream (its version is above
// the last one applied), and records it. Envelopes without a version (0)
// are not guarded.
func (a *applier) guard(env events.Envelope) (bool, error) {
	if env.Version == 0 {
		return true, nil
	}
	v, ok := a.versions[env.Stream]
	if !ok {
		var stored int64
		err := a.s.getVersion.QueryRowContext(a.ctx, env.Stream).Scan(&stored)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return false, fmt.Errorf("read stream version: %w", err)
		}
		v = uint64(stored)
		a.versions[env.Stream] = v
	}
	if env.Version <= v {
		return false, nil
	}
	if !a.dirty[env.Stream] {
		a.dirty[env.Stream] = true
		a.order = append(a.order, env.Stream)
	}
	a.versions[env.Stream] = env.Version
	return true, nil
}

func (a *applier) flushVersions() error {
	for _, stream := range a.order {
		if _, err := a.s.setVersion.ExecContext(a.ctx, stream, int64(a.versions[stream])); err != nil {
			return fmt.Errorf("write stream version %s: %w", stream, err)
		}
	}
	return nil
}

// affectsTranscripts reports whether state.db changes with e.
func affectsTranscripts(e events.Event) bool {
	switch e.(type) {
	case events.MessageAppended, events.SessionCreated, events.SessionAutoReset, events.SessionReset,
		events.SessionSwitched, events.TranscriptRewritten, events.TurnsRewound, events.TitleSet,
		events.SessionMetadataUpdated, events.TranscriptCleared, events.TranscriptDeleted,
		events.TranscriptEnded, events.TranscriptReopened,
		events.LaneImported, events.SessionImported, events.MessagesImported:
		return true
	}
	return false
}

func (a *applier) apply(env events.Envelope) error {
	a.env = env
	switch e := env.Event.(type) {
	case events.MessageAppended:
		return a.messageAppended(e)
	case events.SessionCreated, events.SessionAutoReset, events.SessionReset, events.SessionSwitched,
		events.TranscriptRewritten, events.TurnsRewound, events.TitleSet, events.SessionMetadataUpdated,
		events.TranscriptCleared, events.TranscriptDeleted, events.TranscriptEnded, events.TranscriptReopened,
		events.LaneImported, events.SessionImported, events.MessagesImported:
		// Every other change sees the messages appended before it.
		if err := a.flush(); err != nil {
			return err
		}
	default:
		return nil // other lane events and gateway events leave state.db alone
	}
	switch e := env.Event.(type) {
	case events.SessionCreated:
		return a.sessionCreated(env.Stream, e)
	case events.SessionAutoReset:
		return a.sessionAutoReset(env.Stream, e)
	case events.SessionReset:
		return a.sessionReset(env.Stream, e)
	case events.SessionSwitched:
		return a.sessionSwitched(env.Stream, e)
	case events.TranscriptRewritten:
		return a.transcriptRewritten(e)
	case events.TurnsRewound:
		return a.turnsRewound(e)
	case events.TitleSet:
		return a.titleSet(e)
	case events.SessionMetadataUpdated:
		return a.metadataUpdated(e)
	case events.TranscriptCleared:
		return a.transcriptCleared(e)
	case events.TranscriptDeleted:
		return a.transcriptDeleted(e)
	case events.TranscriptEnded:
		return a.end(e.SessionID, e.Reason, e.At)
	case events.TranscriptReopened:
		return a.exec(a.s.reopenSession, e.SessionID)
	case events.LaneImported:
		return a.laneImported(env.Stream, e)
	case events.SessionImported:
		return a.sessionImported(e)
	case events.MessagesImported:
		return a.messagesImported(e)
	}
	return nil
}

func (a *applier) exec(stmt *sql.Stmt, args ...any) error {
	_, err := stmt.ExecContext(a.ctx, args...)
	return err
}

// origin is a lane's platform and user, as its events name them.
type origin struct {
	platform string
	userID   any // string or nil
}

func originOf(platform string, src events.Source) origin {
	if platform == "" {
		platform = src.Platform
	}
	if platform == "" {
		platform = sourceUnknown
	}
	return origin{platform: platform, userID: nullIfEmpty(src.UserID)}
}

func (a *applier) sessionCreated(stream string, e events.SessionCreated) error {
	o := originOf(e.Platform, e.Origin)
	if e.PreviousSessionID != "" {
		if err := a.end(e.PreviousSessionID, EndSessionReset, e.At); err != nil {
			return err
		}
	}
	if err := a.createSession(e.SessionID, o, e.At); err != nil {
		return err
	}
	return a.setOrigin(stream, o)
}

func (a *applier) sessionAutoReset(stream string, e events.SessionAutoReset) error {
	o := originOf(e.Platform, e.Origin)
	if err := a.end(e.PreviousSessionID, EndSessionReset, e.At); err != nil {
		return err
	}
	if err := a.createSession(e.SessionID, o, e.At); err != nil {
		return err
	}
	return a.setOrigin(stream, o)
}

func (a *applier) sessionReset(stream string, e events.SessionReset) error {
	o, err := a.laneOrigin(stream, e.PreviousSessionID)
	if err != nil {
		return err
	}
	if err := a.end(e.PreviousSessionID, EndSessionReset, e.At); err != nil {
		return err
	}
	return a.createSession(e.SessionID, o, e.At)
}

func (a *applier) sessionSwitched(stream string, e events.SessionSwitched) error {
	if err := a.end(e.PreviousSessionID, EndSessionSwitch, e.At); err != nil {
		return err
	}
	res, err := a.s.reopenSession.ExecContext(a.ctx, e.SessionID)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return err
	}
	o, err := a.laneOrigin(stream, e.PreviousSessionID)
	if err != nil {
		return err
	}
	return a.createSession(e.SessionID, o, e.At)
}

// laneOrigin is the origin recorded for the lane of stream, else the
// source of the session the lane had (fallback), else unknown.
func (a *applier) laneOrigin(stream, fallback string) (origin, error) {
	if key, ok := events.SessionKeyOf(stream); ok {
		var platform, userID sql.NullString
		err := a.s.getOrigin.QueryRowContext(a.ctx, key).Scan(&platform, &userID)
		if err == nil {
			return origin{platform: platform.String, userID: nullString(userID)}, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return origin{}, fmt.Errorf("read lane origin: %w", err)
		}
	}
	if fallback != "" {
		var source string
		var userID sql.NullString
		err := a.s.sessionSource.QueryRowContext(a.ctx, fallback).Scan(&source, &userID)
		if err == nil {
			return origin{platform: source, userID: nullString(userID)}, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return origin{}, fmt.Errorf("read session source: %w", err)
		}
	}
	return origin{platform: sourceUnknown}, nil
}

func (a *applier) setOrigin(stream string, o origin) error {
	key, ok := events.SessionKeyOf(stream)
	if !ok {
		return nil
	}
	return a.exec(a.s.setOrigin, key, o.platform, o.userID)
}

// createSession is Hermes' create_session: INSERT OR IGNORE, so the first
// write of a row wins.
func (a *applier) createSession(id string, o origin, at time.Time) error {
	if id == "" {
		return nil
	}
	a.known[id] = true
	return a.exec(a.s.createSession, id, o.platform, o.userID, unixSeconds(at))
}

// ensureSession creates the row of a session a transcript event names
// before any lane event did, as Hermes does (source "unknown").
func (a *applier) ensureSession(id string, at time.Time) error {
	if a.known[id] {
		return nil
	}
	a.known[id] = true
	return a.exec(a.s.ensureSession, id, unixSeconds(at))
}

// end is Hermes' end_session: only a session still open is ended, so the
// first reason wins.
func (a *applier) end(id, reason string, at time.Time) error {
	if id == "" {
		return nil
	}
	return a.exec(a.s.endSession, unixSeconds(at), nullIfEmpty(reason), id)
}

func (a *applier) insertMessage(sessionID string, m events.Message, ts float64) (int64, error) {
	res, err := a.s.insertMessage.ExecContext(a.ctx, messageArgs(sessionID, m, ts)...)
	if err != nil {
		return 0, fmt.Errorf("insert message: %w", err)
	}
	return res.LastInsertId()
}

// messageArgs are the values of messageColumnsInsert for one message, as
// Hermes' append_message stores them.
func messageArgs(sessionID string, m events.Message, ts float64) []any {
	var tokens any
	if m.TokenCount != nil {
		tokens = *m.TokenCount
	}
	return []any{sessionID, m.Role, storedContent(m.Content), nullIfEmpty(m.ToolCallID),
		storedJSON(m.ToolCalls), nullIfEmpty(m.ToolName), ts, tokens, nullIfEmpty(m.FinishReason),
		nullPtr(m.Reasoning), nullPtr(m.ReasoningContent), storedJSON(m.ReasoningDetails),
		storedJSON(m.CodexReasoningItems), storedJSON(m.CodexMessageItems)}
}

// messageAppended is Hermes' append_message. The row is inserted later,
// with the other messages appended next to it in the batch (see flush);
// its session row is made sure of now, in event order.
func (a *applier) messageAppended(e events.MessageAppended) error {
	if err := a.ensureSession(e.SessionID, e.At); err != nil {
		return err
	}
	a.pending = append(a.pending, pendingMessage{position: a.env.Position, sessionID: e.SessionID, msg: e.Message, ts: unixSeconds(e.At)})
	if len(a.pending) >= maxPending {
		return a.flush()
	}
	return nil
}

// flush inserts the pending messages with multi-row INSERTs, maps their
// positions to their row ids, and adds them to their sessions' counters.
//
// Why gather them: SQLite opens a statement savepoint for a statement that
// fires triggers, and FTS5 writes its pending index data out as a new
// segment at every savepoint. One INSERT per message would write two tiny
// FTS segments per message (and merge them later); one INSERT per few
// hundred messages writes one. Row ids stay what one-by-one inserts would
// give: AUTOINCREMENT numbers the rows of one statement in order.
func (a *applier) flush() error {
	if len(a.pending) == 0 {
		return nil
	}
	ids := make([]int64, len(a.pending))
	for start, size := 0, 0; start < len(a.pending); start += size {
		size = chunkSize(len(a.pending) - start)
		chunk := a.pending[start : start+size]
		st, err := a.s.multiInsert(a.ctx, "messages", len(chunk))
		if err != nil {
			return err
		}
		args := make([]any, 0, len(chunk)*messageInsertArgs)
		for _, m := range chunk {
			args = append(args, messageArgs(m.sessionID, m.msg, m.ts)...)
		}
		res, err := st.ExecContext(a.ctx, args...)
		if err != nil {
			return fmt.Errorf("insert messages: %w", err)
		}
		last, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("insert messages: %w", err)
		}
		for i := range chunk {
			ids[start+i] = last - int64(len(chunk)-1-i)
		}
	}
	for start, size := 0, 0; start < len(a.pending); start += size {
		size = chunkSize(len(a.pending) - start)
		chunk := a.pending[start : start+size]
		st, err := a.s.multiInsert(a.ctx, "hermes_message_events", len(chunk))
		if err != nil {
			return err
		}
		args := make([]any, 0, len(chunk)*4)
		for i, m := range chunk {
			args = append(args, int64(m.position), m.sessionID, ids[start+i], 1)
		}
		if _, err := st.ExecContext(a.ctx, args...); err != nil {
			return fmt.Errorf("insert message events: %w", err)
		}
	}
	type counts struct{ messages, toolCalls int64 }
	bySession := map[string]*counts{}
	var order []string
	for _, m := range a.pending {
		c, ok := bySession[m.sessionID]
		if !ok {
			c = &counts{}
			bySession[m.sessionID] = c
			order = append(order, m.sessionID)
		}
		c.messages++
		c.toolCalls += toolCallCount(m.msg.ToolCalls)
	}
	for _, id := range order {
		c := bySession[id]
		if err := a.exec(a.s.addCounts, c.messages, c.toolCalls, id); err != nil {
			return err
		}
	}
	a.pending = a.pending[:0]
	return nil
}

// transcriptRewritten is Hermes' replace_messages: every row goes, the new
// ones get timestamps At + i·1µs, and both counters are recomputed.
func (a *applier) transcriptRewritten(e events.TranscriptRewritten) error {
	if err := a.ensureSession(e.SessionID, e.At); err != nil {
		return err
	}
	if err := a.exec(a.s.deleteMessages, e.SessionID); err != nil {
		return err
	}
	base := unixSeconds(e.At)
	var first any
	var toolCalls int64
	for i, m := range e.Messages {
		id, err := a.insertMessage(e.SessionID, m, base+float64(i)*1e-6)
		if err != nil {
			return err
		}
		if i == 0 {
			first = id
		}
		toolCalls += toolCallCount(m.ToolCalls)
	}
	if err := a.exec(a.s.setCounts, len(e.Messages), toolCalls, e.SessionID); err != nil {
		return err
	}
	return a.exec(a.s.insertMessageEvent, int64(a.env.Position), e.SessionID, first, len(e.Messages))
}

// turnsRewound is Hermes' rewind_to_message: rows from the target on are
// hidden, and rewind_count counts the rewind even when no row changed.
func (a *applier) turnsRewound(e events.TurnsRewound) error {
	if err := a.exec(a.s.rewindMessages, e.SessionID, e.TargetMessageID); err != nil {
		return err
	}
	return a.exec(a.s.countRewind, e.SessionID)
}

// titleSet stores the title, or NULL when it is empty or (a race the
// command layer lost) another session already holds it: the unique index
// must never fail a batch, and NULL is the same answer on every replay.
func (a *applier) titleSet(e events.TitleSet) error {
	title := nullIfEmpty(e.Title)
	if title != nil {
		var owner string
		err := a.s.titleOwner.QueryRowContext(a.ctx, e.Title, e.SessionID).Scan(&owner)
		switch {
		case err == nil:
			title = nil
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("read title owner: %w", err)
		}
	}
	return a.exec(a.s.setTitle, title, e.SessionID)
}

// metadataUpdated is Hermes' update_token_counts plus the prompt, config
// and lineage updates: model and billing_* are set only while NULL,
// cost_status/cost_source/pricing_version, model_config, system_prompt and
// parent_session_id are overwritten when reported, counts and costs add up.
// A parent that does not exist is stored as NULL (the foreign key would
// otherwise fail the batch).
func (a *applier) metadataUpdated(e events.SessionMetadataUpdated) error {
	if err := a.ensureSession(e.SessionID, e.At); err != nil {
		return err
	}
	setParent := e.ParentSessionID != nil
	var parent any
	if setParent && *e.ParentSessionID != "" {
		var n int
		if err := a.s.sessionExists.QueryRowContext(a.ctx, *e.ParentSessionID).Scan(&n); err != nil {
			return fmt.Errorf("read parent session: %w", err)
		}
		if n > 0 {
			parent = *e.ParentSessionID
		}
	}
	return a.exec(a.s.updateMetadata,
		nullPtr(e.Model), nullPtr(e.BillingProvider), nullPtr(e.BillingBaseURL), nullPtr(e.BillingMode),
		nullPtr(e.CostStatus), nullPtr(e.CostSource), nullPtr(e.PricingVersion),
		nullPtr(e.ModelConfig), nullPtr(e.SystemPrompt),
		setParent, parent,
		e.InputTokens, e.OutputTokens, e.CacheReadTokens, e.CacheWriteTokens, e.ReasoningTokens, e.APICallCount,
		nullPtr(e.EstimatedCostUSD), nullPtr(e.EstimatedCostUSD),
		nullPtr(e.ActualCostUSD), nullPtr(e.ActualCostUSD),
		e.SessionID)
}

func (a *applier) transcriptCleared(e events.TranscriptCleared) error {
	if err := a.exec(a.s.deleteMessages, e.SessionID); err != nil {
		return err
	}
	return a.exec(a.s.setCounts, 0, 0, e.SessionID)
}

// transcriptDeleted is Hermes' delete_session: children lose their parent
// (grandchildren keep theirs), then the messages and the row go.
func (a *applier) transcriptDeleted(e events.TranscriptDeleted) error {
	if err := a.exec(a.s.orphanChildren, e.SessionID); err != nil {
		return err
	}
	if err := a.exec(a.s.deleteMessages, e.SessionID); err != nil {
		return err
	}
	delete(a.known, e.SessionID)
	return a.exec(a.s.deleteSession, e.SessionID)
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullPtr[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func nullString(v sql.NullString) any {
	if !v.Valid {
		return nil
	}
	return v.String
}
