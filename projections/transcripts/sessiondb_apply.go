package transcripts

import (
	"context"
	"fmt"

	"hermes/events"
	"hermes/projections/migrate"
)

// addArchived is step 2: the archived flag of later Hermes schemas
// (set_session_archived), 0 for every existing row: a log written before
// it has no archive events.
func addArchived(ctx context.Context, tx migrate.Tx) error {
	_, err := tx.ExecContext(ctx, "ALTER TABLE sessions ADD COLUMN archived INTEGER NOT NULL DEFAULT 0")
	return err
}

// The SessionDB events of the Python client ([C]) join the one list of
// state.db events here, so the shared table stays as it was.
func init() {
	stateEvents[events.TypeTranscriptOpened] = stateHandler{sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		return a.transcriptOpened(e.(events.TranscriptOpened))
	}}
	stateEvents[events.TypeArchivedSet] = stateHandler{sessionsOnly: true, apply: func(a *applier, _ string, e events.Event) error {
		return a.archivedSet(e.(events.ArchivedSet))
	}}
}

// transcriptOpened is Hermes' create_session: INSERT OR IGNORE, so the
// first write of a row wins. A parent the read model does not hold (the
// command checks it; a deleted one) is left out rather than failing the
// fold on the foreign key.
func (a *applier) transcriptOpened(e events.TranscriptOpened) error {
	source := e.Source
	if source == "" {
		source = sourceUnknown
	}
	a.known[e.SessionID] = true
	_, err := a.s.conn.ExecContext(a.ctx, `INSERT OR IGNORE INTO sessions
		(id, source, user_id, model, model_config, system_prompt, parent_session_id, started_at)
		VALUES (?, ?, ?, ?, ?, ?, (SELECT id FROM sessions WHERE id = ?), ?)`,
		e.SessionID, source, ptrArg(e.UserID), ptrArg(e.Model), ptrArg(e.ModelConfig), ptrArg(e.SystemPrompt),
		ptrArg(e.ParentSessionID), unixSeconds(e.At))
	if err != nil {
		return fmt.Errorf("open session %s: %w", e.SessionID, err)
	}
	return nil
}

// archivedSet sets the flag on the session and on its compression chain
// both ways (a parent ended by compression and a child started after that
// end belong to one logical conversation), as Hermes does.
func (a *applier) archivedSet(e events.ArchivedSet) error {
	flag := 0
	if e.Archived {
		flag = 1
	}
	_, err := a.s.conn.ExecContext(a.ctx, `WITH RECURSIVE
		up(id) AS (
			SELECT ?
			UNION
			SELECT p.id FROM up JOIN sessions c ON c.id = up.id JOIN sessions p ON p.id = c.parent_session_id
			WHERE p.end_reason = 'compression' AND c.started_at >= p.ended_at),
		down(id) AS (
			SELECT ?
			UNION
			SELECT c.id FROM down JOIN sessions p ON p.id = down.id JOIN sessions c ON c.parent_session_id = p.id
			WHERE p.end_reason = 'compression' AND c.started_at >= p.ended_at)
		UPDATE sessions SET archived = ? WHERE id IN (SELECT id FROM up UNION SELECT id FROM down)`,
		e.SessionID, e.SessionID, flag)
	if err != nil {
		return fmt.Errorf("archive session %s: %w", e.SessionID, err)
	}
	return nil
}

func ptrArg(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}
