package domain

import (
	"fmt"
	"time"

	"hermes/events"
)

// MarkInterruptedIfRecent is suspend_recently_active for one lane, after an
// unclean stop: a lane updated within maxAge of now (inclusive) is marked
// resume-pending with restart_interrupted. Lanes already pending, suspended
// or missing are left alone, so a lane is never marked twice.
func (l Lane) MarkInterruptedIfRecent(maxAge time.Duration, now time.Time) []events.Event {
	if !l.Exists() || l.ResumePending || l.Suspended {
		return nil
	}
	if l.UpdatedAt.Before(now.Add(-maxAge)) {
		return nil
	}
	return []events.Event{events.ResumeMarked{Reason: events.ResumeRestartInterrupted, At: now}}
}

// InterruptTurn closes the lane's open turn, which will never complete
// because the run under it ended (reason restart_interrupted after a crash,
// shutdown_timeout or restart_timeout after a drain that timed out), and
// marks the lane resume-pending with that reason so the conversation
// continues on the same session — unless it is suspended or already
// pending. A lane with no open turn changes nothing.
func (l Lane) InterruptTurn(reason string, now time.Time) ([]events.Event, error) {
	if !AutoResumeReason(reason) {
		return nil, fmt.Errorf("%w: interrupt reason %q", ErrInvalidArgument, reason)
	}
	if !l.Exists() || !l.TurnOpen() {
		return nil, nil
	}
	out := []events.Event{events.TurnInterrupted{TurnID: l.OpenTurnID, Reason: reason, At: now}}
	if !l.Suspended && !l.ResumePending {
		out = append(out, events.ResumeMarked{Reason: reason, At: now})
	}
	return out, nil
}

// DiscardTurn closes the lane's open turn turnID without continuing it
// (reason discarded: no resume mark). Another turn, or none, changes
// nothing.
func (l Lane) DiscardTurn(turnID string, now time.Time) []events.Event {
	if !l.Exists() || !l.TurnOpen() || l.OpenTurnID != turnID {
		return nil
	}
	return []events.Event{events.TurnInterrupted{TurnID: turnID, Reason: events.TurnDiscarded, At: now}}
}

// FinalizeExpiry records that the expiry watcher finalized the lane's expired
// session (forced: after repeated hook failures). A lane that is not expired,
// already finalized or missing changes nothing.
func (l Lane) FinalizeExpiry(rules LaneRules, forced bool, now time.Time) []events.Event {
	if l.ExpiryFinalized || !l.Expired(rules, now) {
		return nil
	}
	return []events.Event{events.ExpiryFinalized{SessionID: l.SessionID, Forced: forced, At: now}}
}

// PruneEligible reports whether the lane's entry is older than maxAge (by
// updated_at, strictly) and may be dropped: never a suspended lane, never one
// with live processes; maxAge <= 0 disables pruning.
func (l Lane) PruneEligible(maxAge time.Duration, now time.Time) bool {
	if maxAge <= 0 || !l.Exists() || l.Suspended || l.ActiveProcesses > 0 {
		return false
	}
	return l.UpdatedAt.Before(now.Add(-maxAge))
}

// Prune drops the lane's entry when [Lane.PruneEligible].
func (l Lane) Prune(maxAge time.Duration, now time.Time) []events.Event {
	if !l.PruneEligible(maxAge, now) {
		return nil
	}
	return []events.Event{events.EntryPruned{SessionID: l.SessionID, At: now}}
}
