package commands

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"hermes/domain"
	"hermes/events"
)

// Transcript command errors.
var (
	// ErrSessionNotFound: no transcript session with that id.
	ErrSessionNotFound = errors.New("session not found")
	// ErrTitleInUse: another session already holds the title.
	ErrTitleInUse = errors.New("title already in use")
)

// TranscriptIndex is what the transcript commands read from the read
// models: which sessions exist, who holds a title, which lane a session is
// on. The caller makes it current (read your writes) before a command.
type TranscriptIndex interface {
	SessionExists(ctx context.Context, sessionID string) (bool, error)
	// TitleOwner returns the session holding title, or "".
	TitleOwner(ctx context.Context, title string) (string, error)
	// LaneOfSession returns the key of the lane whose current session is
	// sessionID, or "" when no lane is on it.
	LaneOfSession(ctx context.Context, sessionID string) (string, error)
	// SessionTotals returns the running sums of an existing session's
	// metadata (zero for a session without any).
	SessionTotals(ctx context.Context, sessionID string) (SessionTotals, error)
}

// SessionTotals are the sums that metadata updates add to (Hermes'
// update_token_counts): UpdateMetadata keeps each within its bound.
type SessionTotals struct {
	InputTokens, OutputTokens, CacheReadTokens, CacheWriteTokens, ReasoningTokens, APICallCount int64
	EstimatedCostUSD, ActualCostUSD                                                             float64
}

// TranscriptCommands appends transcript events. Session ids come from
// outside, so each is validated before it names a stream.
type TranscriptCommands struct {
	h     *Handler
	index TranscriptIndex
	// titles serialises title changes so the uniqueness check and the
	// append cannot interleave (the read model may not fail on a duplicate).
	titles sync.Mutex
	// metadata serialises metadata updates so the check of the totals and
	// the append cannot interleave (two reports could pass the bound
	// together).
	metadata sync.Mutex
	// laneKeys remembers the lane each session was last found on, so an
	// appended message asks the read model only when the handler's lane
	// cache no longer shows that lane on the session.
	laneKeys laneKeyMemo
}

// maxLaneKeys bounds laneKeyMemo; past it the memo starts afresh.
const maxLaneKeys = 1 << 14

// laneKeyMemo maps session ids to the lane key they were last seen on.
type laneKeyMemo struct {
	mu   sync.Mutex
	keys map[string]string
}

func (m *laneKeyMemo) get(sessionID string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.keys[sessionID]
	return k, ok
}

func (m *laneKeyMemo) put(sessionID, key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys == nil || len(m.keys) >= maxLaneKeys {
		m.keys = make(map[string]string)
	}
	m.keys[sessionID] = key
}

// laneOfSession is index.LaneOfSession, answered without the read model
// when the remembered lane of the session is cached on it. Either answer
// only picks the lane RecordActivity decides on; the decision itself is
// made on the lane's own (refreshed) state.
func (t *TranscriptCommands) laneOfSession(ctx context.Context, sessionID string) (string, error) {
	if key, ok := t.laneKeys.get(sessionID); ok {
		if st, ok := t.h.cache.get(events.LaneStream(key)); ok && st.lane.SessionID == sessionID {
			return key, nil
		}
	}
	key, err := t.index.LaneOfSession(ctx, sessionID)
	if err != nil || key == "" {
		return key, err
	}
	t.laneKeys.put(sessionID, key)
	return key, nil
}

// Transcripts returns the transcript commands over index.
func (h *Handler) Transcripts(index TranscriptIndex) *TranscriptCommands {
	return &TranscriptCommands{h: h, index: index}
}

// knownRoles are the message roles Hermes stores.
var knownRoles = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true, "session_meta": true}

func (t *TranscriptCommands) existing(ctx context.Context, sessionID string) error {
	if err := domain.ValidateSessionID(sessionID); err != nil {
		return err
	}
	if t.h.soleWriter && t.h.sessions.exists(sessionID) {
		return nil
	}
	ok, err := t.index.SessionExists(ctx, sessionID)
	if err != nil {
		return fmt.Errorf("session %s: %w", sessionID, err)
	}
	if !ok {
		return fmt.Errorf("%w: %s", ErrSessionNotFound, sessionID)
	}
	if t.h.soleWriter {
		t.h.sessions.found(sessionID)
	}
	return nil
}

