package commands

import (
	"context"
	"errors"
	"fmt"
	"time"

	"hermes/domain"
	"hermes/events"
)

// ResolveSession is get_or_create_session for one incoming message.
type ResolveSession struct {
	Source   domain.SessionSource
	ForceNew bool
	// CommandID makes a retried request idempotent; empty: a fresh one.
	CommandID string
}

// Resolved is the outcome of ResolveSession.
type Resolved struct {
	LaneResult
	domain.Resolution
}

// SessionKey returns the lane key of a source under the configuration.
func (h *Handler) SessionKey(src domain.SessionSource) (string, error) {
	opts := h.cfg.Keys
	if h.aliases != nil && src.Platform == domain.PlatformWhatsApp {
		a, err := h.aliases.WhatsAppAliases()
		if err != nil {
			return "", fmt.Errorf("whatsapp aliases: %w", err)
		}
		opts.WhatsAppAliases = a
	}
	return domain.BuildSessionKey(src, opts), nil
}

// ResolveSession resolves (gets or creates) the lane of a message source.
func (h *Handler) ResolveSession(ctx context.Context, c ResolveSession) (Resolved, error) {
	src := c.Source.Normalized()
	if src.Platform == "" {
		return Resolved{}, fmt.Errorf("resolve session: %w: source.platform is required", domain.ErrInvalidArgument)
	}
	key, err := h.SessionKey(src)
	if err != nil {
		return Resolved{}, fmt.Errorf("resolve session: %w", err)
	}
	rules := h.cfg.rulesFor(src.Platform, src.ChatType)
	res, err := h.execute(ctx, key, "resolve_session", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.Resolve(domain.ResolveRequest{Source: src, SessionKey: key, ForceNew: c.ForceNew, Rules: rules, Entropy: h.entropy()}, now)
	})
	if err != nil {
		return Resolved{}, err
	}
	return Resolved{LaneResult: res, Resolution: domain.ResolutionOf(res.Events)}, nil
}

// UpdateSession is update_session: activity that pushes back the idle
// deadline, optionally recording the last prompt size.
type UpdateSession struct {
	Key string
	// LastPromptTokens, when not nil, is the size of the last prompt.
	LastPromptTokens *int64
	// CommandID makes a retried request idempotent; empty: a fresh one.
	CommandID string
}

// UpdateSession records activity on a lane.
func (h *Handler) UpdateSession(ctx context.Context, c UpdateSession) (LaneResult, error) {
	return h.execute(ctx, c.Key, "update_session", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.Touch(c.LastPromptTokens, now)
	})
}

// ResetSession is an explicit /new or /reset.
type ResetSession struct {
	Key string
	// DisplayName names the new session (optional).
	DisplayName string
	CommandID   string
}

// ResetSession starts a new session on a lane.
func (h *Handler) ResetSession(ctx context.Context, c ResetSession) (LaneResult, error) {
	return h.execute(ctx, c.Key, "reset_session", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.Reset(c.DisplayName, h.cfg.rulesFor(l.Platform, l.ChatType), h.entropy(), now)
	})
}

// SwitchSession is /resume: point the lane at an existing session id.
type SwitchSession struct {
	Key string
	// SessionID is the session the lane switches to.
	SessionID string
	CommandID string
}

// SwitchSession points a lane at another session.
func (h *Handler) SwitchSession(ctx context.Context, c SwitchSession) (LaneResult, error) {
	return h.execute(ctx, c.Key, "switch_session", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.Switch(c.SessionID, now)
	})
}

// SuspendSession is /stop (or the stuck-loop escalation, with reason
// events.SuspendStuckLoop).
type SuspendSession struct {
	Key string
	// Reason is events.SuspendStopCommand or events.SuspendStuckLoop.
	Reason    string
	CommandID string
}

// SuspendSession suspends a lane.
func (h *Handler) SuspendSession(ctx context.Context, c SuspendSession) (LaneResult, error) {
	return h.execute(ctx, c.Key, "suspend_session", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.Suspend(c.Reason, now)
	})
}

