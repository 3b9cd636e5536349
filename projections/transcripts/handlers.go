package transcripts

import (
	"database/sql"
	"errors"
	"fmt"
	"time"

	"hermes/domain"
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

// stateEvents is the one list of the events that change state.db, by
// persisted type, each with its handler: Apply skips every other event
// (touches, turns, queue, notices, gateway events), which only moves the
// checkpoint, and applies these in order. A handler is called after the
// envelope passed the stream-version guard.
var stateEvents = map[string]stateHandler{
	events.TypeMessageAppended: {gathered: true, apply: func(a *applier, _ string, e events.Event) error {
		return a.messageAppended(e.(events.MessageAppended))
	}},
	events.TypeSessionCreated: {sessionsOnly: true, apply: func(a *applier, stream string, e events.Event) error {
		return a.sessionCreated(stream, e.(events.SessionCreated))
	}},
	events.TypeSessionAutoReset: {sessionsOnly: true, apply: func(a *applier, stream string, e events.Event) error {
		return a.sessionAutoReset(stream, e.(events.SessionAutoReset))
	}},
	events.TypeSessionReset: {sessionsOnly: true, apply: func(a *applier, stream string, e events.Event) error {
		return a.sessionReset(stream, e.(events.SessionReset))
	}},
	events.TypeSessionSwitched: {sessionsOnly: true, apply: func(a *applier, stream string, e events.Event) error {
		return a.sessionSwitched(stream, e.(events.SessionSwitched))
	}},
	events.TypeTranscriptRewritten: {apply: func(a *applier, _ string, e events.Event) error {
		return a.transcriptRewritten(e.(events.TranscriptRewritten))
	}},
	events.TypeTurnsRewound: {apply: func(a *applier, _ string, e events.Event) error {
		return a.turnsRewound(e.(events.TurnsRewound))
	}},
	events.TypeTitleSet: {sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		return a.titleSet(e.(events.TitleSet))
	}},
	events.TypeSessionMetadataUpdated: {sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		return a.metadataUpdated(e.(events.SessionMetadataUpdated))
	}},
	events.TypeTranscriptCleared: {apply: func(a *applier, _ string, e events.Event) error {
		return a.transcriptCleared(e.(events.TranscriptCleared))
	}},
	events.TypeTranscriptDeleted: {apply: func(a *applier, _ string, e events.Event) error {
		return a.transcriptDeleted(e.(events.TranscriptDeleted))
	}},
	events.TypeTranscriptEnded: {sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		ended := e.(events.TranscriptEnded)
		return a.end(ended.SessionID, ended.Reason, ended.At)
	}},
	events.TypeLaneErased: {apply: func(a *applier, stream string, e events.Event) error {
		return a.laneErased(stream, e.(events.LaneErased))
	}},
	events.TypeTranscriptReopened: {sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		return a.exec(a.s.reopenSession, e.(events.TranscriptReopened).SessionID)
	}},
	events.TypeLaneImported: {apply: func(a *applier, stream string, e events.Event) error {
		return a.laneImported(stream, e.(events.LaneImported))
	}},
	events.TypeSessionImported: {apply: func(a *applier, _ string, e events.Event) error {
		return a.sessionImported(e.(events.SessionImported))
	}},
	events.TypeMessagesImported: {apply: func(a *applier, _ string, e events.Event) error {
		return a.messagesImported(e.(events.MessagesImported))
	}},
}

// stateHandler applies one event type to state.db.
type stateHandler struct {
	// gathered: the event waits in the batch for the next flush (see
	// flush); every other event first flushes, so that it sees the
	// messages appended before it, unless sessionsOnly.
	gathered bool
	// sessionsOnly: the handler reads and writes no messages row, no
	// message counter and no message event (session rows, lane origins),
	// so the messages gathered before it stay pending: a batch where
	// appends interleave with title, metadata or lane events still writes
	// them with one INSERT, one FTS5 segment per index, instead of one
	// segment per run of appends. Every session row a pending message
	// needs was made sure of when it was appended (ensureSession).
	sessionsOnly bool
	apply        func(a *applier, stream string, e events.Event) error
}

// stateHandlerOf returns the handler of e, and false when state.db does
// not change with e.
func stateHandlerOf(e events.Event) (stateHandler, bool) {
	if e == nil {
		return stateHandler{}, false
	}
	h, ok := stateEvents[e.EventType()]
	return h, ok
}