func (t *TranscriptCommands) append(ctx context.Context, sessionID, command, commandID string, es ...events.Event) (events.AppendResult, error) {
	cmd := commandIdentity{id: commandID}
	if commandID == "" {
		cmd = generated(fmt.Sprintf("%s/%s/%s", command, sessionID, t.h.entropy()+t.h.entropy()))
	}
	stream := events.TranscriptStream(sessionID)
	proposed := make([]events.Proposed, len(es))
	for i, e := range es {
		proposed[i] = events.Proposed{
			ID:       cmd.eventID(stream, i),
			Event:    e,
			Metadata: events.Metadata{SchemaVersion: events.SchemaVersionOf(e.EventType()), Command: command, CommandID: cmd.id, Node: t.h.node},
		}
	}
	res, err := t.h.store.Append(ctx, stream, events.AnyVersion(), proposed)
	if err != nil {
		return events.AppendResult{}, fmt.Errorf("%s %s: %w", command, sessionID, err)
	}
	return res, nil
}

// ValidateMessage checks a message before it is stored.
func ValidateMessage(m events.Message) error {
	if !knownRoles[m.Role] {
		return fmt.Errorf("%w: role %q is not one of system, user, assistant, tool, session_meta", domain.ErrInvalidArgument, m.Role)
	}
	if m.TokenCount != nil && *m.TokenCount < 0 {
		return fmt.Errorf("%w: token_count is negative", domain.ErrInvalidArgument)
	}
	return nil
}

// Appended says where an appended message landed.
type Appended struct {
	// MessagePosition is the position of the message event (the read
	// model maps it to the message row id).
	MessagePosition uint64
	// Position is the last position the command appended (the message, or
	// the lane's activity note after it).
	Position uint64
}

// AppendMessage stores a message in a session's transcript and notes the
// first activity of the session on its lane.
type AppendMessage struct {
	SessionID string
	Message   events.Message
	// TurnID, when set, fences the append by the turn: it is refused with
	// domain.ErrTurnNotOpen, and appends nothing, unless TurnID is the
	// open turn of the lane the session is on (fence.go).
	TurnID    string
	CommandID string
}

// AppendMessage appends a message to a transcript.
func (t *TranscriptCommands) AppendMessage(ctx context.Context, c AppendMessage) (Appended, error) {
	if err := ValidateMessage(c.Message); err != nil {
		return Appended{}, err
	}
	if err := t.existing(ctx, c.SessionID); err != nil {
		return Appended{}, err
	}
	e := events.MessageAppended{SessionID: c.SessionID, Message: c.Message, At: t.h.now()}
	var res events.AppendResult
	var err error
	if c.TurnID != "" {
		res, err = t.appendFenced(ctx, c, e)
	} else {
		res, err = t.append(ctx, c.SessionID, "append_message", c.CommandID, e)
	}
	if err != nil {
		return Appended{}, err
	}
	out := Appended{MessagePosition: res.LastPosition(), Position: res.LastPosition()}
	key, err := t.laneOfSession(ctx, c.SessionID)
	if err != nil {
		return out, err
	}
	if key != "" {
		lr, err := t.h.RecordActivity(ctx, RecordActivity{Key: key, SessionID: c.SessionID})
		if err != nil {
			return out, err
		}
		out.Position = max(out.Position, lr.Position)
	}
	return out, nil
}

// RewriteTranscript replaces a session's whole transcript.
type RewriteTranscript struct {
	SessionID string
	// Messages are the new transcript; nil is an empty one.
	Messages  []events.Message
	CommandID string
}

// RewriteTranscript replaces a transcript and returns the position.
func (t *TranscriptCommands) RewriteTranscript(ctx context.Context, c RewriteTranscript) (uint64, error) {
	for i, m := range c.Messages {
		if err := ValidateMessage(m); err != nil {
			return 0, fmt.Errorf("message %d: %w", i, err)
		}
	}
	if err := t.existing(ctx, c.SessionID); err != nil {
		return 0, err
	}
	ms := c.Messages
	if ms == nil {
		ms = []events.Message{}
	}
	res, err := t.append(ctx, c.SessionID, "rewrite_transcript", c.CommandID, events.TranscriptRewritten{SessionID: c.SessionID, Messages: ms, At: t.h.now()})
	return res.LastPosition(), err
}

