package commands

import (
	"context"
	"errors"
	"fmt"

	"hermes/domain"
	"hermes/events"
)

// Writes fenced by a turn. A turn is the lease of its lane: the process
// that started it (a node, a gateway run) writes the agent's reply while it
// is open, and once it ended — completed, or interrupted because its run
// ended or its node's run was adopted — a write that names it is refused
// with domain.ErrTurnNotOpen. Each refusal is decided on what the write
// appends to, with the stream's expected version:
//
//   - a completion naming its turn is decided on the lane (the lane's
//     expected version), like every lane command;
//   - a message naming its turn lives in another stream (the session's
//     transcript). Whoever closes a turn that is not theirs first appends
//     a transcript.turn_fenced to that transcript (fenceTurn), then the
//     lane's turn_interrupted; so does a completion when other processes
//     write the store (in one process the lane lock orders a message and
//     a completion). The message append reads the transcript's
//     version, then the lane (the turn must be open), then looks for the
//     fence up to that version, and appends at that version. A message
//     that checked the lane before an interruption and reaches the store
//     after it finds the transcript moved by the fence and is decided
//     again (refused), so no message of an adopted turn lands after its
//     interruption.

// fenceAttempts bounds the retries of a fenced message append whose
// transcript moved between its read and its append.
const fenceAttempts = 8

// appliedScan bounds how far back a refused retry looks for the events of
// its own first attempt.
const appliedScan = 256

// fenceTurn appends transcript.turn_fenced for turn turnID to the
// transcript of sessionID, before the turn is interrupted by someone other
// than its owner. Its event id is the turn's, so every fencer of one turn
// proposes the same event and the store keeps one.
func (h *Handler) fenceTurn(ctx context.Context, sessionID, turnID string) error {
	if sessionID == "" || turnID == "" {
		return nil
	}
	if err := domain.ValidateSessionID(sessionID); err != nil {
		return fmt.Errorf("fence turn %s: %w", turnID, err)
	}
	e := events.TurnFenced{SessionID: sessionID, TurnID: turnID, At: h.now()}
	stream := events.TranscriptStream(sessionID)
	commandID := "fence/" + sessionID + "/" + turnID
	_, err := h.store.Append(ctx, stream, events.AnyVersion(), []events.Proposed{{
		ID:       eventID(commandID, stream, 0),
		Event:    e,
		Metadata: events.Metadata{SchemaVersion: events.SchemaVersionOf(e.EventType()), Command: "fence_turn", CommandID: commandID, Node: h.node},
	}})
	if err != nil {
		return fmt.Errorf("fence turn %s on %s: %w", turnID, stream, err)
	}
	return nil
}

// fence is the turn a closer fenced, in the transcript of sessionID.
type fence struct{ sessionID, turnID string }

// covers reports whether f fenced the turn open on l now: a lane that
// moved to another session (a reset) or turn since is fenced again.
func (f fence) covers(l domain.Lane) bool {
	return f.turnID != "" && f.turnID == l.OpenTurnID && f.sessionID == l.SessionID
}

// errFenceMoved: the lane moved after its turn was fenced; the closer
// fences again and decides again.
var errFenceMoved = errors.New("the lane moved since its turn's transcript was fenced")

// fenceCompletion fences the transcript of the turn c completes, when
// other processes write the store: a message of the turn that checked the
// lane before the completion, on another node, cannot land after it. (In
// one process the lane lock orders the two: appendFenced holds it.) Only
// a completion the lane would accept fences: a refused one leaves the turn
// open and its messages free.
func (h *Handler) fenceCompletion(ctx context.Context, c CompleteTurn) (fence, error) {
	if h.soleWriter {
		return fence{}, nil
	}
	lane, _, err := h.Lane(ctx, c.Key)
	if err != nil {
		if isNotFound(err) {
			return fence{}, nil
		}
		return fence{}, fmt.Errorf("complete turn on %s: %w", c.Key, err)
	}
	if !lane.TurnOpen() {
		return fence{}, nil
	}
	if _, err := lane.CompleteTurn(c.Outcome, h.now()); err != nil {
		return fence{}, nil // refused: the decision on the lane says why
	}
	f := fence{sessionID: lane.SessionID, turnID: lane.OpenTurnID}
	return f, h.fenceTurn(ctx, f.sessionID, f.turnID)
}

// appliedIn looks, among the last appliedScan events of stream, for the
// event with id (a retried command whose first attempt was applied).
func (h *Handler) appliedIn(ctx context.Context, stream, id string) (events.Envelope, bool, error) {
	var from uint64
	seen := 0
	for seen < appliedScan {
		page, err := h.store.ReadStream(ctx, stream, from, leaseScanPage, events.Backwards)
		if isNotFound(err) {
			return events.Envelope{}, false, nil
		}
		if err != nil {
			return events.Envelope{}, false, err
		}
		for _, env := range page {
			if env.ID == id {
				return env, true, nil
			}
		}
		seen += len(page)
		if len(page) < leaseScanPage || page[len(page)-1].Version <= 1 {
			break
		}
		from = page[len(page)-1].Version - 1
	}
	return events.Envelope{}, false, nil
}

