package domain_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hermes/domain"
	"hermes/events"
	"hermes/testfixtures"
)

func TestIdleDuration(t *testing.T) {
	tests := []struct {
		minutes int
		want    string
	}{
		{1440, "24h"}, {90, "1h 30m"}, {45, "45m"}, {0, "0h"}, {60, "1h"}, {61, "1h 1m"}, {2880, "48h"}, {1, "1m"},
	}
	for _, tt := range tests {
		if got := domain.IdleDuration(tt.minutes); got != tt.want {
			t.Errorf("IdleDuration(%d) = %q, want %q", tt.minutes, got, tt.want)
		}
	}
}

func TestResetReasonText(t *testing.T) {
	p := domain.DefaultResetPolicy()
	at := func(h int) domain.ResetPolicy { q := p; q.AtHour = h; return q }
	idle := func(m int) domain.ResetPolicy { q := p; q.IdleMinutes = m; return q }
	tests := []struct {
		reason string
		p      domain.ResetPolicy
		want   string
	}{
		{"suspended", p, "previous session was stopped or interrupted"},
		{"resume_pending_expired", p, "gateway restart recovery timed out"},
		{"daily", p, "daily schedule at 4:00"},
		{"daily", at(0), "daily schedule at 0:00"},
		{"daily", at(23), "daily schedule at 23:00"},
		{"idle", p, "inactive for 24h"},
		{"idle", idle(90), "inactive for 1h 30m"},
		{"idle", idle(45), "inactive for 45m"},
		{"idle", idle(0), "inactive for 0h"},
		{"", p, "inactive for 24h"},
	}
	for _, tt := range tests {
		if got := domain.ResetReasonText(tt.reason, tt.p); got != tt.want {
			t.Errorf("ResetReasonText(%q, at %d idle %d) = %q, want %q", tt.reason, tt.p.AtHour, tt.p.IdleMinutes, got, tt.want)
		}
	}
}

func TestResetNoticeText(t *testing.T) {
	p := domain.DefaultResetPolicy()
	want := "◐ Session automatically reset (inactive for 24h). Conversation history cleared.\n" +
		"Use /resume to browse and restore a previous session.\n" +
		"Adjust reset timing in config.yaml under session_reset."
	if got := domain.ResetNoticeText("idle", p); got != want {
		t.Errorf("ResetNoticeText(idle) = %q, want %q", got, want)
	}
	want = "◐ Session automatically reset (previous session was stopped or interrupted). Conversation history cleared.\n" +
		"Use /resume to browse and restore a previous session.\n" +
		"Adjust reset timing in config.yaml under session_reset."
	if got := domain.ResetNoticeText("suspended", p); got != want {
		t.Errorf("ResetNoticeText(suspended) = %q, want %q", got, want)
	}
}

func TestResetContextNote(t *testing.T) {
	tests := []struct{ reason, want string }{
		{"suspended", "[System note: The user's previous session was stopped and suspended. This is a fresh conversation with no prior context.]"},
		{"daily", "[System note: The user's session was automatically reset by the daily schedule. This is a fresh conversation with no prior context.]"},
		{"idle", "[System note: The user's previous session expired due to inactivity. This is a fresh conversation with no prior context.]"},
		{"", "[System note: The user's previous session expired due to inactivity. This is a fresh conversation with no prior context.]"},
		{"resume_pending_expired", "[System note: The previous gateway session could not be recovered after a restart (API recovery timed out). This is a fresh conversation — use /resume to restore history if needed.]"},
	}
	for _, tt := range tests {
		if got := domain.ResetContextNote(tt.reason); got != tt.want {
			t.Errorf("ResetContextNote(%q) = %q, want %q", tt.reason, got, tt.want)
		}
	}
}

// Fixtures of the notice tests: a Telegram DM lane (nt = notice test).
const ntKey = "agent:main:telegram:dm:7"

var (
	ntT0   = testfixtures.Date(2026, 5, 9, 10, 0, 0, 0)
	ntSrc  = domain.SessionSource{Platform: "telegram", ChatID: "7", ChatType: "dm", UserName: "Eve"}
	ntOld  = "20260509_100000_aaaaaaaa"
	ntNew  = "20260510_110000_bbbbbbbb"
	ntIdle = domain.LaneRules{Policy: domain.DefaultResetPolicy(), Location: time.UTC, ResumeFreshness: time.Hour}
)