// Rewind hides every message from TargetMessageID (a user message the read
// model chose, TurnsUndone turns back) on.
type Rewind struct {
	SessionID       string
	TargetMessageID int64
	TurnsUndone     int
	CommandID       string
}

// Rewind records a soft rewind and returns its position.
func (t *TranscriptCommands) Rewind(ctx context.Context, c Rewind) (uint64, error) {
	if err := t.existing(ctx, c.SessionID); err != nil {
		return 0, err
	}
	res, err := t.append(ctx, c.SessionID, "rewind", c.CommandID, events.TurnsRewound{SessionID: c.SessionID, TargetMessageID: c.TargetMessageID, TurnsUndone: c.TurnsUndone, At: t.h.now()})
	return res.LastPosition(), err
}

// SetTitle gives a session a (sanitised) title; "" clears the title.
type SetTitle struct {
	SessionID string
	Title     string
	// Sync makes the index current (read your writes): it is called under
	// the title lock before the uniqueness check and after the append.
	Sync      func(context.Context) error
	CommandID string
}

// SetTitle sets a session's title, refused with ErrTitleInUse when another
// session holds it.
func (t *TranscriptCommands) SetTitle(ctx context.Context, c SetTitle) (uint64, error) {
	if err := t.existing(ctx, c.SessionID); err != nil {
		return 0, err
	}
	sync := c.Sync
	if sync == nil {
		sync = func(context.Context) error { return nil }
	}
	t.titles.Lock()
	defer t.titles.Unlock()
	if err := sync(ctx); err != nil {
		return 0, err
	}
	if c.Title != "" {
		owner, err := t.index.TitleOwner(ctx, c.Title)
		if err != nil {
			return 0, err
		}
		if owner != "" && owner != c.SessionID {
			return 0, fmt.Errorf("%w: title %q is already in use by session %s", ErrTitleInUse, c.Title, owner)
		}
	}
	res, err := t.append(ctx, c.SessionID, "set_title", c.CommandID, events.TitleSet{SessionID: c.SessionID, Title: c.Title, At: t.h.now()})
	if err != nil {
		return 0, err
	}
	// Hold the title lock until the read model has the title, so the next
	// check sees it.
	return res.LastPosition(), sync(ctx)
}

// UpdateMetadata records model, prompt, lineage and billing facts.
type UpdateMetadata struct {
	// Update names the session (Update.SessionID) and carries the facts;
	// its At is set by the command.
	Update events.SessionMetadataUpdated
	// Sync makes the index current (read your writes): it is called under
	// the metadata lock before the totals are read and after the append.
	Sync      func(context.Context) error
	CommandID string
}

// UpdateMetadata records a session's metadata and returns the position.
// Counts and costs add to the session's totals: a report that is negative,
// not finite, or would take a total past domain.MaxTokens or
// domain.MaxCostUSD is refused with domain.ErrInvalidArgument, and nothing
// is appended.
func (t *TranscriptCommands) UpdateMetadata(ctx context.Context, c UpdateMetadata) (uint64, error) {
	u := c.Update
	if err := t.existing(ctx, u.SessionID); err != nil {
		return 0, err
	}
	if u.ParentSessionID != nil && *u.ParentSessionID != "" {
		if *u.ParentSessionID == u.SessionID {
			return 0, fmt.Errorf("%w: a session cannot be its own parent", domain.ErrInvalidArgument)
		}
		if err := t.existing(ctx, *u.ParentSessionID); err != nil {
			return 0, fmt.Errorf("parent: %w", err)
		}
	}
	sync := c.Sync
	if sync == nil {
		sync = func(context.Context) error { return nil }
	}
	t.metadata.Lock()
	defer t.metadata.Unlock()
	if err := sync(ctx); err != nil {
		return 0, err
	}
	totals, err := t.index.SessionTotals(ctx, u.SessionID)
	if err != nil {
		return 0, fmt.Errorf("totals of session %s: %w", u.SessionID, err)
	}
	if err := checkMetadataTotals(totals, u); err != nil {
		return 0, err
	}
	u.At = t.h.now()
	res, err := t.append(ctx, u.SessionID, "update_session_metadata", c.CommandID, u)
	if err != nil {
		return 0, err
	}
	// Hold the lock until the read model has the new totals.
	return res.LastPosition(), sync(ctx)
}

