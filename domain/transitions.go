package domain

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"hermes/events"
)

// Reset decides an explicit /new or /reset: a fresh session on the lane,
// flagged is_fresh_reset (never the "expired" notice). displayName, when not
// empty, replaces the lane's display name. A missing lane is refused with
// ErrLaneNotFound (the caller then resolves with force_new, as Hermes does).
func (l Lane) Reset(displayName string, rules LaneRules, entropy string, now time.Time) ([]events.Event, error) {
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	id, err := NewSessionID(now, rules.Location, entropy)
	if err != nil {
		return nil, err
	}
	return []events.Event{events.SessionReset{
		SessionID:         id,
		PreviousSessionID: l.SessionID,
		DisplayName:       displayName,
		At:                now,
	}}, nil
}

// Switch decides /resume: the lane points at an existing session id, with
// flags at their defaults (this clears suspended and resume-pending).
// Switching to the current session changes nothing.
func (l Lane) Switch(target string, now time.Time) ([]events.Event, error) {
	if err := ValidateSessionID(target); err != nil {
		return nil, err
	}
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	if target == l.SessionID {
		return nil, nil
	}
	return []events.Event{events.SessionSwitched{SessionID: target, PreviousSessionID: l.SessionID, At: now}}, nil
}

// Suspend decides /stop (reason stop_command) or the stuck-loop escalation
// (stuck_loop): the next get-or-create replaces the session whatever else is
// pending. Suspending a suspended lane changes nothing.
func (l Lane) Suspend(reason string, now time.Time) ([]events.Event, error) {
	if reason != events.SuspendStopCommand && reason != events.SuspendStuckLoop {
		return nil, fmt.Errorf("%w: suspend reason %q", ErrInvalidArgument, reason)
	}
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	if l.Suspended {
		return nil, nil
	}
	return []events.Event{events.Suspended{Reason: reason, At: now}}, nil
}

// MaxResumeReasonBytes bounds a stored resume reason.
const MaxResumeReasonBytes = 200

// AutoResumeReason reports whether reason is one of the three reasons a
// restart marks (restart_timeout, shutdown_timeout, restart_interrupted):
// only lanes marked for those are continued automatically after a start.
func AutoResumeReason(reason string) bool {
	switch reason {
	case events.ResumeRestartTimeout, events.ResumeShutdownTimeout, events.ResumeRestartInterrupted:
		return true
	}
	return false
}

// CheckResumeReason accepts any reason Hermes would store: non-empty valid
// UTF-8 of at most MaxResumeReasonBytes, without NUL.
func CheckResumeReason(reason string) error {
	switch {
	case reason == "":
		return fmt.Errorf("%w: resume reason is empty", ErrInvalidArgument)
	case len(reason) > MaxResumeReasonBytes:
		return fmt.Errorf("%w: resume reason is longer than %d bytes", ErrInvalidArgument, MaxResumeReasonBytes)
	case !utf8.ValidString(reason):
		return fmt.Errorf("%w: resume reason is not valid UTF-8", ErrInvalidArgument)
	case strings.ContainsRune(reason, 0):
		return fmt.Errorf("%w: resume reason has a NUL byte", ErrInvalidArgument)
	}
	return nil
}

// MarkResumePending decides that the lane's session must be preserved on the
// next access. Any reason [CheckResumeReason] accepts is stored; only the
// three restart reasons are auto-resumed ([AutoResumeReason]). A suspended
// lane is refused with ErrSuspended: a hard wipe stays a hard wipe. Marking
// a pending lane again renews the mark.
func (l Lane) MarkResumePending(reason string, now time.Time) ([]events.Event, error) {
	if err := CheckResumeReason(reason); err != nil {
		return nil, err
	}
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	if l.Suspended {
		return nil, ErrSuspended
	}
	return []events.Event{events.ResumeMarked{Reason: reason, At: now}}, nil
}

// ClearResumePending removes a resume-pending mark; a lane with none changes
// nothing.
func (l Lane) ClearResumePending(now time.Time) ([]events.Event, error) {
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	if !l.ResumePending {
		return nil, nil
	}
	return []events.Event{events.ResumeCleared{Cause: events.ResumeClearedExplicitly, At: now}}, nil
}

// Touch decides update_session: activity that pushes back the idle deadline,
// optionally recording the last prompt size (0 is allowed and resets it).
func (l Lane) Touch(lastPromptTokens *int64, now time.Time) ([]events.Event, error) {
	if lastPromptTokens != nil {
		if err := CheckTokens("last_prompt_tokens", 0, *lastPromptTokens); err != nil {
			return nil, err
		}
	}
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	return []events.Event{events.Touched{LastPromptTokens: lastPromptTokens, At: now}}, nil
}

