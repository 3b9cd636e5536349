package domain_test

import (
	"errors"
	"testing"
	"time"

	"hermes/domain"
	"hermes/testfixtures"
)

func TestResetPolicy_ResetReason(t *testing.T) {
	idle := domain.ResetPolicy{Mode: domain.ResetIdle, AtHour: 4, IdleMinutes: 1440}
	daily := domain.ResetPolicy{Mode: domain.ResetDaily, AtHour: 4, IdleMinutes: 1440}
	both := domain.ResetPolicy{Mode: domain.ResetBoth, AtHour: 4, IdleMinutes: 1440}
	none := domain.ResetPolicy{Mode: domain.ResetNone, AtHour: 4, IdleMinutes: 1440}
	tests := []struct {
		name    string
		policy  domain.ResetPolicy
		updated time.Time
		now     time.Time
		want    string
	}{
		{"idle exactly at the deadline does not reset", idle, date(2026, 5, 9, 10, 0, 0, 0), date(2026, 5, 10, 10, 0, 0, 0), ""},
		{"idle one microsecond after the deadline resets", idle, date(2026, 5, 9, 10, 0, 0, 0), date(2026, 5, 10, 10, 0, 0, 1000), "idle"},
		{"idle one nanosecond after the deadline resets", idle, date(2026, 5, 9, 10, 0, 0, 0), date(2026, 5, 10, 10, 0, 0, 1), "idle"},
		{"idle 0 minutes resets any later call", domain.ResetPolicy{Mode: domain.ResetIdle}, date(2026, 5, 9, 10, 0, 0, 0), date(2026, 5, 9, 10, 0, 0, 1000), "idle"},
		{"idle 0 minutes keeps the same instant", domain.ResetPolicy{Mode: domain.ResetIdle}, date(2026, 5, 9, 10, 0, 0, 0), date(2026, 5, 9, 10, 0, 0, 0), ""},
		{"daily before the hour: boundary is yesterday, updated before it", daily, date(2026, 5, 9, 3, 59, 0, 0), date(2026, 5, 10, 3, 30, 0, 0), "daily"},
		{"daily before the hour: updated exactly at yesterday's boundary survives", daily, date(2026, 5, 9, 4, 0, 0, 0), date(2026, 5, 10, 3, 30, 0, 0), ""},
		{"daily exactly at the hour: updated a second before resets", daily, date(2026, 5, 10, 3, 59, 59, 0), date(2026, 5, 10, 4, 0, 0, 0), "daily"},
		{"daily after the hour: updated after today's boundary survives", daily, date(2026, 5, 10, 4, 0, 0, 1), date(2026, 5, 10, 23, 0, 0, 0), ""},
		{"daily ignores idleness", daily, date(2026, 5, 1, 5, 0, 0, 0), date(2026, 5, 1, 23, 59, 0, 0), ""},
		{"both reports idle first when both hold", both, date(2026, 5, 8, 10, 0, 0, 0), date(2026, 5, 10, 10, 0, 0, 0), "idle"},
		{"both reports daily when only daily holds", both, date(2026, 5, 10, 3, 0, 0, 0), date(2026, 5, 10, 5, 0, 0, 0), "daily"},
		{"both reports nothing when neither holds", both, date(2026, 5, 10, 5, 0, 0, 0), date(2026, 5, 10, 6, 0, 0, 0), ""},
		{"none never resets", none, date(2020, 1, 1, 0, 0, 0, 0), date(2026, 5, 10, 6, 0, 0, 0), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.policy.ResetReason(tt.updated, tt.now, time.UTC)
			if got != tt.want {
				t.Fatalf("ResetReason(%v, %v) = %q, want %q", tt.updated, tt.now, got, tt.want)
			}
		})
	}
}

func TestResetPolicy_DailyBoundaryInTimeZone(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skipf("no tz database: %v", err)
	}
	p := domain.ResetPolicy{Mode: domain.ResetDaily, AtHour: 4}
	// 2026-05-10 03:30 in Tokyo is 2026-05-09 18:30 UTC; the boundary is
	// 2026-05-09 04:00 Tokyo = 2026-05-08 19:00 UTC.
	now := date(2026, 5, 9, 18, 30, 0, 0)
	if got, want := p.DailyBoundary(now, tokyo), date(2026, 5, 8, 19, 0, 0, 0); !got.Equal(want) {
		t.Fatalf("DailyBoundary(%v, Tokyo) = %v, want %v", now, got, want)
	}
	if got := p.ResetReason(date(2026, 5, 8, 18, 59, 0, 0), now, tokyo); got != "daily" {
		t.Fatalf("ResetReason before the Tokyo boundary = %q, want daily", got)
	}
	if got := p.ResetReason(date(2026, 5, 8, 19, 0, 0, 0), now, tokyo); got != "" {
		t.Fatalf("ResetReason at the Tokyo boundary = %q, want none", got)
	}
	// The same instants judged in UTC: the boundary is 2026-05-09 04:00 UTC.
	if got := p.ResetReason(date(2026, 5, 9, 3, 0, 0, 0), now, time.UTC); got != "daily" {
		t.Fatalf("ResetReason in UTC = %q, want daily", got)
	}
}

