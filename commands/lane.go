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
func (h *Handler) UpdateSession(ctx context.Context, key string, lastPromptTokens *int64, commandID string) (LaneResult, error) {
	return h.execute(ctx, key, "update_session", commandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.Touch(lastPromptTokens, now)
	})
}

// ResetSession is an explicit /new or /reset.
func (h *Handler) ResetSession(ctx context.Context, key, displayName, commandID string) (LaneResult, error) {
	return h.execute(ctx, key, "reset_session", commandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.Reset(displayName, h.cfg.rulesFor(l.Platform, l.ChatType), h.entropy(), now)
	})
}

// SwitchSession is /resume: point the lane at an existing session id.
func (h *Handler) SwitchSession(ctx context.Context, key, target, commandID string) (LaneResult, error) {
	return h.execute(ctx, key, "switch_session", commandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.Switch(target, now)
	})
}

// SuspendSession is /stop (or the stuck-loop escalation, with reason
// stuck_loop).
func (h *Handler) SuspendSession(ctx context.Context, key, reason, commandID string) (LaneResult, error) {
	return h.execute(ctx, key, "suspend_session", commandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.Suspend(reason, now)
	})
}

// MarkResumePending marks the lane's session to be preserved on the next
// access. marked is false (and err nil) when the lane is suspended.
func (h *Handler) MarkResumePending(ctx context.Context, key, reason, commandID string) (res LaneResult, marked bool, err error) {
	res, err = h.execute(ctx, key, "mark_resume_pending", commandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.MarkResumePending(reason, now)
	})
	if errors.Is(err, domain.ErrSuspended) {
		return res, false, nil
	}
	if err != nil {
		return res, false, err
	}
	return res, res.Lane.ResumePending, nil
}

// ClearResumePending removes a resume-pending mark; cleared is false when
// there was none.
func (h *Handler) ClearResumePending(ctx context.Context, key, commandID string) (res LaneResult, cleared bool, err error) {
	res, err = h.execute(ctx, key, "clear_resume_pending", commandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.ClearResumePending(now)
	})
	if err != nil {
		return res, false, err
	}
	return res, hasEvent[events.ResumeCleared](res.Events), nil
}

// StartTurn records that the agent began a turn; an empty turnID gets a
// generated one. It returns the turn id.
func (h *Handler) StartTurn(ctx context.Context, key, turnID, commandID string) (LaneResult, string, error) {
	if turnID == "" {
		turnID = "turn_" + h.entropy() + h.entropy()
	}
	res, err := h.execute(ctx, key, "start_turn", commandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.StartTurn(turnID, now)
	})
	if err != nil {
		return res, "", err
	}
	return res, res.Lane.OpenTurnID, nil
}

// CompleteTurn records the end of a turn with its token and cost deltas; a
// successful turn clears resume-pending.
func (h *Handler) CompleteTurn(ctx context.Context, key string, o domain.TurnOutcome, commandID string) (LaneResult, error) {
	return h.execute(ctx, key, "complete_turn", commandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.CompleteTurn(o, now)
	})
}

// SetActiveProcesses records the lane's live background process count.
func (h *Handler) SetActiveProcesses(ctx context.Context, key string, count int, commandID string) (LaneResult, error) {
	return h.execute(ctx, key, "set_active_processes", commandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.SetActiveProcesses(count, now)
	})
}

// RecordActivity notes a message appended to sessionID's transcript on the
// lane key (only the first of a session is recorded).
func (h *Handler) RecordActivity(ctx context.Context, key, sessionID, commandID string) (LaneResult, error) {
	return h.execute(ctx, key, "record_activity", commandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.RecordActivity(sessionID, now)
	})
}

// SuspendRecentlyActive is crash recovery: every lane updated within maxAge
// is marked resume-pending with restart_interrupted (never a suspended or
// already pending lane). It returns the keys it marked.
func (h *Handler) SuspendRecentlyActive(ctx context.Context, maxAge time.Duration, commandID string) ([]string, error) {
	if maxAge < 0 {
		return nil, fmt.Errorf("suspend recently active: %w: max age %v is negative", domain.ErrInvalidArgument, maxAge)
	}
	return h.sweep(ctx, "suspend_recently_active", commandID, func(l domain.Lane, now time.Time) []events.Event {
		return l.MarkInterruptedIfRecent(maxAge, now)
	})
}

// PruneOldEntries drops lane entries not updated for maxAge (never suspended
// lanes or lanes with live processes). It returns the pruned keys.
func (h *Handler) PruneOldEntries(ctx context.Context, maxAge time.Duration, commandID string) ([]string, error) {
	if maxAge < 0 {
		return nil, fmt.Errorf("prune entries: %w: max age %v is negative", domain.ErrInvalidArgument, maxAge)
	}
	return h.sweep(ctx, "prune_old_entries", commandID, func(l domain.Lane, now time.Time) []events.Event {
		return l.Prune(maxAge, now)
	})
}

// FinalizeExpiry records that the expiry watcher finalized a lane's expired
// session; it appends nothing when the lane is not (or no longer) expired.
func (h *Handler) FinalizeExpiry(ctx context.Context, key string, forced bool, commandID string) (LaneResult, error) {
	return h.execute(ctx, key, "finalize_expiry", commandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.FinalizeExpiry(h.cfg.rulesFor(l.Platform, l.ChatType), forced, now), nil
	})
}

// sweep applies a per-lane decision to every lane of the directory.
func (h *Handler) sweep(ctx context.Context, command, commandID string, decide func(domain.Lane, time.Time) []events.Event) ([]string, error) {
	if h.directory == nil {
		return nil, fmt.Errorf("%s: no lane directory configured", command)
	}
	keys, err := h.directory.SessionKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: list lanes: %w", command, err)
	}
	var changed []string
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return changed, err
		}
		sub := ""
		if commandID != "" {
			sub = commandID + "/" + key
		}
		res, err := h.execute(ctx, key, command, sub, func(l domain.Lane, now time.Time) ([]events.Event, error) {
			return decide(l, now), nil
		})
		if err != nil {
			return changed, err
		}
		if len(res.Events) > 0 {
			changed = append(changed, key)
		}
	}
	return changed, nil
}

func hasEvent[E events.Event](es []events.Event) bool {
	for _, e := range es {
		if _, ok := e.(E); ok {
			return true
		}
	}
	return false
}