func (a *applier) apply(env events.Envelope, h stateHandler) error {
	a.env = env
	if !h.gathered && !h.sessionsOnly {
		if err := a.flush(); err != nil {
			return err
		}
	}
	return h.apply(a, env.Stream, env.Event)
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

func (a *applier) insertMessage(id int64, sessionID string, m events.Message, ts float64) error {
	if _, err := a.s.insertMessage.ExecContext(a.ctx, messageArgs(id, sessionID, m, ts)...); err != nil {
		return fmt.Errorf("insert message %d: %w", id, err)
	}
	return nil
}

// messageArgs are the values of messageColumnsInsert for one message, as
// Hermes' append_message stores them.
func messageArgs(id int64, sessionID string, m events.Message, ts float64) []any {
	var tokens any
	if m.TokenCount != nil {
		tokens = *m.TokenCount
	}
	return []any{id, sessionID, m.Role, storedContent(m.Content), nullIfEmpty(m.ToolCallID),
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
	a.pending = append(a.pending, pendingMessage{position: a.env.Position, id: a.ids.FirstID, sessionID: e.SessionID, msg: e.Message, ts: unixSeconds(e.At)})
	if len(a.pending) >= maxPending {
		return a.flush()
	}
	return nil
}

// maxPending bounds the messages gathered for one flush, and maxChunk the
// rows of one INSERT of message events (4 parameters a row).
const (
	maxPending = 4096
	maxChunk   = 1024
)

// maxMessageChunk bounds the rows of one INSERT of messages
// (messageInsertArgs parameters a row, below SQLite's 32766): a live batch
// (projections.MaxBatch events) fits in one. A variable for tests.
var maxMessageChunk = 2048

// chunkSize is the size of the next INSERT for n rows: the largest power
// of two up to maxChunk, so that a few cached statements cover any count.
func chunkSize(n int) int {
	c := maxChunk
	for c > n {
		c /= 2
	}
	return c
}

// flush inserts the pending messages with one INSERT (up to
// maxMessageChunk of them), maps their positions to their row ids, and adds
// them to their sessions' counters.
//
// Why gather them: SQLite opens a statement savepoint for a statement that
// fires triggers, and FTS5 writes its pending index data out as a new
// segment at every savepoint. One INSERT per message would write two tiny
// FTS segments per message (and merge them later); one INSERT per batch
// writes one of each (paddedMessageInsert). Each row has the id numbered
// for its event (messageIDs).
func (a *applier) flush() error {
	if len(a.pending) == 0 {
		return nil
	}
	for start, size := 0, 0; start < len(a.pending); start += size {
		size = min(len(a.pending)-start, maxMessageChunk)
		chunk := a.pending[start : start+size]
		rows := paddedMessageRows(size)
		st, err := a.s.paddedMessageInsert(a.ctx, rows)
		if err != nil {
			return err
		}
		args := make([]any, rows*messageInsertArgs) // the padding stays nil
		for i, m := range chunk {
			copy(args[i*messageInsertArgs:], messageArgs(m.id, m.sessionID, m.msg, m.ts))
		}
		if _, err := st.ExecContext(a.ctx, args...); err != nil {
			return fmt.Errorf("insert messages: %w", err)
		}
	}
	if err := execMulti(a.ctx, a.s, multiMessageEvents, a.pending, func(args []any, m pendingMessage) []any {
		return append(args, int64(m.position), m.sessionID, m.id, 1)
	}); err != nil {
		return err
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
	if err := execMulti(a.ctx, a.s, multiSessionCounts, order, func(args []any, id string) []any {
		c := bySession[id]
		return append(args, id, c.messages, c.toolCalls)
	}); err != nil {
		return err
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
	if len(e.Messages) > 0 {
		first = a.ids.FirstID
	}
	var toolCalls int64
	for i, m := range e.Messages {
		if err := a.insertMessage(a.ids.FirstID+int64(i), e.SessionID, m, base+float64(i)*1e-6); err != nil {
			return err
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
	// Counts and costs follow the lane fold's rules (domain/clamp.go): a
	// negative count or an absurd cost is left out, and the sums saturate
	// at their caps in the statement.
	counts := []struct {
		field string
		n     int64
	}{
		{"input_tokens", e.InputTokens}, {"output_tokens", e.OutputTokens},
		{"cache_read_tokens", e.CacheReadTokens}, {"cache_write_tokens", e.CacheWriteTokens},
		{"reasoning_tokens", e.ReasoningTokens}, {"api_call_count", e.APICallCount},
	}
	deltas := make([]int64, len(counts))
	for i, c := range counts {
		var rule string
		if deltas[i], rule = domain.TokenDelta(c.n); rule != "" {
			a.clamp(c.field, rule)
		}
	}
	costs := []struct {
		field string
		c     *float64
	}{{"estimated_cost_usd", e.EstimatedCostUSD}, {"actual_cost_usd", e.ActualCostUSD}}
	costArgs := make([]any, len(costs))
	for i, c := range costs {
		switch {
		case c.c == nil:
		case !domain.CostTaken(*c.c):
			a.clamp(c.field, domain.ClampQuarantined)
		default:
			costArgs[i] = *c.c
		}
	}
	var sums [6]int64
	var costSums [2]sql.NullFloat64
	err := a.s.updateMetadata.QueryRowContext(a.ctx,
		nullPtr(e.Model), nullPtr(e.BillingProvider), nullPtr(e.BillingBaseURL), nullPtr(e.BillingMode),
		nullPtr(e.CostStatus), nullPtr(e.CostSource), nullPtr(e.PricingVersion),
		nullPtr(e.ModelConfig), nullPtr(e.SystemPrompt),
		setParent, parent,
		deltas[0], deltas[1], deltas[2], deltas[3], deltas[4], deltas[5],
		costArgs[0], costArgs[0], costArgs[1], costArgs[1],
		e.SessionID).Scan(&sums[0], &sums[1], &sums[2], &sums[3], &sums[4], &sums[5], &costSums[0], &costSums[1])
	if err != nil {
		return fmt.Errorf("update metadata: %w", err)
	}
	// A sum at its cap after a positive delta saturated (domain.AddTokens).
	for i, c := range counts {
		if deltas[i] > 0 && sums[i] == domain.MaxTokens {
			a.clamp(c.field, domain.ClampSaturated)
		}
	}
	for i, c := range costs {
		if x, ok := costArgs[i].(float64); ok && x > 0 && costSums[i].Float64 >= domain.MaxCostUSD {
			a.clamp(c.field, domain.ClampSaturated)
		}
	}
	return nil
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

// laneErased drops the person a lane's origin named from the rows that took
// it, as a rebuild from the erased lane events would have them (the erased
// origins name no user).
func (a *applier) laneErased(stream string, e events.LaneErased) error {
	if key, ok := events.SessionKeyOf(stream); ok {
		if err := a.exec(a.s.forgetOriginUser, key); err != nil {
			return err
		}
	}
	for _, id := range e.Sessions {
		if err := a.exec(a.s.forgetSessionUser, id); err != nil {
			return err
		}
	}
	return nil
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