// StartTurn records that the agent began turn turnID. Starting the turn that
// is already open changes nothing. Starting another one while a turn is
// open is refused with ErrTurnBusy: one turn runs on a lane at a time, and
// a second starter (another node, or a paused one that woke up) must not
// cut the turn of the first. The first turn of a session made by /new or
// /reset consumes its is_fresh_reset flag: the first message of the new
// session was handled.
func (l Lane) StartTurn(turnID string, now time.Time) ([]events.Event, error) {
	if turnID == "" {
		return nil, fmt.Errorf("%w: turn id is required", ErrInvalidArgument)
	}
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	if l.OpenTurnID == turnID {
		return nil, nil
	}
	if l.TurnOpen() {
		return nil, fmt.Errorf("%w: turn %s is open (started %s)", ErrTurnBusy, l.OpenTurnID, l.TurnStartedAt.UTC().Format(time.RFC3339))
	}
	out := []events.Event{events.TurnStarted{TurnID: turnID, SessionID: l.SessionID, At: now}}
	if l.IsFreshReset {
		out = append(out, events.FreshResetConsumed{SessionID: l.SessionID, Cause: events.FreshResetConsumedByTurn, At: now})
	}
	return out, nil
}

// CheckTurnOpen is the fence of a write that names its turn: turnID must
// be the lane's open turn (ErrTurnNotOpen otherwise). An empty turn id is
// an unfenced write and always passes.
func (l Lane) CheckTurnOpen(turnID string) error {
	if turnID == "" || (l.Exists() && l.OpenTurnID == turnID) {
		return nil
	}
	if l.OpenTurnID == "" {
		return fmt.Errorf("%w: turn %s ended; no turn is open", ErrTurnNotOpen, turnID)
	}
	return fmt.Errorf("%w: turn %s ended; the open turn is %s", ErrTurnNotOpen, turnID, l.OpenTurnID)
}

// TurnOutcome is what the agent reports when a turn ends.
type TurnOutcome struct {
	// TurnID is the turn that ended; empty means the open turn (or none:
	// an unfenced completion). A turn id that is not the lane's open turn
	// is refused (ErrTurnNotOpen).
	TurnID           string
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	EstimatedCostUSD float64
	CostStatus       string
	LastPromptTokens *int64
	// Failed turns count their tokens but do not clear a resume mark.
	Failed bool
}

// CompleteTurn records the end of a turn with its token and cost deltas. A
// successful turn also clears a resume-pending mark (the resumed
// conversation went through).
func (l Lane) CompleteTurn(o TurnOutcome, now time.Time) ([]events.Event, error) {
	// Each delta is checked against the total it adds to: no sum of the
	// lane can pass MaxTokens or MaxCostUSD (see CheckTokens).
	counts := []struct {
		name         string
		total, value int64
	}{
		{"input_tokens", l.InputTokens, o.InputTokens}, {"output_tokens", l.OutputTokens, o.OutputTokens},
		{"cache_read_tokens", l.CacheReadTokens, o.CacheReadTokens}, {"cache_write_tokens", l.CacheWriteTokens, o.CacheWriteTokens},
	}
	for _, c := range counts {
		if err := CheckTokens(c.name, c.total, c.value); err != nil {
			return nil, err
		}
	}
	// Both are at most MaxTokens here, so their sum cannot overflow.
	if err := CheckTokens("input_tokens + output_tokens", l.TotalTokens, o.InputTokens+o.OutputTokens); err != nil {
		return nil, err
	}
	if err := CheckCost("estimated_cost_usd", l.EstimatedCostUSD, o.EstimatedCostUSD); err != nil {
		return nil, err
	}
	if o.LastPromptTokens != nil {
		if err := CheckTokens("last_prompt_tokens", 0, *o.LastPromptTokens); err != nil {
			return nil, err
		}
	}
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	if err := l.CheckTurnOpen(o.TurnID); err != nil {
		return nil, err
	}
	turnID := o.TurnID
	if turnID == "" {
		turnID = l.OpenTurnID
	}
	out := []events.Event{events.TurnCompleted{
		TurnID:           turnID,
		SessionID:        l.SessionID,
		InputTokens:      o.InputTokens,
		OutputTokens:     o.OutputTokens,
		CacheReadTokens:  o.CacheReadTokens,
		CacheWriteTokens: o.CacheWriteTokens,
		EstimatedCostUSD: o.EstimatedCostUSD,
		CostStatus:       o.CostStatus,
		LastPromptTokens: o.LastPromptTokens,
		Failed:           o.Failed,
		At:               now,
	}}
	if l.ResumePending && !o.Failed {
		out = append(out, events.ResumeCleared{Cause: events.ResumeClearedByTurn, At: now})
	}
	return out, nil
}

// SetActiveProcesses records the number of live background processes.
func (l Lane) SetActiveProcesses(count int, now time.Time) ([]events.Event, error) {
	if count < 0 {
		return nil, fmt.Errorf("%w: active process count %d is negative", ErrInvalidArgument, count)
	}
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	if count == l.ActiveProcesses {
		return nil, nil
	}
	return []events.Event{events.ActiveProcessesChanged{Count: count, At: now}}, nil
}

// RecordActivity notes that a message was appended to sessionID's
// transcript. Only the first activity of the lane's current session is
// recorded; messages of other sessions change nothing.
func (l Lane) RecordActivity(sessionID string, now time.Time) ([]events.Event, error) {
	if !l.Exists() || l.SessionID != sessionID || l.HadActivity {
		return nil, nil
	}
	return []events.Event{events.ActivityRecorded{SessionID: sessionID, At: now}}, nil
}