// transcriptVersion is the version of a transcript stream (0: none yet).
func (h *Handler) transcriptVersion(ctx context.Context, stream string) (uint64, error) {
	page, err := h.store.ReadStream(ctx, stream, 0, 1, events.Backwards)
	if isNotFound(err) || err == nil && len(page) == 0 {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return page[0].Version, nil
}

// fencedBetween reports whether stream holds a transcript.turn_fenced of
// turnID at or before version and after global position since.
func (h *Handler) fencedBetween(ctx context.Context, stream, turnID string, version, since uint64) (bool, error) {
	for from := version; from > 0; {
		page, err := h.store.ReadStream(ctx, stream, from, turnScan, events.Backwards)
		if isNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, env := range page {
			if env.Position <= since {
				return false, nil
			}
			if f, ok := env.Event.(events.TurnFenced); ok && f.TurnID == turnID {
				return true, nil
			}
		}
		if len(page) < turnScan {
			return false, nil
		}
		from = page[len(page)-1].Version - 1
	}
	return false, nil
}

// appendFenced appends message e of c.SessionID only while c.TurnID is the
// open turn of the lane the session is on (see the fencing rule above).
func (t *TranscriptCommands) appendFenced(ctx context.Context, c AppendMessage, e events.MessageAppended) (events.AppendResult, error) {
	h := t.h
	cmd := identify(c.CommandID)
	stream := events.TranscriptStream(c.SessionID)
	// The lane's lock orders this append and the lane's commands in this
	// process (a completion cannot slip between the check and the append).
	if key, err := t.laneOfSession(ctx, c.SessionID); err == nil && key != "" {
		unlock := h.locks.lock(key)
		defer unlock()
	}
	for range fenceAttempts {
		version, err := h.transcriptVersion(ctx, stream)
		if err != nil {
			return events.AppendResult{}, fmt.Errorf("append_message %s: %w", c.SessionID, err)
		}
		if err := t.checkTurn(ctx, c.SessionID, c.TurnID, stream, version); err != nil {
			if c.CommandID != "" && errors.Is(err, domain.ErrTurnNotOpen) {
				// A retry of an append that went through before the turn
				// ended answers as the first attempt did.
				if env, ok, aerr := h.appliedIn(ctx, stream, cmd.eventID(stream, 0)); aerr == nil && ok {
					return events.AppendResult{Duplicate: true, Versions: []uint64{env.Version}, Positions: []uint64{env.Position}}, nil
				}
			}
			return events.AppendResult{}, fmt.Errorf("append_message %s: %w", c.SessionID, err)
		}
		res, err := h.store.Append(ctx, stream, events.ExactVersion(version), []events.Proposed{{
			ID:       cmd.eventID(stream, 0),
			Event:    e,
			Metadata: events.Metadata{SchemaVersion: events.SchemaVersionOf(e.EventType()), Command: "append_message", CommandID: cmd.id, Node: h.node},
		}})
		if errors.Is(err, events.ErrWrongExpectedVersion) {
			continue // the transcript moved (a fence, or another message): decide again
		}
		if err != nil {
			return events.AppendResult{}, fmt.Errorf("append_message %s: %w", c.SessionID, err)
		}
		return res, nil
	}
	return events.AppendResult{}, fmt.Errorf("append_message %s: %w", c.SessionID, ErrConflict)
}

// checkTurn is the fence of a message of turnID to sessionID, whose
// transcript stream was read at version: the session's lane (read from
// the store) has turnID open, and the transcript holds no fence of it.
func (t *TranscriptCommands) checkTurn(ctx context.Context, sessionID, turnID, stream string, version uint64) error {
	key, err := t.laneOfSession(ctx, sessionID)
	if err != nil {
		return err
	}
	if key == "" {
		return fmt.Errorf("%w: turn %s: session %s is on no lane", domain.ErrTurnNotOpen, turnID, sessionID)
	}
	lane, laneVersion, err := t.h.Lane(ctx, key)
	if err != nil {
		return fmt.Errorf("lane %s: %w", key, err)
	}
	if lane.SessionID != sessionID {
		return fmt.Errorf("%w: turn %s: lane %s moved to another session", domain.ErrTurnNotOpen, turnID, key)
	}
	if err := lane.CheckTurnOpen(turnID); err != nil {
		return err
	}
	started, found, err := t.h.lastTurnStarted(ctx, events.LaneStream(key), laneVersion)
	if err != nil {
		return fmt.Errorf("lane %s: %w", key, err)
	}
	if !found {
		return nil
	}
	fenced, err := t.h.fencedBetween(ctx, stream, turnID, version, started.Position)
	if err != nil {
		return fmt.Errorf("transcript %s: %w", sessionID, err)
	}
	if fenced {
		return fmt.Errorf("%w: turn %s is being closed by another node", domain.ErrTurnNotOpen, turnID)
	}
	return nil
}
