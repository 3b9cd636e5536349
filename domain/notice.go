package domain

import (
	"fmt"
	"time"

	"hermes/events"
)

// Exact texts of the auto-reset notices (Hermes' gateway message handler).
const (
	// resetNoticeFormat is the user notice: the reason text goes in the
	// parentheses.
	resetNoticeFormat = "◐ Session automatically reset (%s). Conversation history cleared.\n" +
		"Use /resume to browse and restore a previous session.\n" +
		"Adjust reset timing in config.yaml under session_reset."

	noteSuspended = "[System note: The user's previous session was stopped and suspended. This is a fresh conversation with no prior context.]"
	noteDaily     = "[System note: The user's session was automatically reset by the daily schedule. This is a fresh conversation with no prior context.]"
	noteIdle      = "[System note: The user's previous session expired due to inactivity. This is a fresh conversation with no prior context.]"
	// noteResumeExpired is the later Hermes wording for
	// resume_pending_expired; Era B fell through to the inactivity note,
	// which Hermes #58933 reports as misleading.
	noteResumeExpired = "[System note: The previous gateway session could not be recovered after a restart (API recovery timed out). This is a fresh conversation — use /resume to restore history if needed.]"
)

// ResetReasonText is the parenthesised reason of the user notice:
// "previous session was stopped or interrupted" (suspended), "gateway
// restart recovery timed out" (resume_pending_expired), "daily schedule at
// 4:00" (daily: the policy's hour, not zero-padded) and otherwise "inactive
// for <IdleDuration>" (idle).
func ResetReasonText(reason string, p ResetPolicy) string {
	switch reason {
	case AutoResetSuspended:
		return "previous session was stopped or interrupted"
	case AutoResetResumePendingExpired:
		return "gateway restart recovery timed out"
	case AutoResetDaily:
		return fmt.Sprintf("daily schedule at %d:00", p.AtHour)
	default:
		return "inactive for " + IdleDuration(p.IdleMinutes)
	}
}

// IdleDuration formats idle minutes as the notice does: 1440 → "24h", 90 →
// "1h 30m", 45 → "45m", 0 → "0h".
func IdleDuration(minutes int) string {
	h, m := floorDiv(minutes, 60), floorMod(minutes, 60)
	switch {
	case m == 0:
		return fmt.Sprintf("%dh", h)
	case h != 0:
		return fmt.Sprintf("%dh %dm", h, m)
	default:
		return fmt.Sprintf("%dm", m)
	}
}

// floorDiv and floorMod are Python's // and % (idle_minutes is never
// negative once validated, but the formula stays Hermes').
func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int) int { return a - floorDiv(a, b)*b }

// ResetNoticeText is the three-line user notice of an auto-reset, e.g.
//
//	◐ Session automatically reset (inactive for 24h). Conversation history cleared.
//	Use /resume to browse and restore a previous session.
//	Adjust reset timing in config.yaml under session_reset.
func ResetNoticeText(reason string, p ResetPolicy) string {
	return fmt.Sprintf(resetNoticeFormat, ResetReasonText(reason, p))
}

// ResetContextNote is the system note that tells the agent its session was
// auto-reset, by reason (an empty reason reads as idle, as in Hermes).
func ResetContextNote(reason string) string {
	switch reason {
	case AutoResetSuspended:
		return noteSuspended
	case AutoResetDaily:
		return noteDaily
	case AutoResetResumePendingExpired:
		return noteResumeExpired
	default:
		return noteIdle
	}
}

// ResetNotifies reports whether an auto-reset for reason on platform sends
// the user a notice: always for a suspension and for a resume mark that
// expired (the user had a live session that was replaced and may want to
// /resume it; Hermes #8381, #58933), otherwise when the policy notifies,
// the replaced session had real activity and the platform is not excluded
// (notify_exclude_platforms, by default api_server and webhook).
func ResetNotifies(reason, platform string, hadActivity bool, p ResetPolicy) bool {
	if reason == AutoResetResumePendingExpired {
		return true
	}
	return p.NotifiesOn(reason, platform, hadActivity)
}

// ResetNotice is what an auto-reset left to deliver with the lane's next
// message.
type ResetNotice struct {
	// SessionID is the new session the notice belongs to.
	SessionID string
	// Reason is the auto-reset reason (idle, daily, suspended,
	// resume_pending_expired).
	Reason string
	// Notice is the user notice ([ResetNoticeText]), or "" when none is due
	// ([ResetNotifies]).
	Notice string
	// Note is the agent's context note ([ResetContextNote]); Hermes (Era B)
	// puts it before the context prompt: Note + "\n\n" + prompt.
	Note string
}

// PendingResetNotice returns the notice an automatic reset left on the lane
// and not yet delivered, judged with the policy of the lane's platform and
// chat type. An explicit /new (is_fresh_reset) never leaves one. ok is
// false when nothing is pending.
func (l Lane) PendingResetNotice(p ResetPolicy) (n ResetNotice, ok bool) {
	if !l.Exists() || !l.WasAutoReset {
		return ResetNotice{}, false
	}
	reason := firstNonEmpty(l.AutoResetReason, AutoResetIdle)
	n = ResetNotice{SessionID: l.SessionID, Reason: reason, Note: ResetContextNote(reason)}
	if ResetNotifies(reason, l.Platform, l.ResetHadActivity, p) {
		n.Notice = ResetNoticeText(reason, p)
	}
	return n, true
}

// AcknowledgeNotice records that the pending auto-reset notice (and its
// context note) was delivered, so it is never delivered again. sessionID,
// when not empty, must be the session the notice was read for: an
// acknowledgement that arrives after a newer reset leaves the newer notice
// pending. Nothing pending (or another session) changes nothing; a missing
// lane is refused with ErrLaneNotFound.
func (l Lane) AcknowledgeNotice(sessionID string, now time.Time) ([]events.Event, error) {
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	if !l.WasAutoReset || (sessionID != "" && sessionID != l.SessionID) {
		return nil, nil
	}
	return []events.Event{events.NoticeDelivered{
		SessionID: l.SessionID,
		Reason:    firstNonEmpty(l.AutoResetReason, AutoResetIdle),
		At:        now,
	}}, nil
}