// MarkResumePending marks the lane's session to be preserved on the next
// access.
type MarkResumePending struct {
	Key       string
	Reason    string
	CommandID string
}

// MarkResumePending marks a lane resume-pending. marked is false (and err
// nil) when the lane is suspended.
func (h *Handler) MarkResumePending(ctx context.Context, c MarkResumePending) (res LaneResult, marked bool, err error) {
	res, err = h.execute(ctx, c.Key, "mark_resume_pending", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.MarkResumePending(c.Reason, now)
	})
	if errors.Is(err, domain.ErrSuspended) {
		return res, false, nil
	}
	if err != nil {
		return res, false, err
	}
	return res, res.Lane.ResumePending, nil
}

// ClearResumePending removes a resume-pending mark.
type ClearResumePending struct {
	Key       string
	CommandID string
}

// ClearResumePending removes a lane's resume-pending mark; cleared is false
// when there was none.
func (h *Handler) ClearResumePending(ctx context.Context, c ClearResumePending) (res LaneResult, cleared bool, err error) {
	res, err = h.execute(ctx, c.Key, "clear_resume_pending", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.ClearResumePending(now)
	})
	if err != nil {
		return res, false, err
	}
	return res, hasEvent[events.ResumeCleared](res.Events), nil
}

// StartTurn records that the agent began a turn.
type StartTurn struct {
	Key string
	// TurnID names the turn; empty: a generated one.
	TurnID string
	// Gateway and RunID, when set, name the gateway run the turn belongs
	// to (it must be running): that run's end cuts the turn, hermes' own
	// restarts do not.
	Gateway, RunID string
	CommandID      string
}

// StartTurn opens a turn on a lane and returns its turn id.
func (h *Handler) StartTurn(ctx context.Context, c StartTurn) (LaneResult, string, error) {
	turnID := c.TurnID
	if turnID == "" {
		turnID = "turn_" + h.entropy() + h.entropy()
	}
	tag := ""
	if c.Gateway != "" || c.RunID != "" {
		if err := h.RunningGatewayRun(ctx, c.Gateway, c.RunID); err != nil {
			return LaneResult{}, "", fmt.Errorf("start turn on %s: %w", c.Key, err)
		}
		tag = events.GatewayRunTag(c.Gateway, c.RunID)
	}
	res, err := h.executeRun(ctx, c.Key, "start_turn", c.CommandID, tag, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.StartTurn(turnID, now)
	})
	if err != nil {
		return res, "", err
	}
	return res, res.Lane.OpenTurnID, nil
}

// CompleteTurn records the end of a turn with its token and cost deltas; a
// successful turn clears resume-pending.
type CompleteTurn struct {
	Key       string
	Outcome   domain.TurnOutcome
	CommandID string
}

// CompleteTurn closes a lane's turn. An outcome naming its turn is fenced:
// refused with domain.ErrTurnNotOpen when that turn is not the lane's open
// turn (it ended or was adopted), appending nothing.
func (h *Handler) CompleteTurn(ctx context.Context, c CompleteTurn) (LaneResult, error) {
	var res LaneResult
	var err error
	for range fenceAttempts {
		var f fence
		f, err = h.fenceCompletion(ctx, c)
		if err != nil {
			return LaneResult{}, err
		}
		res, err = h.execute(ctx, c.Key, "complete_turn", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
			// A completion the lane refuses is refused as it is: only one
			// it accepts needs the fence (fenceCompletion fences only those).
			evs, err := l.CompleteTurn(c.Outcome, now)
			if err != nil {
				return nil, err
			}
			closes := l.TurnOpen() && (c.Outcome.TurnID == "" || c.Outcome.TurnID == l.OpenTurnID)
			if !h.soleWriter && closes && !f.covers(l) {
				return nil, errFenceMoved
			}
			return evs, nil
		})
		if !errors.Is(err, errFenceMoved) {
			break
		}
	}
	if errors.Is(err, errFenceMoved) {
		return res, fmt.Errorf("complete turn on %s: %w", c.Key, ErrConflict)
	}
	if errors.Is(err, domain.ErrTurnNotOpen) && c.CommandID != "" {
		// A retry of a completion that went through (the turn it closed
		// is no longer open) answers as the first attempt did.
		stream := events.LaneStream(c.Key)
		if env, ok, aerr := h.appliedIn(ctx, stream, identify(c.CommandID).eventID(stream, 0)); aerr == nil && ok {
			return LaneResult{Lane: res.Lane, Version: res.Version, Position: env.Position, Events: []events.Event{env.Event}}, nil
		}
	}
	return res, err
}

