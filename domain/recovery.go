package domain

import (
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
