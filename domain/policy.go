package domain

import (
	"fmt"
	"slices"
	"time"
)

// ResetMode says which clock rules may replace a lane's session.
type ResetMode string

// Reset modes.
const (
	ResetNone  ResetMode = "none"
	ResetIdle  ResetMode = "idle"
	ResetDaily ResetMode = "daily"
	ResetBoth  ResetMode = "both"
)

// ResetPolicy is Hermes' SessionResetPolicy.
type ResetPolicy struct {
	Mode ResetMode
	// AtHour is the hour (0–23, in the configured time zone) of the daily
	// boundary.
	AtHour int
	// IdleMinutes is the inactivity after which the session is replaced.
	IdleMinutes int
	// Notify enables the user notice after an auto-reset.
	Notify bool
	// NotifyExcludePlatforms never get the notice (except for suspensions).
	NotifyExcludePlatforms []string
}

// DefaultResetPolicy is Hermes' default: both rules, 04:00, 24 h idle, notify
// everywhere but api_server and webhook.
func DefaultResetPolicy() ResetPolicy {
	return ResetPolicy{
		Mode:                   ResetBoth,
		AtHour:                 4,
		IdleMinutes:            1440,
		Notify:                 true,
		NotifyExcludePlatforms: []string{"api_server", "webhook"},
	}
}

// Validate reports a policy the rules cannot evaluate.
func (p ResetPolicy) Validate() error {
	switch p.Mode {
	case ResetNone, ResetIdle, ResetDaily, ResetBoth:
	default:
		return fmt.Errorf("%w: mode %q is not one of none, idle, daily, both", ErrInvalidPolicy, p.Mode)
	}
	if p.AtHour < 0 || p.AtHour > 23 {
		return fmt.Errorf("%w: at_hour %d is not between 0 and 23", ErrInvalidPolicy, p.AtHour)
	}
	if p.IdleMinutes < 0 {
		return fmt.Errorf("%w: idle_minutes %d is negative", ErrInvalidPolicy, p.IdleMinutes)
	}
	return nil
}

// ResetReason returns why a session last active at updatedAt must be replaced
// at now ("idle" or "daily"), or "" when it may continue. Idle is checked
// first, so mode both reports idle when both rules hold. Idle is strictly
// after the deadline; the daily boundary is at AtHour:00 in loc, and a
// session updated exactly at the boundary survives it.
func (p ResetPolicy) ResetReason(updatedAt, now time.Time, loc *time.Location) string {
	if p.Mode == ResetIdle || p.Mode == ResetBoth {
		deadline := updatedAt.Add(time.Duration(p.IdleMinutes) * time.Minute)
		if now.After(deadline) {
			return AutoResetIdle
		}
	}
	if p.Mode == ResetDaily || p.Mode == ResetBoth {
		if updatedAt.Before(p.DailyBoundary(now, loc)) {
			return AutoResetDaily
		}
	}
	return ""
}

// DailyBoundary is the most recent daily reset instant at or before now:
// today at AtHour:00 in loc, or yesterday's when now is before that hour.
func (p ResetPolicy) DailyBoundary(now time.Time, loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	local := now.In(loc)
	b := time.Date(local.Year(), local.Month(), local.Day(), p.AtHour, 0, 0, 0, loc)
	if local.Hour() < p.AtHour {
		b = time.Date(local.Year(), local.Month(), local.Day()-1, p.AtHour, 0, 0, 0, loc)
	}
	return b
}

// NotifiesOn reports whether an auto-reset for reason on platform, of a
// session that had activity, sends the user a notice. Suspensions always do.
func (p ResetPolicy) NotifiesOn(reason, platform string, hadActivity bool) bool {
	if reason == AutoResetSuspended {
		return true
	}
	return p.Notify && hadActivity && !slices.Contains(p.NotifyExcludePlatforms, platform)
}

// ResetPolicies resolves the policy of a lane: per platform, else per chat
// type, else the default.
type ResetPolicies struct {
	Default    ResetPolicy
	ByPlatform map[string]ResetPolicy
	ByType     map[string]ResetPolicy
}

// For returns the policy of a platform and chat type.
func (ps ResetPolicies) For(platform, chatType string) ResetPolicy {
	if p, ok := ps.ByPlatform[platform]; ok {
		return p
	}
	if p, ok := ps.ByType[chatType]; ok {
		return p
	}
	return ps.Default
}