func ntCreated(src domain.SessionSource) events.SessionCreated {
	return events.SessionCreated{SessionKey: ntKey, SessionID: ntOld, Origin: src.Event(), Platform: src.Platform, ChatType: "dm", At: ntT0}
}

// ntResolveAfter replays history, then resolves (get_or_create) at now and
// returns the full history with the decided events.
func ntResolveAfter(t *testing.T, history []events.Event, src domain.SessionSource, r domain.LaneRules, now time.Time) []events.Event {
	t.Helper()
	decided, err := domain.Replay(history).Resolve(domain.ResolveRequest{Source: src, SessionKey: ntKey, Rules: r, Entropy: "bbbbbbbb"}, now)
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]events.Event{}, history...), decided...)
}

func TestLane_PendingResetNotice(t *testing.T) {
	dayLater := ntT0.Add(25 * time.Hour)
	turn := events.TurnCompleted{TurnID: "t1", SessionID: ntOld, InputTokens: 5, OutputTokens: 5, At: ntT0.Add(time.Minute)}
	activity := events.ActivityRecorded{SessionID: ntOld, At: ntT0.Add(time.Minute)}
	webhook := ntSrc
	webhook.Platform = "webhook"
	quiet := domain.DefaultResetPolicy()
	quiet.Notify = false
	quietRules := ntIdle
	quietRules.Policy = quiet
	idleNotice := "◐ Session automatically reset (inactive for 24h). Conversation history cleared.\nUse /resume to browse and restore a previous session.\nAdjust reset timing in config.yaml under session_reset."
	dailyRules := domain.LaneRules{Policy: domain.ResetPolicy{Mode: domain.ResetDaily, AtHour: 4, Notify: true}, Location: time.UTC}

	tests := []struct {
		name       string
		history    func(t *testing.T) []events.Event
		policy     domain.ResetPolicy
		want       domain.ResetNotice
		wantNotice bool
	}{
		{
			name: "idle reset of a lane with a completed turn",
			history: func(t *testing.T) []events.Event {
				return ntResolveAfter(t, []events.Event{ntCreated(ntSrc), turn}, ntSrc, ntIdle, dayLater)
			},
			policy: ntIdle.Policy,
			want: domain.ResetNotice{
				Reason: "idle", Notice: idleNotice,
				Note: "[System note: The user's previous session expired due to inactivity. This is a fresh conversation with no prior context.]",
			},
			wantNotice: true,
		},
		{
			name: "idle reset of a lane with an appended message only",
			history: func(t *testing.T) []events.Event {
				return ntResolveAfter(t, []events.Event{ntCreated(ntSrc), activity}, ntSrc, ntIdle, dayLater)
			},
			policy:     ntIdle.Policy,
			want:       domain.ResetNotice{Reason: "idle", Notice: idleNotice, Note: domain.ResetContextNote("idle")},
			wantNotice: true,
		},
		{
			name: "idle reset of an empty lane: the note but no notice",
			history: func(t *testing.T) []events.Event {
				return ntResolveAfter(t, []events.Event{ntCreated(ntSrc)}, ntSrc, ntIdle, dayLater)
			},
			policy:     ntIdle.Policy,
			want:       domain.ResetNotice{Reason: "idle", Note: domain.ResetContextNote("idle")},
			wantNotice: true,
		},
		{
			name: "excluded platform: no notice",
			history: func(t *testing.T) []events.Event {
				return ntResolveAfter(t, []events.Event{ntCreated(webhook), turn}, webhook, ntIdle, dayLater)
			},
			policy:     ntIdle.Policy,
			want:       domain.ResetNotice{Reason: "idle", Note: domain.ResetContextNote("idle")},
			wantNotice: true,
		},
		{
			name: "notify off: no notice",
			history: func(t *testing.T) []events.Event {
				return ntResolveAfter(t, []events.Event{ntCreated(ntSrc), turn}, ntSrc, quietRules, dayLater)
			},
			policy:     quiet,
			want:       domain.ResetNotice{Reason: "idle", Note: domain.ResetContextNote("idle")},
			wantNotice: true,
		},
		{
			name: "daily reset names the hour",
			history: func(t *testing.T) []events.Event {
				return ntResolveAfter(t, []events.Event{ntCreated(ntSrc), turn}, ntSrc, dailyRules, dayLater)
			},
			policy: dailyRules.Policy,
			want: domain.ResetNotice{
				Reason: "daily", Note: domain.ResetContextNote("daily"),
				Notice: "◐ Session automatically reset (daily schedule at 4:00). Conversation history cleared.\nUse /resume to browse and restore a previous session.\nAdjust reset timing in config.yaml under session_reset.",
			},
			wantNotice: true,
		},
		{
			name: "a suspended reset always notifies, even empty, excluded and with notify off",
			history: func(t *testing.T) []events.Event {
				h := []events.Event{ntCreated(webhook), events.Suspended{Reason: events.SuspendStopCommand, At: ntT0.Add(time.Minute)}}
				return ntResolveAfter(t, h, webhook, quietRules, ntT0.Add(2*time.Minute))
			},
			policy:     quiet,
			want:       domain.ResetNotice{Reason: "suspended", Notice: domain.ResetNoticeText("suspended", quiet), Note: domain.ResetContextNote("suspended")},
			wantNotice: true,
		},
		{
			name: "an expired resume mark always notifies",
			history: func(t *testing.T) []events.Event {
				h := []events.Event{ntCreated(ntSrc), events.ResumeMarked{Reason: events.ResumeRestartTimeout, At: ntT0}}
				return ntResolveAfter(t, h, ntSrc, ntIdle, ntT0.Add(2*time.Hour))
			},
			policy: ntIdle.Policy,
			want: domain.ResetNotice{
				Reason: "resume_pending_expired", Note: domain.ResetContextNote("resume_pending_expired"),
				Notice: "◐ Session automatically reset (gateway restart recovery timed out). Conversation history cleared.\nUse /resume to browse and restore a previous session.\nAdjust reset timing in config.yaml under session_reset.",
			},
			wantNotice: true,
		},
		{
			name: "an explicit /new never leaves a notice",
			history: func(t *testing.T) []events.Event {
				return []events.Event{ntCreated(ntSrc), turn, events.SessionReset{SessionID: ntNew, PreviousSessionID: ntOld, At: dayLater}}
			},
			policy: ntIdle.Policy,
		},
		{
			name: "a new lane has none",
			history: func(t *testing.T) []events.Event {
				return []events.Event{ntCreated(ntSrc)}
			},
			policy: ntIdle.Policy,
		},
		{
			name: "a delivered notice is consumed",
			history: func(t *testing.T) []events.Event {
				h := ntResolveAfter(t, []events.Event{ntCreated(ntSrc), turn}, ntSrc, ntIdle, dayLater)
				return append(h, events.NoticeDelivered{SessionID: domain.Replay(h).SessionID, Reason: "idle", At: dayLater})
			},
			policy: ntIdle.Policy,
		},
		{
			name: "a delivery recorded for another session does not consume it",
			history: func(t *testing.T) []events.Event {
				h := ntResolveAfter(t, []events.Event{ntCreated(ntSrc), turn}, ntSrc, ntIdle, dayLater)
				return append(h, events.NoticeDelivered{SessionID: ntOld, Reason: "idle", At: dayLater})
			},
			policy:     ntIdle.Policy,
			want:       domain.ResetNotice{Reason: "idle", Notice: idleNotice, Note: domain.ResetContextNote("idle")},
			wantNotice: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lane := domain.Replay(tt.history(t))
			got, ok := lane.PendingResetNotice(tt.policy)
			if ok != tt.wantNotice {
				t.Fatalf("PendingResetNotice() ok = %t, want %t (lane %+v)", ok, tt.wantNotice, lane)
			}
			if !ok {
				return
			}
			want := tt.want
			want.SessionID = lane.SessionID
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("PendingResetNotice() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLane_AcknowledgeNotice(t *testing.T) {
	now := ntT0.Add(25 * time.Hour)
	reset := events.SessionAutoReset{
		SessionKey: ntKey, SessionID: ntNew, PreviousSessionID: ntOld, Reason: "idle", HadActivity: true,
		Origin: ntSrc.Event(), Platform: "telegram", ChatType: "dm", At: now,
	}
	ack := func(sessionID string) func(domain.Lane) ([]events.Event, error) {
		return func(l domain.Lane) ([]events.Event, error) { return l.AcknowledgeNotice(sessionID, now) }
	}
	delivered := events.NoticeDelivered{SessionID: ntNew, Reason: "idle", At: now}
	scenarios := []testfixtures.LaneScenario{
		{Name: "a pending notice is consumed", Given: []events.Event{ntCreated(ntSrc), reset}, When: ack(""), Then: []events.Event{delivered}},
		{Name: "for its own session", Given: []events.Event{ntCreated(ntSrc), reset}, When: ack(ntNew), Then: []events.Event{delivered}},
		{Name: "for an older session: the newer notice stays", Given: []events.Event{ntCreated(ntSrc), reset}, When: ack(ntOld)},
		{Name: "twice: the second changes nothing", Given: []events.Event{ntCreated(ntSrc), reset, delivered}, When: ack("")},
		{Name: "nothing pending", Given: []events.Event{ntCreated(ntSrc)}, When: ack("")},
		{
			Name:  "an explicit /new leaves nothing to acknowledge",
			Given: []events.Event{ntCreated(ntSrc), events.SessionReset{SessionID: ntNew, PreviousSessionID: ntOld, At: now}},
			When:  ack(""),
		},
		{Name: "a missing lane", When: ack(""), ThenErr: domain.ErrLaneNotFound},
	}
	for _, s := range scenarios {
		t.Run(s.Name, s.Run)
	}

	lane := domain.Replay([]events.Event{ntCreated(ntSrc), reset, delivered})
	if lane.WasAutoReset || lane.AutoResetReason != "" {
		t.Errorf("after NoticeDelivered: was_auto_reset %t, auto_reset_reason %q, want both cleared", lane.WasAutoReset, lane.AutoResetReason)
	}
	if !lane.ResetHadActivity || lane.SessionID != ntNew {
		t.Errorf("after NoticeDelivered: reset_had_activity %t, session %s; the rest of the entry must stay", lane.ResetHadActivity, lane.SessionID)
	}
}

func TestResumeRecoveryNote(t *testing.T) {
	const (
		head  = "[System note: The previous turn was interrupted by "
		mid   = "; the gateway is now back online. Any restart/shutdown command in the history has already run — do NOT re-execute or verify it. "
		newMs = "Address the user's NEW message below FIRST and focus on what the user is asking now. Do NOT re-execute old tool calls — skip any unfinished work from the conversation history.]"
		ask   = "Report to the user that the session was restored successfully and ask what they would like to do next. Do NOT re-execute old tool calls — skip any unfinished work from the conversation history.]"
		cont  = "No user is present on this non-interactive platform, so do NOT emit a 'session restored' acknowledgement or ask questions. Review the conversation history and CONTINUE the interrupted task to completion. Do NOT re-run tool calls whose results already appear in the history — resume from the first step that has no recorded result.]"
	)
	tests := []struct {
		reason, message string
		interactive     bool
		want            string
	}{
		{"restart_timeout", "what now?", true, head + "a gateway restart" + mid + newMs + "\n\nwhat now?"},
		{"shutdown_timeout", "what now?", false, head + "a gateway shutdown" + mid + newMs + "\n\nwhat now?"},
		{"restart_interrupted", "", true, head + "a gateway interruption" + mid + ask},
		{"restart_timeout", "", false, head + "a gateway restart" + mid + cont},
		{"", "", true, head + "a gateway interruption" + mid + ask},
	}
	for _, tt := range tests {
		if got := domain.ResumeRecoveryNote(tt.reason, tt.message, tt.interactive); got != tt.want {
			t.Errorf("ResumeRecoveryNote(%q, %q, %t) =\n%q\nwant\n%q", tt.reason, tt.message, tt.interactive, got, tt.want)
		}
	}
}

func TestInteractivePlatform(t *testing.T) {
	for p, want := range map[string]bool{"telegram": true, "discord": true, "local": true, "webhook": false, "api_server": false} {
		if got := domain.InteractivePlatform(p); got != want {
			t.Errorf("InteractivePlatform(%q) = %t, want %t", p, got, want)
		}
	}
}

func TestLane_TurnNote(t *testing.T) {
	now := ntT0.Add(10 * time.Hour)
	window := time.Hour
	base := []events.Event{ntCreated(ntSrc)}
	pending := func(reason string, at time.Time) []events.Event {
		return append(append([]events.Event{}, base...), events.ResumeMarked{Reason: reason, At: at})
	}
	webhook := ntSrc
	webhook.Platform = "webhook"
	freshTail := domain.TranscriptTail{LastAt: now.Add(-time.Hour), LastRole: "assistant"}
	staleTail := domain.TranscriptTail{LastAt: now.Add(-time.Hour - time.Microsecond), LastRole: "assistant"}
	freshTool := domain.TranscriptTail{LastAt: now.Add(-time.Minute), LastRole: "tool"}
	staleTool := domain.TranscriptTail{LastAt: now.Add(-2 * time.Hour), LastRole: "tool"}
	recovery := func(reason, msg string, interactive bool) domain.TurnNote {
		full := domain.ResumeRecoveryNote(reason, msg, interactive)
		note := full
		if msg != "" {
			note = full[:len(full)-len(msg)-2]
		}
		return domain.TurnNote{Note: note, Message: full}
	}
	tests := []struct {
		name    string
		history []events.Event
		message string
		tail    domain.TranscriptTail
		window  time.Duration
		want    domain.TurnNote
	}{
		{"not pending, plain", base, "hi", freshTail, window, domain.TurnNote{Message: "hi"}},
		{"pending, transcript fresh (the boundary)", pending("restart_timeout", now.Add(-5*time.Hour)), "hi", freshTail, window, recovery("restart_timeout", "hi", true)},
		{"pending, transcript stale but mark fresh", pending("shutdown_timeout", now.Add(-time.Minute)), "hi", staleTail, window, recovery("shutdown_timeout", "hi", true)},
		{"pending, both stale", pending("restart_timeout", now.Add(-5*time.Hour)), "hi", staleTail, window, domain.TurnNote{Message: "hi"}},
		{"pending, unknown transcript time counts as fresh", pending("restart_interrupted", now.Add(-5*time.Hour)), "", domain.TranscriptTail{}, window, recovery("restart_interrupted", "", true)},
		{"pending, window 0 is always fresh", pending("restart_timeout", now.Add(-50*time.Hour)), "", staleTail, 0, recovery("restart_timeout", "", true)},
		{
			"pending on a non-interactive platform, empty message",
			append([]events.Event{ntCreated(webhook)}, events.ResumeMarked{Reason: "restart_timeout", At: now}),
			"", staleTail, window, recovery("restart_timeout", "", false),
		},
		{"pending beats a tool tail", pending("restart_timeout", now), "hi", freshTool, window, recovery("restart_timeout", "hi", true)},
		{"fresh tool tail", base, "what happened?", freshTool, window, domain.TurnNote{Note: domain.PendingToolOutputNote, Message: domain.PendingToolOutputNote + "\n\nwhat happened?"}},
		{"stale tool tail", base, "what happened?", staleTool, window, domain.TurnNote{Message: "what happened?"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := domain.Replay(tt.history).TurnNote(tt.message, tt.tail, tt.window, now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("TurnNote(%q) mismatch (-want +got):\n%s", tt.message, diff)
			}
		})
	}
	if got := domain.PendingToolOutputNote; got != "[System note: A new message has arrived. The conversation history contains pending tool outputs from an interrupted turn. IGNORE those pending results. Address the user's NEW message below FIRST. Do NOT re-execute old tool calls from the history.]" {
		t.Errorf("PendingToolOutputNote = %q", got)
	}
}

func TestFreshInterruption(t *testing.T) {
	now := ntT0
	tests := []struct {
		name   string
		ts     time.Time
		window time.Duration
		want   bool
	}{
		{"zero time", time.Time{}, time.Hour, true},
		{"boundary", now.Add(-time.Hour), time.Hour, true},
		{"past the boundary", now.Add(-time.Hour - time.Nanosecond), time.Hour, false},
		{"window 0", now.Add(-100 * time.Hour), 0, true},
		{"negative window", now.Add(-100 * time.Hour), -time.Second, true},
	}
	for _, tt := range tests {
		if got := domain.FreshInterruption(tt.ts, tt.window, now); got != tt.want {
			t.Errorf("%s: FreshInterruption = %t, want %t", tt.name, got, tt.want)
		}
	}
}
