package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"hermes/domain"
	"hermes/events"
)

// SetModelOverride persists (Override non-nil) or clears (nil) the /model
// override of lane Key's current session.
type SetModelOverride struct {
	Key       string
	Override  *domain.ModelOverride
	CommandID string
}

// SetModelOverride is Hermes' set_model_override.
func (h *Handler) SetModelOverride(ctx context.Context, c SetModelOverride) (LaneResult, error) {
	return h.execute(ctx, c.Key, "set_model_override", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.SetModelOverride(c.Override, now)
	})
}

// SetEntryMetadata sets the metadata value MetaKey of lane Key's current
// session to Value (JSON).
type SetEntryMetadata struct {
	Key       string
	MetaKey   string
	Value     json.RawMessage
	CommandID string
}

// SetEntryMetadata is Hermes' set_session_metadata.
func (h *Handler) SetEntryMetadata(ctx context.Context, c SetEntryMetadata) (LaneResult, error) {
	return h.execute(ctx, c.Key, "set_entry_metadata", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.SetEntryMetadata(c.MetaKey, c.Value, now)
	})
}

// RecoverLooseTurns closes the open turns no gateway run holds (turns a
// gateway opened without announcing a run: Hermes' active-turn markers).
// A gateway's run recovery never reaches them, so a gateway's start asks
// for this (Hermes' recover_interrupted_turns), and its clean stop too
// (discard_active_turn_markers, with Discard).
type RecoverLooseTurns struct {
	// MaxAge: a turn started longer ago is closed without continuing it;
	// 0 or less: no turn is too old.
	MaxAge time.Duration
	// Discard closes every such turn without continuing it.
	Discard   bool
	CommandID string
}

// LooseTurns is what RecoverLooseTurns did: the lanes it marked to resume
// (restart_interrupted) and the lanes whose turn it closed without a mark
// (too old, discarded, or a lane suspended or already pending).
type LooseTurns struct {
	Resumed []string
	Closed  []string
}

// RecoverLooseTurns closes the loose turns the read model lists. A turn
// another command closed meanwhile is left alone (each close names its
// turn id).
func (h *Handler) RecoverLooseTurns(ctx context.Context, dir OpenTurnDirectory, c RecoverLooseTurns) (LooseTurns, error) {
	keys, err := dir.OpenTurnKeys(ctx)
	if err != nil {
		return LooseTurns{}, fmt.Errorf("open turns: %w", err)
	}
	turns, err := h.OpenTurns(ctx, keys)
	if err != nil {
		return LooseTurns{}, err
	}
	var out LooseTurns
	for _, t := range turns {
		if t.GatewayRun != "" {
			continue
		}
		command := "recover_loose_turn"
		if c.Discard {
			command = "discard_loose_turn"
		}
		id := ""
		if c.CommandID != "" {
			id = c.CommandID + "/" + t.Key
		}
		res, err := h.execute(ctx, t.Key, command, id, func(l domain.Lane, now time.Time) ([]events.Event, error) {
			if l.OpenTurnID != t.TurnID {
				return nil, nil
			}
			if c.Discard || (c.MaxAge > 0 && l.TurnStartedAt.Before(now.Add(-c.MaxAge))) {
				return l.DiscardTurn(t.TurnID, now), nil
			}
			return l.InterruptTurn(events.ResumeRestartInterrupted, now)
		})
		if err != nil {
			return out, fmt.Errorf("close loose turn of %s: %w", t.Key, err)
		}
		switch {
		case marks(res.Events):
			out.Resumed = append(out.Resumed, t.Key)
		case len(res.Events) > 0:
			out.Closed = append(out.Closed, t.Key)
		}
	}
	return out, nil
}

func marks(evs []events.Event) bool {
	for _, e := range evs {
		if _, ok := e.(events.ResumeMarked); ok {
			return true
		}
	}
	return false
}
