package domain

import (
	"errors"
	"fmt"
	"time"

	"hermes/events"
)

// Refusals of the changes a gateway makes to an entry in place (Hermes'
// gateway edits a SessionEntry and saves the store; the client turns each
// change into one of these decisions).
var (
	// ErrSessionMoved: the change was decided on a session the lane is no
	// longer on (another process changed the lane meanwhile).
	ErrSessionMoved = errors.New("the lane is on another session")
	// ErrNotContinuation: the target of a compression split does not
	// descend from the lane's session.
	ErrNotContinuation = errors.New("not a compression continuation of the lane's session")
	// ErrNotStuck: a stuck-loop suspension the stuck-loop count does not
	// support.
	ErrNotStuck = errors.New("the lane is not in a stuck loop")
	// ErrNotExpired: an expiry finalization of a session that has not
	// expired under the lane's reset policy.
	ErrNotExpired = errors.New("the lane's session has not expired")
)

// Compress decides a compression split: the lane moves from previous (the
// session the gateway saw) to the continuation sessionID, keeping the rest
// of its entry. continuation says whether sessionID descends from previous
// through the transcripts' parent links (the caller reads them). Already on
// sessionID: nothing to do.
func (l Lane) Compress(sessionID, previous string, continuation bool, now time.Time) ([]events.Event, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return nil, err
	}
	if err := ValidateSessionID(previous); err != nil {
		return nil, fmt.Errorf("previous_session_id: %w", err)
	}
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	if l.SessionID == sessionID {
		return nil, nil
	}
	if l.SessionID != previous {
		return nil, fmt.Errorf("%w: it is on %s, not %s", ErrSessionMoved, l.SessionID, previous)
	}
	if !continuation {
		return nil, fmt.Errorf("%w: %s does not descend from %s", ErrNotContinuation, sessionID, previous)
	}
	return []events.Event{events.SessionCompressed{SessionID: sessionID, PreviousSessionID: previous, At: now}}, nil
}

// ConsumeFreshReset consumes the is_fresh_reset flag of the lane's session
// (cause: events.FreshResetConsumedExplicitly or ...ByTurn). sessionID, when
// not empty, is the session whose flag was consumed: a lane on another
// session keeps its flag. A lane without the flag changes nothing.
func (l Lane) ConsumeFreshReset(sessionID, cause string, now time.Time) ([]events.Event, error) {
	if sessionID != "" {
		if err := ValidateSessionID(sessionID); err != nil {
			return nil, err
		}
	}
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	if !l.IsFreshReset || sessionID != "" && sessionID != l.SessionID {
		return nil, nil
	}
	return []events.Event{events.FreshResetConsumed{SessionID: l.SessionID, Cause: cause, At: now}}, nil
}

// SuspendStuckLoop decides the stuck-loop escalation asked from outside
// (Hermes' gateway suspends the lanes its .restart_failure_counts names at
// start): it is carried out only when hermes' own count of consecutive
// interrupted restarts reached threshold, so the gateway's decision never
// doubles or contradicts hermes'. A suspended lane changes nothing.
func (l Lane) SuspendStuckLoop(count, threshold int, now time.Time) ([]events.Event, error) {
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	if l.Suspended {
		return nil, nil
	}
	if threshold <= 0 || count < threshold {
		return nil, fmt.Errorf("%w: %d consecutive interrupted restarts, the threshold is %d", ErrNotStuck, count, threshold)
	}
	return []events.Event{events.Suspended{Reason: events.SuspendStuckLoop, At: now}}, nil
}

// FinalizeExpiryOf records the gateway's finalization of sessionID, the
// expired session it saw (its expiry watcher ran the finalize hooks). A
// lane already finalized, or on another session, changes nothing; a
// session that has not expired under rules is refused.
func (l Lane) FinalizeExpiryOf(sessionID string, rules LaneRules, forced bool, now time.Time) ([]events.Event, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return nil, err
	}
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	if l.ExpiryFinalized || l.SessionID != sessionID {
		return nil, nil
	}
	if !l.Expired(rules, now) {
		return nil, ErrNotExpired
	}
	return []events.Event{events.ExpiryFinalized{SessionID: sessionID, Forced: forced, At: now}}, nil
}

// ExpiryReason is Hermes' _should_reset judged on the entry alone (its
// _is_session_expired when not ""): "idle" or "daily" when the reset policy
// says the session expired at now, "" otherwise and always for a lane with
// live processes. Suspended and resume-pending flags are not considered.
func (l Lane) ExpiryReason(r LaneRules, now time.Time) string {
	if !l.Exists() || l.ActiveProcesses > 0 {
		return ""
	}
	return r.Policy.ResetReason(l.UpdatedAt, now, r.Location)
}
