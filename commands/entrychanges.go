package commands

import (
	"context"
	"fmt"
	"time"

	"hermes/domain"
	"hermes/events"
)

// SessionParents tells a session's parent in the transcripts (its
// compression predecessor), for the check that a compression split moves
// a lane to a continuation of its session. The caller makes it current.
type SessionParents interface {
	// ParentSessionID returns the session's parent ("" when it has none)
	// and whether the session exists.
	ParentSessionID(ctx context.Context, sessionID string) (parent string, exists bool, err error)
}

// maxLineage bounds the parent links followed from a continuation to the
// session it continues (each compression adds one).
const maxLineage = 64

// CompressSession is a compression split: the gateway moved the lane's
// entry from PreviousSessionID to the continuation SessionID.
type CompressSession struct {
	Key               string
	SessionID         string
	PreviousSessionID string
	CommandID         string
}

// CompressSession moves the lane to the continuation session, keeping the
// rest of its entry. The continuation must descend from the previous
// session through parent links (at most 64).
func (h *Handler) CompressSession(ctx context.Context, parents SessionParents, c CompressSession) (LaneResult, error) {
	if err := domain.ValidateSessionID(c.SessionID); err != nil {
		return LaneResult{}, err
	}
	if err := domain.ValidateSessionID(c.PreviousSessionID); err != nil {
		return LaneResult{}, fmt.Errorf("previous_session_id: %w", err)
	}
	continuation, err := descends(ctx, parents, c.SessionID, c.PreviousSessionID)
	if err != nil {
		return LaneResult{}, fmt.Errorf("compress %s: %w", c.Key, err)
	}
	return h.execute(ctx, c.Key, "compress_session", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.Compress(c.SessionID, c.PreviousSessionID, continuation, now)
	})
}

// descends reports whether id reaches ancestor through parent links.
func descends(ctx context.Context, parents SessionParents, id, ancestor string) (bool, error) {
	cur := id
	for range maxLineage {
		parent, exists, err := parents.ParentSessionID(ctx, cur)
		if err != nil {
			return false, err
		}
		if !exists {
			if cur == id {
				return false, fmt.Errorf("%w: %s", ErrSessionNotFound, id)
			}
			return false, nil
		}
		if parent == "" {
			return false, nil
		}
		if parent == ancestor {
			return true, nil
		}
		cur = parent
	}
	return false, nil
}

// ConsumeFreshReset is the gateway consuming the is_fresh_reset flag of
// SessionID (empty: the lane's current session).
type ConsumeFreshReset struct {
	Key       string
	SessionID string
	CommandID string
}

// ConsumeFreshReset clears the lane's is_fresh_reset flag, once.
func (h *Handler) ConsumeFreshReset(ctx context.Context, c ConsumeFreshReset) (LaneResult, error) {
	return h.execute(ctx, c.Key, "consume_fresh_reset", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.ConsumeFreshReset(c.SessionID, events.FreshResetConsumedExplicitly, now)
	})
}

// SuspendStuckLoop is a stuck-loop suspension asked from outside (Hermes'
// gateway at its start). Count is hermes' own count of the lane's
// consecutive interrupted restarts (the read model's), Threshold the
// configured recovery.stuck_loop_threshold.
type SuspendStuckLoop struct {
	Key              string
	Count, Threshold int
	CommandID        string
}

// SuspendStuckLoop suspends the lane when hermes' count supports it; an
// already suspended lane changes nothing.
func (h *Handler) SuspendStuckLoop(ctx context.Context, c SuspendStuckLoop) (LaneResult, error) {
	return h.execute(ctx, c.Key, "suspend_session", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.SuspendStuckLoop(c.Count, c.Threshold, now)
	})
}

// FinalizeExpiryOf is the gateway's expiry watcher reporting that it
// finalized SessionID (Forced: after failed hooks).
type FinalizeExpiryOf struct {
	Key       string
	SessionID string
	Forced    bool
	CommandID string
}

// FinalizeExpiryOf records the finalization when the session expired under
// the lane's policy.
func (h *Handler) FinalizeExpiryOf(ctx context.Context, c FinalizeExpiryOf) (LaneResult, error) {
	return h.execute(ctx, c.Key, "finalize_expiry", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.FinalizeExpiryOf(c.SessionID, h.cfg.rulesFor(l.Platform, l.ChatType), c.Forced, now)
	})
}

// ExpiryReason is the lane's expiry under its reset policy at the
// handler's clock (domain.Lane.ExpiryReason): "idle", "daily" or "".
func (h *Handler) ExpiryReason(l domain.Lane) string {
	return l.ExpiryReason(h.cfg.rulesFor(l.Platform, l.ChatType), h.now())
}
