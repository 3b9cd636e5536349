package domain

import (
	"fmt"
	"time"
)

// resolution is the finest instant the log records (microseconds): a rule
// that holds strictly after a deadline first holds one resolution later.
const resolution = time.Microsecond

// ResetForecast says when and why a lane's session would next be replaced
// by a resolve, given the rules: the same decision [Lane.Resolve] takes, seen
// from the lane's state instead of from a message.
type ResetForecast struct {
	// Reason is the auto-reset reason (idle, daily, suspended,
	// resume_pending_expired), "" when no clock rule will replace the
	// session.
	Reason string
	// At is the first instant (at microsecond resolution) a message would
	// get a new session; zero when Reason is "" or the very next message
	// does (suspended).
	At time.Time
	// Why explains it in a sentence, times in the rules' time zone:
	// "idle: last activity 2030-05-10 11:00, idle_minutes 60, reset at
	// 12:00:00.000001".
	Why string
}

// NextReset forecasts the lane's next automatic reset under r. It follows
// the priority of Resolve: suspended, then resume pending (kept until the
// mark is older than the freshness window), then live background processes
// (never reset), then the policy (the earlier of the idle and daily rules;
// idle when both fall on the same instant, as ResetPolicy.ResetReason
// checks idle first).
func (l Lane) NextReset(r LaneRules) ResetForecast {
	loc := r.Location
	if loc == nil {
		loc = time.UTC
	}
	switch {
	case l.SessionID == "":
		return ResetForecast{Why: "no session yet: the first message creates one"}
	case l.Pruned:
		return ResetForecast{Why: "entry pruned for age: the next message creates a new session"}
	case l.Suspended:
		return ResetForecast{Reason: AutoResetSuspended, Why: l.explain(AutoResetSuspended, r, loc)}
	case l.ResumePending:
		if r.ResumeFreshness <= 0 || l.LastResumeMarkedAt.IsZero() {
			return ResetForecast{Why: fmt.Sprintf("resume pending (%s): the session is kept for the next message", l.ResumeReason)}
		}
		return ResetForecast{
			Reason: AutoResetResumePendingExpired,
			At:     l.LastResumeMarkedAt.Add(r.ResumeFreshness + resolution),
			Why:    l.explain(AutoResetResumePendingExpired, r, loc),
		}
	case l.ActiveProcesses > 0:
		return ResetForecast{Why: fmt.Sprintf("%d background processes running: never reset while they run", l.ActiveProcesses)}
	}
	idleAt, idle := l.idleDue(r.Policy)
	dailyAt, daily := l.dailyDue(r.Policy, loc)
	switch {
	case idle && (!daily || !dailyAt.Before(idleAt)):
		return ResetForecast{Reason: AutoResetIdle, At: idleAt, Why: l.explain(AutoResetIdle, r, loc)}
	case daily:
		return ResetForecast{Reason: AutoResetDaily, At: dailyAt, Why: l.explain(AutoResetDaily, r, loc)}
	}
	return ResetForecast{Why: fmt.Sprintf("reset mode %s: the clock never replaces the session", r.Policy.Mode)}
}

// ExplainReset says why the lane (its state just before the reset) was
// auto-reset for reason by the message at at: the rule, the facts it
// looked at, the instant it became due, and the message that applied it.
func (l Lane) ExplainReset(reason string, at time.Time, r LaneRules) string {
	loc := r.Location
	if loc == nil {
		loc = time.UTC
	}
	why := l.explain(reason, r, loc)
	if reason == AutoResetSuspended {
		return why
	}
	return why + "; applied by the message at " + instantText(at, time.Time{}, loc)
}

// explain words the rule of reason for the lane: the forecast's "reset at"
// is the first instant the rule holds.
func (l Lane) explain(reason string, r LaneRules, loc *time.Location) string {
	last := instantText(l.UpdatedAt, time.Time{}, loc)
	var s string
	switch reason {
	case AutoResetSuspended:
		s = "suspended"
		if l.SuspendReason != "" {
			s += " (" + l.SuspendReason + ")"
		}
		s += ": the next message starts a new session"
	case AutoResetResumePendingExpired:
		due := l.LastResumeMarkedAt.Add(r.ResumeFreshness + resolution)
		s = fmt.Sprintf("resume_pending_expired: resume marked at %s (%s), freshness %s, reset at %s",
			instantText(l.LastResumeMarkedAt, time.Time{}, loc), l.ResumeReason, r.ResumeFreshness, instantText(due, l.LastResumeMarkedAt, loc))
	case AutoResetIdle:
		due, _ := l.idleDue(ResetPolicy{Mode: ResetIdle, IdleMinutes: r.Policy.IdleMinutes})
		s = fmt.Sprintf("idle: last activity %s, idle_minutes %d, reset at %s", last, r.Policy.IdleMinutes, instantText(due, l.UpdatedAt, loc))
	case AutoResetDaily:
		due, _ := l.dailyDue(ResetPolicy{Mode: ResetDaily, AtHour: r.Policy.AtHour}, loc)
		s = fmt.Sprintf("daily: last activity %s, at_hour %d, reset at %s", last, r.Policy.AtHour, instantText(due, l.UpdatedAt, loc))
	default:
		s = reason
	}
	if loc.String() != "UTC" {
		s += " (times in " + loc.String() + ")"
	}
	return s
}

// idleDue is the first instant the idle rule holds: strictly after
// UpdatedAt + idle_minutes.
func (l Lane) idleDue(p ResetPolicy) (time.Time, bool) {
	if p.Mode != ResetIdle && p.Mode != ResetBoth {
		return time.Time{}, false
	}
	return l.UpdatedAt.Add(time.Duration(p.IdleMinutes)*time.Minute + resolution), true
}

// dailyDue is the first daily boundary strictly after UpdatedAt (a session
// updated exactly at a boundary survives it).
func (l Lane) dailyDue(p ResetPolicy, loc *time.Location) (time.Time, bool) {
	if p.Mode != ResetDaily && p.Mode != ResetBoth {
		return time.Time{}, false
	}
	b := p.DailyBoundary(l.UpdatedAt, loc)
	return time.Date(b.Year(), b.Month(), b.Day()+1, p.AtHour, 0, 0, 0, loc), true
}

// instantText renders t in loc as "2006-01-02 15:04", with seconds and
// microseconds only when they are not zero; the date is left out when t
// falls on the same day as ref.
func instantText(t, ref time.Time, loc *time.Location) string {
	t = t.In(loc)
	layout := "15:04"
	switch {
	case t.Nanosecond() != 0:
		layout = "15:04:05.000000"
	case t.Second() != 0:
		layout = "15:04:05"
	}
	if ref.IsZero() {
		return t.Format("2006-01-02 " + layout)
	}
	ref = ref.In(loc)
	if y, m, d := t.Date(); ref.Year() != y || ref.Month() != m || ref.Day() != d {
		return t.Format("2006-01-02 " + layout)
	}
	return t.Format(layout)
}