// SetActiveProcesses records the lane's live background process count.
type SetActiveProcesses struct {
	Key       string
	Count     int
	CommandID string
}

// SetActiveProcesses records a lane's live background process count.
func (h *Handler) SetActiveProcesses(ctx context.Context, c SetActiveProcesses) (LaneResult, error) {
	return h.execute(ctx, c.Key, "set_active_processes", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.SetActiveProcesses(c.Count, now)
	})
}

// RecordActivity notes a message appended to SessionID's transcript on the
// lane Key (only the first of a session is recorded).
type RecordActivity struct {
	Key       string
	SessionID string
	CommandID string
}

// RecordActivity notes transcript activity on a lane.
func (h *Handler) RecordActivity(ctx context.Context, c RecordActivity) (LaneResult, error) {
	return h.execute(ctx, c.Key, "record_activity", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.RecordActivity(c.SessionID, now)
	})
}

// SuspendRecentlyActive is crash recovery: every lane updated within
// MaxAge is marked resume-pending with restart_interrupted (never a
// suspended or already pending lane).
type SuspendRecentlyActive struct {
	MaxAge time.Duration
	// CommandID, when set, makes each lane's mark idempotent
	// (CommandID/key).
	CommandID string
}

// SuspendRecentlyActive marks the recently active lanes and returns the
// keys it marked.
func (h *Handler) SuspendRecentlyActive(ctx context.Context, c SuspendRecentlyActive) ([]string, error) {
	if c.MaxAge < 0 {
		return nil, fmt.Errorf("suspend recently active: %w: max age %v is negative", domain.ErrInvalidArgument, c.MaxAge)
	}
	return h.sweep(ctx, "suspend_recently_active", c.CommandID, func(l domain.Lane, now time.Time) []events.Event {
		return l.MarkInterruptedIfRecent(c.MaxAge, now)
	})
}

// PruneOldEntries drops lane entries not updated for MaxAge (never
// suspended lanes or lanes with live processes).
type PruneOldEntries struct {
	MaxAge time.Duration
	// CommandID, when set, makes each lane's prune idempotent
	// (CommandID/key).
	CommandID string
}

// PruneOldEntries prunes the stale entries and returns the pruned keys.
func (h *Handler) PruneOldEntries(ctx context.Context, c PruneOldEntries) ([]string, error) {
	if c.MaxAge < 0 {
		return nil, fmt.Errorf("prune entries: %w: max age %v is negative", domain.ErrInvalidArgument, c.MaxAge)
	}
	return h.sweep(ctx, "prune_old_entries", c.CommandID, func(l domain.Lane, now time.Time) []events.Event {
		return l.Prune(c.MaxAge, now)
	})
}

// FinalizeExpiry records that the expiry watcher finalized a lane's expired
// session.
type FinalizeExpiry struct {
	Key string
	// Forced: finalized without its hooks, which kept failing.
	Forced    bool
	CommandID string
}

// FinalizeExpiry marks a lane's expired session finalized; it appends
// nothing when the lane is not (or no longer) expired.
func (h *Handler) FinalizeExpiry(ctx context.Context, c FinalizeExpiry) (LaneResult, error) {
	return h.execute(ctx, c.Key, "finalize_expiry", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.FinalizeExpiry(h.cfg.rulesFor(l.Platform, l.ChatType), c.Forced, now), nil
	})
}

func hasEvent[E events.Event](es []events.Event) bool {
	for _, e := range es {
		if _, ok := e.(E); ok {
			return true
		}
	}
	return false
}