func TestResetPolicy_DailyBoundaryAcrossDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no tz database: %v", err)
	}
	p := domain.ResetPolicy{Mode: domain.ResetDaily, AtHour: 4}
	// 2026-03-08 is the spring-forward day in New York (02:00 → 03:00).
	now := time.Date(2026, 3, 8, 12, 0, 0, 0, ny)
	want := time.Date(2026, 3, 8, 4, 0, 0, 0, ny)
	if got := p.DailyBoundary(now, ny); !got.Equal(want) {
		t.Fatalf("DailyBoundary on DST day = %v, want %v", got, want)
	}
}

func TestResetPolicies_For(t *testing.T) {
	def := domain.DefaultResetPolicy()
	tg := domain.ResetPolicy{Mode: domain.ResetNone}
	grp := domain.ResetPolicy{Mode: domain.ResetIdle, IdleMinutes: 60}
	ps := domain.ResetPolicies{
		Default:    def,
		ByPlatform: map[string]domain.ResetPolicy{"telegram": tg},
		ByType:     map[string]domain.ResetPolicy{"group": grp},
	}
	tests := []struct {
		platform, chatType string
		want               domain.ResetMode
	}{
		{"telegram", "group", domain.ResetNone}, // per-platform beats per-type
		{"telegram", "dm", domain.ResetNone},    // per-platform
		{"discord", "group", domain.ResetIdle},  // per-type
		{"discord", "dm", domain.ResetBoth},     // default
		{"slack", "thread", domain.ResetBoth},   // no thread override: default
	}
	for _, tt := range tests {
		if got := ps.For(tt.platform, tt.chatType).Mode; got != tt.want {
			t.Errorf("For(%q, %q).Mode = %q, want %q", tt.platform, tt.chatType, got, tt.want)
		}
	}
}

func TestResetPolicy_Validate(t *testing.T) {
	good := domain.DefaultResetPolicy()
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate(default) = %v", err)
	}
	bad := []domain.ResetPolicy{
		{Mode: "sometimes", AtHour: 4},
		{Mode: domain.ResetDaily, AtHour: 24},
		{Mode: domain.ResetDaily, AtHour: -1},
		{Mode: domain.ResetIdle, IdleMinutes: -5},
	}
	for _, p := range bad {
		if err := p.Validate(); !errors.Is(err, domain.ErrInvalidPolicy) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidPolicy", p, err)
		}
	}
}

func TestResetPolicy_NotifiesOn(t *testing.T) {
	p := domain.DefaultResetPolicy()
	quiet := p
	quiet.Notify = false
	tests := []struct {
		name     string
		policy   domain.ResetPolicy
		reason   string
		platform string
		activity bool
		want     bool
	}{
		{"idle reset of an active lane", p, "idle", "telegram", true, true},
		{"idle reset of an empty lane", p, "idle", "telegram", false, false},
		{"daily reset on an excluded platform", p, "daily", "webhook", true, false},
		{"api_server is excluded by default", p, "idle", "api_server", true, false},
		{"suspended always notifies", p, "suspended", "webhook", false, true},
		{"notify off", quiet, "idle", "telegram", true, false},
		{"suspended notifies even with notify off", quiet, "suspended", "telegram", false, true},
	}
	for _, tt := range tests {
		if got := tt.policy.NotifiesOn(tt.reason, tt.platform, tt.activity); got != tt.want {
			t.Errorf("%s: NotifiesOn = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestNewSessionID(t *testing.T) {
	id, err := domain.NewSessionID(date(2026, 5, 5, 18, 59, 48, 0), time.UTC, "3f2a9c1d")
	if err != nil || id != "20260505_185948_3f2a9c1d" {
		t.Fatalf("NewSessionID = %q, %v, want 20260505_185948_3f2a9c1d", id, err)
	}
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err == nil {
		id, _ := domain.NewSessionID(date(2026, 5, 5, 18, 59, 48, 0), tokyo, "3f2a9c1d")
		if id != "20260506_035948_3f2a9c1d" {
			t.Fatalf("NewSessionID in Tokyo = %q, want 20260506_035948_3f2a9c1d", id)
		}
	}
	for _, bad := range []string{"", "3F2A9C1D", "3f2a9c1", "3f2a9c1dd", "zzzzzzzz"} {
		if _, err := domain.NewSessionID(date(2026, 5, 5, 0, 0, 0, 0), time.UTC, bad); !errors.Is(err, domain.ErrInvalidArgument) {
			t.Errorf("NewSessionID(entropy %q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func TestValidateSessionID(t *testing.T) {
	good := []string{"20260505_185948_3f2a9c1d", "20260315_092437_c9a6ff", "cli-session.1"}
	for _, id := range good {
		if err := domain.ValidateSessionID(id); err != nil {
			t.Errorf("ValidateSessionID(%q) = %v, want nil", id, err)
		}
	}
	bad := []string{"", "../etc/passwd", "a/b", `a\b`, "C:evil", "x..y", "a\x00b", string(make([]byte, 200))}
	for _, id := range bad {
		if err := domain.ValidateSessionID(id); !errors.Is(err, domain.ErrInvalidSessionID) {
			t.Errorf("ValidateSessionID(%q) = %v, want ErrInvalidSessionID", id, err)
		}
	}
}

var date = testfixtures.Date
