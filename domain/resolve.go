package domain

import (
	"fmt"
	"time"

	"hermes/events"
)

// LaneRules are the configured rules a lane decision needs.
type LaneRules struct {
	// Policy is the reset policy resolved for the lane's platform and type.
	Policy ResetPolicy
	// Location is the time zone of the daily boundary and of session ids.
	Location *time.Location
	// ResumeFreshness is how long a resume-pending mark preserves the
	// session (agent.gateway_auto_continue_freshness); 0 or less: forever.
	ResumeFreshness time.Duration
}

// ResolveRequest is get_or_create_session for one incoming message.
type ResolveRequest struct {
	Source     SessionSource
	SessionKey string
	ForceNew   bool
	Rules      LaneRules
	// Entropy is 8 lowercase hex characters for the id of a new session.
	Entropy string
}

// Resolve decides get_or_create_session, in Hermes' priority order: a
// missing lane (or force_new) gets a new session; a suspended lane is
// auto-reset; a resume-pending lane keeps its session (unless the mark is
// older than the freshness window: reset with resume_pending_expired); a
// lane whose policy says so is auto-reset (never one with live processes);
// otherwise the lane is touched.
func (l Lane) Resolve(req ResolveRequest, now time.Time) ([]events.Event, error) {
	src := req.Source.Normalized()
	if src.Platform == "" {
		return nil, fmt.Errorf("%w: source platform is required", ErrInvalidArgument)
	}
	if req.SessionKey == "" {
		return nil, fmt.Errorf("%w: session key is required", ErrInvalidArgument)
	}
	if !l.Exists() || req.ForceNew {
		id, err := NewSessionID(now, req.Rules.Location, req.Entropy)
		if err != nil {
			return nil, err
		}
		created := events.SessionCreated{
			SessionKey:  req.SessionKey,
			SessionID:   id,
			ForceNew:    req.ForceNew,
			Origin:      src.Event(),
			DisplayName: src.ChatName,
			Platform:    src.Platform,
			ChatType:    src.ChatType,
			At:          now,
		}
		if l.SessionID != "" {
			created.PreviousSessionID = l.SessionID
		}
		return []events.Event{created}, nil
	}

	reason := l.resetReason(req.Rules, now)
	if reason == "" {
		return []events.Event{events.Touched{At: now}}, nil
	}
	id, err := NewSessionID(now, req.Rules.Location, req.Entropy)
	if err != nil {
		return nil, err
	}
	return []events.Event{events.SessionAutoReset{
		SessionKey:        req.SessionKey,
		SessionID:         id,
		PreviousSessionID: l.SessionID,
		Reason:            reason,
		HadActivity:       l.HadActivity,
		Origin:            src.Event(),
		DisplayName:       src.ChatName,
		Platform:          src.Platform,
		ChatType:          src.ChatType,
		At:                now,
	}}, nil
}

// resetReason is why an existing lane's session must be replaced at now, or
// "" when it continues.
func (l Lane) resetReason(r LaneRules, now time.Time) string {
	if l.Suspended {
		return AutoResetSuspended
	}
	if l.ResumePending {
		if l.resumeExpired(r.ResumeFreshness, now) {
			return AutoResetResumePendingExpired
		}
		return ""
	}
	if l.ActiveProcesses > 0 {
		return ""
	}
	return r.Policy.ResetReason(l.UpdatedAt, now, r.Location)
}

// resumeExpired: the resume mark is older than the freshness window (the
// boundary itself is still fresh). A mark with no time counts as fresh, as
// Hermes treats legacy entries.
func (l Lane) resumeExpired(window time.Duration, now time.Time) bool {
	if window <= 0 || l.LastResumeMarkedAt.IsZero() {
		return false
	}
	return now.Sub(l.LastResumeMarkedAt) > window
}

// ResumeFresh reports whether a resume-pending mark is within the freshness
// window at now, i.e. the lane may be auto-continued.
func (l Lane) ResumeFresh(window time.Duration, now time.Time) bool {
	return l.ResumePending && !l.resumeExpired(window, now)
}

// Expired reports whether the background expiry watcher should finalize the
// lane's session: its policy says reset, judged on the entry alone (suspended
// and resume-pending flags are not considered), never with live processes.
func (l Lane) Expired(r LaneRules, now time.Time) bool {
	if !l.Exists() || l.ActiveProcesses > 0 {
		return false
	}
	return r.Policy.ResetReason(l.UpdatedAt, now, r.Location) != ""
}

// Resolution is what get_or_create_session reports besides the entry.
type Resolution struct {
	// Created: the lane got a new session (new lane, force_new, auto-reset).
	Created bool
	// ResetReason is the auto-reset reason, "" when there was none.
	ResetReason string
}

// ResolutionOf reads the outcome of [Lane.Resolve] from its events.
func ResolutionOf(decided []events.Event) Resolution {
	var r Resolution
	for _, e := range decided {
		switch e := e.(type) {
		case events.SessionCreated:
			r.Created = true
		case events.SessionAutoReset:
			r.Created = true
			r.ResetReason = e.Reason
		}
	}
	return r
}
