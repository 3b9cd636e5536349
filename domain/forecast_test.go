package domain_test

import (
	"fmt"
	"testing"
	"time"

	"hermes/domain"
	"hermes/events"
)

// TestNextReset_IssueExample is the sentence the web UI shows under its
// time-travel slider.
func TestNextReset_IssueExample(t *testing.T) {
	l := domain.Lane{SessionKey: "k", SessionID: "s", UpdatedAt: time.Date(2030, 5, 10, 11, 0, 0, 0, time.UTC)}
	got := l.NextReset(domain.LaneRules{Policy: domain.ResetPolicy{Mode: domain.ResetIdle, IdleMinutes: 60}, Location: time.UTC})
	want := domain.ResetForecast{
		Reason: domain.AutoResetIdle,
		At:     time.Date(2030, 5, 10, 12, 0, 0, 1000, time.UTC),
		Why:    "idle: last activity 2030-05-10 11:00, idle_minutes 60, reset at 12:00:00.000001",
	}
	if got != want {
		t.Errorf("NextReset() = %+v, want %+v", got, want)
	}
}

// TestNextReset_AgreesWithResolve: wherever the forecast names an instant,
// a resolve one microsecond earlier keeps the session and a resolve at it
// resets it for the forecast reason; where it names none, a resolve far in
// the future keeps the session (or, suspended, any resolve resets it).
func TestNextReset_AgreesWithResolve(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	updated := []time.Time{
		time.Date(2030, 5, 10, 11, 0, 0, 0, time.UTC),
		time.Date(2030, 5, 10, 3, 59, 59, 999999000, time.UTC),
		time.Date(2030, 5, 10, 4, 0, 0, 0, time.UTC),
		time.Date(2030, 5, 10, 2, 0, 0, 0, time.UTC), // 03:00 in CET: before a 04:00 boundary there
		time.Date(2030, 5, 10, 23, 30, 0, 123000, time.UTC),
	}
	policies := []domain.ResetPolicy{
		{Mode: domain.ResetIdle, IdleMinutes: 60},
		{Mode: domain.ResetDaily, AtHour: 4},
		{Mode: domain.ResetBoth, AtHour: 4, IdleMinutes: 60},
		{Mode: domain.ResetBoth, AtHour: 4, IdleMinutes: 1440},
		{Mode: domain.ResetBoth, AtHour: 12, IdleMinutes: 60}, // the 12:00 boundary comes 1 µs before idle
		{Mode: domain.ResetNone},
	}
	lanes := map[string]func(domain.Lane) domain.Lane{
		"plain":     func(l domain.Lane) domain.Lane { return l },
		"suspended": func(l domain.Lane) domain.Lane { l.Suspended, l.SuspendReason = true, "stop_command"; return l },
		"resume pending": func(l domain.Lane) domain.Lane {
			l.ResumePending, l.ResumeReason, l.LastResumeMarkedAt = true, "restart_timeout", l.UpdatedAt.Add(time.Minute)
			return l
		},
		"processes": func(l domain.Lane) domain.Lane { l.ActiveProcesses = 2; return l },
	}
	src := domain.SessionSource{Platform: "telegram", ChatType: "dm", ChatID: "1"}
	for _, loc := range []*time.Location{time.UTC, paris} {
		for _, u := range updated {
			for _, p := range policies {
				for name, shape := range lanes {
					l := shape(domain.Lane{SessionKey: "k", SessionID: "s", UpdatedAt: u, Platform: "telegram", ChatType: "dm"})
					r := domain.LaneRules{Policy: p, Location: loc, ResumeFreshness: time.Hour}
					t.Run(fmt.Sprintf("%s/%s/%+v/%s", loc, u.Format(time.RFC3339Nano), p, name), func(t *testing.T) {
						f := l.NextReset(r)
						if f.Why == "" {
							t.Errorf("NextReset() has no Why: %+v", f)
						}
						reason := func(now time.Time) string {
							t.Helper()
							decided, err := l.Resolve(domain.ResolveRequest{Source: src, SessionKey: "k", Rules: r, Entropy: "aaaaaaaa"}, now)
							if err != nil {
								t.Fatalf("Resolve(%s) = %v", now, err)
							}
							return domain.ResolutionOf(decided).ResetReason
						}
						switch {
						case f.Reason == domain.AutoResetSuspended:
							if got := reason(u); got != f.Reason {
								t.Errorf("resolve at %s: reason %q, want %q (%s)", u, got, f.Reason, f.Why)
							}
						case f.Reason == "":
							if got := reason(u.Add(400 * 24 * time.Hour)); got != "" {
								t.Errorf("forecast says no reset (%s), but a resolve a year later resets for %q", f.Why, got)
							}
						default:
							if got := reason(f.At); got != f.Reason {
								t.Errorf("resolve at the forecast %s: reason %q, want %q (%s)", f.At, got, f.Reason, f.Why)
							}
							if before := f.At.Add(-time.Microsecond); !before.Before(u) {
								if got := reason(before); got != "" {
									t.Errorf("resolve 1µs before the forecast %s: reason %q, want none (%s)", f.At, got, f.Why)
								}
							}
						}
					})
				}
			}
		}
	}
}

// TestExplainReset says why a past reset happened, from the state just
// before it.
func TestExplainReset(t *testing.T) {
	before := domain.Lane{SessionKey: "k", SessionID: "s", UpdatedAt: time.Date(2030, 5, 10, 11, 0, 0, 0, time.UTC), SuspendReason: "stop_command"}
	r := domain.LaneRules{Policy: domain.ResetPolicy{Mode: domain.ResetBoth, AtHour: 4, IdleMinutes: 60}, Location: time.UTC}
	at := time.Date(2030, 5, 10, 12, 30, 0, 0, time.UTC)
	for reason, want := range map[string]string{
		events.AutoResetIdle:      "idle: last activity 2030-05-10 11:00, idle_minutes 60, reset at 12:00:00.000001; applied by the message at 2030-05-10 12:30",
		events.AutoResetDaily:     "daily: last activity 2030-05-10 11:00, at_hour 4, reset at 2030-05-11 04:00; applied by the message at 2030-05-10 12:30",
		events.AutoResetSuspended: "suspended (stop_command): the next message starts a new session",
	} {
		if got := before.ExplainReset(reason, at, r); got != want {
			t.Errorf("ExplainReset(%s) = %q, want %q", reason, got, want)
		}
	}
}
