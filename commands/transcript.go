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
}

// TranscriptCommands appends transcript events. Session ids come from
// outside, so each is validated before it names a stream.
type TranscriptCommands struct {
	h     *Handler
	index TranscriptIndex
	// titles serialises title changes so the uniqueness check and the
	// append cannot interleave (the read model may not fail on a duplicate).
	titles sync.Mutex
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
	ok, err := t.index.SessionExists(ctx, sessionID)
	if err != nil {
		return fmt.Errorf("session %s: %w", sessionID, err)
	}
	if !ok {
		return fmt.Errorf("%w: %s", ErrSessionNotFound, sessionID)
	}
	return nil
}

func (t *TranscriptCommands) append(ctx context.Context, sessionID, command, commandID string, es ...events.Event) (events.AppendResult, error) {
	if commandID == "" {
		commandID = fmt.Sprintf("%s/%s/%s", command, sessionID, t.h.entropy()+t.h.entropy())
	}
	stream := events.TranscriptStream(sessionID)
	proposed := make([]events.Proposed, len(es))
	for i, e := range es {
		proposed[i] = events.Proposed{
			ID:       eventID(commandID, stream, i),
			Event:    e,
			Metadata: events.Metadata{SchemaVersion: events.SchemaVersionOf(e.EventType()), Command: command, CommandID: commandID},
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
func (t *TranscriptCommands) AppendMessage(ctx context.Context, sessionID string, m events.Message, commandID string) (Appended, error) {
	if err := ValidateMessage(m); err != nil {
		return Appended{}, err
	}
	if err := t.existing(ctx, sessionID); err != nil {
		return Appended{}, err
	}
	res, err := t.append(ctx, sessionID, "append_message", commandID, events.MessageAppended{SessionID: sessionID, Message: m, At: t.h.now()})
	if err != nil {
		return Appended{}, err
	}
	out := Appended{MessagePosition: res.LastPosition(), Position: res.LastPosition()}
	key, err := t.index.LaneOfSession(ctx, sessionID)
	if err != nil {
		return out, err
	}
	if key != "" {
		lr, err := t.h.RecordActivity(ctx, key, sessionID, "")
		if err != nil {
			return out, err
		}
		out.Position = max(out.Position, lr.Position)
	}
	return out, nil
}

// RewriteTranscript replaces a session's whole transcript.
func (t *TranscriptCommands) RewriteTranscript(ctx context.Context, sessionID string, ms []events.Message, commandID string) (uint64, error) {
	for i, m := range ms {
		if err := ValidateMessage(m); err != nil {
			return 0, fmt.Errorf("message %d: %w", i, err)
		}
	}
	if err := t.existing(ctx, sessionID); err != nil {
		return 0, err
	}
	if ms == nil {
		ms = []events.Message{}
	}
	res, err := t.append(ctx, sessionID, "rewrite_transcript", commandID, events.TranscriptRewritten{SessionID: sessionID, Messages: ms, At: t.h.now()})
	return res.LastPosition(), err
}

// Rewind hides every message from target (a user message the read model
// chose, turnsUndone turns back) on.
func (t *TranscriptCommands) Rewind(ctx context.Context, sessionID string, target int64, turnsUndone int, commandID string) (uint64, error) {
	if err := t.existing(ctx, sessionID); err != nil {
		return 0, err
	}
	res, err := t.append(ctx, sessionID, "rewind", commandID, events.TurnsRewound{SessionID: sessionID, TargetMessageID: target, TurnsUndone: turnsUndone, At: t.h.now()})
	return res.LastPosition(), err
}

// SetTitle gives a session a (sanitised) title, refused with ErrTitleInUse
// when another session holds it; "" clears the title.
func (t *TranscriptCommands) SetTitle(ctx context.Context, sessionID, title string, sync func(context.Context) error, commandID string) (uint64, error) {
	if err := t.existing(ctx, sessionID); err != nil {
		return 0, err
	}
	t.titles.Lock()
	defer t.titles.Unlock()
	if err := sync(ctx); err != nil {
		return 0, err
	}
	if title != "" {
		owner, err := t.index.TitleOwner(ctx, title)
		if err != nil {
			return 0, err
		}
		if owner != "" && owner != sessionID {
			return 0, fmt.Errorf("%w: title %q is already in use by session %s", ErrTitleInUse, title, owner)
		}
	}
	res, err := t.append(ctx, sessionID, "set_title", commandID, events.TitleSet{SessionID: sessionID, Title: title, At: t.h.now()})
	if err != nil {
		return 0, err
	}
	// Hold the title lock until the read model has the title, so the next
	// check sees it.
	return res.LastPosition(), sync(ctx)
}

// UpdateMetadata records model, prompt, lineage and billing facts.
func (t *TranscriptCommands) UpdateMetadata(ctx context.Context, u events.SessionMetadataUpdated, commandID string) (uint64, error) {
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
	for name, v := range map[string]int64{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
		"cache_read_tokens": u.CacheReadTokens, "cache_write_tokens": u.CacheWriteTokens,
		"reasoning_tokens": u.ReasoningTokens, "api_call_count": u.APICallCount} {
		if v < 0 {
			return 0, fmt.Errorf("%w: %s is negative", domain.ErrInvalidArgument, name)
		}
	}
	u.At = t.h.now()
	res, err := t.append(ctx, u.SessionID, "update_session_metadata", commandID, u)
	return res.LastPosition(), err
}

// ClearTranscript deletes a session's messages, keeping the session.
func (t *TranscriptCommands) ClearTranscript(ctx context.Context, sessionID, commandID string) (uint64, error) {
	if err := t.existing(ctx, sessionID); err != nil {
		return 0, err
	}
	res, err := t.append(ctx, sessionID, "clear_transcript", commandID, events.TranscriptCleared{SessionID: sessionID, At: t.h.now()})
	return res.LastPosition(), err
}

// DeleteSession deletes a session and its messages (reason requested or
// pruned).
func (t *TranscriptCommands) DeleteSession(ctx context.Context, sessionID, reason, commandID string) (uint64, error) {
	if err := t.existing(ctx, sessionID); err != nil {
		return 0, err
	}
	res, err := t.append(ctx, sessionID, "delete_session", commandID, events.TranscriptDeleted{SessionID: sessionID, Reason: reason, At: t.h.now()})
	return res.LastPosition(), err
}

// EndSession ends a session for reason (the first reason wins).
func (t *TranscriptCommands) EndSession(ctx context.Context, sessionID, reason, commandID string) (uint64, error) {
	if reason == "" || len(reason) > 64 {
		return 0, fmt.Errorf("%w: end reason must be 1 to 64 bytes", domain.ErrInvalidArgument)
	}
	if err := t.existing(ctx, sessionID); err != nil {
		return 0, err
	}
	res, err := t.append(ctx, sessionID, "end_session", commandID, events.TranscriptEnded{SessionID: sessionID, Reason: reason, At: t.h.now()})
	return res.LastPosition(), err
}