// checkMetadataTotals checks each count and cost of u against the total it
// adds to.
func checkMetadataTotals(totals SessionTotals, u events.SessionMetadataUpdated) error {
	for _, c := range []struct {
		name         string
		total, value int64
	}{
		{"input_tokens", totals.InputTokens, u.InputTokens}, {"output_tokens", totals.OutputTokens, u.OutputTokens},
		{"cache_read_tokens", totals.CacheReadTokens, u.CacheReadTokens}, {"cache_write_tokens", totals.CacheWriteTokens, u.CacheWriteTokens},
		{"reasoning_tokens", totals.ReasoningTokens, u.ReasoningTokens}, {"api_call_count", totals.APICallCount, u.APICallCount},
	} {
		if err := domain.CheckTokens(c.name, c.total, c.value); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		name  string
		total float64
		value *float64
	}{
		{"estimated_cost_usd", totals.EstimatedCostUSD, u.EstimatedCostUSD}, {"actual_cost_usd", totals.ActualCostUSD, u.ActualCostUSD},
	} {
		if c.value == nil {
			continue
		}
		if err := domain.CheckCost(c.name, c.total, *c.value); err != nil {
			return err
		}
	}
	return nil
}

// ClearTranscript deletes a session's messages, keeping the session, and
// erases them from the log (docs/ERASURE.md).
type ClearTranscript struct {
	SessionID string
	CommandID string
	// RequestedBy is recorded with the erasure; may be empty.
	RequestedBy string
}

// ClearTranscript clears a transcript and returns the position.
func (t *TranscriptCommands) ClearTranscript(ctx context.Context, c ClearTranscript) (uint64, error) {
	if err := t.existing(ctx, c.SessionID); err != nil {
		return 0, err
	}
	now := t.h.now()
	res, err := t.append(ctx, c.SessionID, "clear_transcript", c.CommandID,
		events.TranscriptCleared{SessionID: c.SessionID, At: now},
		events.TranscriptErased{SessionID: c.SessionID, Scope: events.EraseMessages, Reason: events.ErasureOnRequest, RequestedBy: c.RequestedBy, At: now})
	return res.LastPosition(), err
}

// DeleteSession deletes a session and its messages, and erases the
// transcript's content from the log (docs/ERASURE.md).
type DeleteSession struct {
	SessionID string
	// Reason is events.DeleteRequested or events.DeletePruned.
	Reason    string
	CommandID string
	// Erasure is the reason recorded with the erasure (events.Erasure*);
	// empty: derived from Reason.
	Erasure string
	// RequestedBy is recorded with the erasure; may be empty.
	RequestedBy string
}

// DeleteSession deletes a session and returns the position.
func (t *TranscriptCommands) DeleteSession(ctx context.Context, c DeleteSession) (uint64, error) {
	if err := t.existing(ctx, c.SessionID); err != nil {
		return 0, err
	}
	why := c.Erasure
	if why == "" {
		why = events.ErasureOnRequest
		if c.Reason == events.DeletePruned {
			why = events.ErasurePruned
		}
	}
	t.h.sessions.deleted(c.SessionID)
	now := t.h.now()
	res, err := t.append(ctx, c.SessionID, "delete_session", c.CommandID,
		events.TranscriptDeleted{SessionID: c.SessionID, Reason: c.Reason, At: now},
		events.TranscriptErased{SessionID: c.SessionID, Scope: events.EraseTranscript, Reason: why, RequestedBy: c.RequestedBy, At: now})
	return res.LastPosition(), err
}

// EndSession ends a session for Reason (the first reason wins).
type EndSession struct {
	SessionID string
	// Reason is 1 to 64 bytes.
	Reason    string
	CommandID string
}

// EndSession ends a session and returns the position.
func (t *TranscriptCommands) EndSession(ctx context.Context, c EndSession) (uint64, error) {
	if c.Reason == "" || len(c.Reason) > 64 {
		return 0, fmt.Errorf("%w: end reason must be 1 to 64 bytes", domain.ErrInvalidArgument)
	}
	if err := t.existing(ctx, c.SessionID); err != nil {
		return 0, err
	}
	res, err := t.append(ctx, c.SessionID, "end_session", c.CommandID, events.TranscriptEnded{SessionID: c.SessionID, Reason: c.Reason, At: t.h.now()})
	return res.LastPosition(), err
}
