package commands

import (
	"context"
	"fmt"

	"hermes/domain"
	"hermes/events"
)

// OpenSession creates a session without a lane (Hermes' create_session).
// Opening a session that exists appends nothing (the first write wins).
type OpenSession struct {
	Opened    events.TranscriptOpened
	CommandID string
}

// OpenSession opens a session and returns the position of its event (0
// when the session existed).
func (t *TranscriptCommands) OpenSession(ctx context.Context, c OpenSession) (uint64, error) {
	e := c.Opened
	if err := domain.ValidateSessionID(e.SessionID); err != nil {
		return 0, err
	}
	exists, err := t.index.SessionExists(ctx, e.SessionID)
	if err != nil {
		return 0, fmt.Errorf("session %s: %w", e.SessionID, err)
	}
	if exists {
		return 0, nil
	}
	if p := e.ParentSessionID; p != nil && *p != "" {
		if *p == e.SessionID {
			return 0, fmt.Errorf("%w: a session cannot be its own parent", domain.ErrInvalidArgument)
		}
		if err := t.existing(ctx, *p); err != nil {
			return 0, fmt.Errorf("parent: %w", err)
		}
	}
	e.At = t.h.now()
	res, err := t.append(ctx, e.SessionID, "create_session", c.CommandID, e)
	return res.LastPosition(), err
}

// ReopenSession clears a session's end (Hermes' reopen_session).
type ReopenSession struct {
	SessionID string
	CommandID string
}

// ReopenSession reopens a session and returns the position.
func (t *TranscriptCommands) ReopenSession(ctx context.Context, c ReopenSession) (uint64, error) {
	if err := t.existing(ctx, c.SessionID); err != nil {
		return 0, err
	}
	res, err := t.append(ctx, c.SessionID, "reopen_session", c.CommandID, events.TranscriptReopened{SessionID: c.SessionID, At: t.h.now()})
	return res.LastPosition(), err
}

// SetArchived archives or unarchives a session and its compression chain
// (Hermes' set_session_archived).
type SetArchived struct {
	SessionID string
	Archived  bool
	CommandID string
}

// SetArchived records the flag and returns the position.
func (t *TranscriptCommands) SetArchived(ctx context.Context, c SetArchived) (uint64, error) {
	if err := t.existing(ctx, c.SessionID); err != nil {
		return 0, err
	}
	res, err := t.append(ctx, c.SessionID, "set_session_archived", c.CommandID,
		events.ArchivedSet{SessionID: c.SessionID, Archived: c.Archived, At: t.h.now()})
	return res.LastPosition(), err
}
