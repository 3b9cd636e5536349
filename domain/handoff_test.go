package domain_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hermes/domain"
	"hermes/events"
)

func TestHandoff_Decide(t *testing.T) {
	const sid = "20260509_100000_aaaaaaaa"
	tests := []struct {
		name    string
		given   string
		when    func(h domain.Handoff) ([]events.Event, error)
		want    []events.Event
		wantErr error
	}{
		{name: "a session without a handoff is requested", when: func(h domain.Handoff) ([]events.Event, error) { return h.RequestHandoff(sid, "telegram", t0) },
			want: []events.Event{events.HandoffRequested{SessionID: sid, Platform: "telegram", At: t0}}},
		{name: "a failed handoff may be requested again", given: events.HandoffStateFailed,
			when: func(h domain.Handoff) ([]events.Event, error) { return h.RequestHandoff(sid, "discord", t0) },
			want: []events.Event{events.HandoffRequested{SessionID: sid, Platform: "discord", At: t0}}},
		{name: "a handoff in flight is not requested twice", given: events.HandoffStateRunning,
			when: func(h domain.Handoff) ([]events.Event, error) { return h.RequestHandoff(sid, "telegram", t0) }},
		{name: "a request without a platform is refused", when: func(h domain.Handoff) ([]events.Event, error) { return h.RequestHandoff(sid, "", t0) },
			wantErr: domain.ErrInvalidArgument},
		{name: "a pending handoff is claimed", given: events.HandoffStatePending,
			when: func(h domain.Handoff) ([]events.Event, error) { return h.ClaimHandoff(sid, t0), nil },
			want: []events.Event{events.HandoffClaimed{SessionID: sid, At: t0}}},
		{name: "a running handoff is not claimed twice", given: events.HandoffStateRunning,
			when: func(h domain.Handoff) ([]events.Event, error) { return h.ClaimHandoff(sid, t0), nil }},
		{name: "completion is recorded whatever the state", when: func(h domain.Handoff) ([]events.Event, error) { return h.CompleteHandoff(sid, t0), nil },
			want: []events.Event{events.HandoffCompleted{SessionID: sid, At: t0}}},
		{name: "a failure keeps 500 characters of its reason", given: events.HandoffStateRunning,
			when: func(h domain.Handoff) ([]events.Event, error) {
				return h.FailHandoff(sid, strings.Repeat("é", 600), t0)
			},
			want: []events.Event{events.HandoffFailed{SessionID: sid, Error: strings.Repeat("é", 500), At: t0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.when(domain.Handoff{State: tt.given})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || len(got) != 0 {
					t.Fatalf("got %v, %v; want no events and %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				got = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decided events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTopicChat_Decide(t *testing.T) {
	const sid = "20260509_100000_aaaaaaaa"
	yes := true
	bind := events.TopicBound{ChatID: "12", ThreadID: "7", UserID: "12", SessionKey: "k", SessionID: sid, ManagedMode: "auto"}
	bound := bind
	bound.At = t0
	enabled := events.TopicModeEnabled{ChatID: "12", UserID: "12", At: t0}
	tests := []struct {
		name    string
		given   []events.Event
		when    func(c domain.TopicChat) ([]events.Event, error)
		want    []events.Event
		wantErr error
	}{
		{name: "topic mode is enabled with what the bot saw",
			when: func(c domain.TopicChat) ([]events.Event, error) {
				return c.EnableTopicMode(domain.TopicMode{ChatID: "12", UserID: "12", HasTopicsEnabled: &yes}, t0)
			},
			want: []events.Event{events.TopicModeEnabled{ChatID: "12", UserID: "12", HasTopicsEnabled: &yes, At: t0}}},
		{name: "disabling a chat that never had topic mode changes nothing",
			when: func(c domain.TopicChat) ([]events.Event, error) { return c.DisableTopicMode("12", true, t0) }},
		{name: "disabling an enabled chat clears its bindings", given: []events.Event{enabled},
			when: func(c domain.TopicChat) ([]events.Event, error) { return c.DisableTopicMode("12", true, t0) },
			want: []events.Event{events.TopicModeDisabled{ChatID: "12", ClearBindings: true, At: t0}}},
		{name: "an unbound session is bound",
			when: func(c domain.TopicChat) ([]events.Event, error) { return c.BindTopic(bind, nil, t0) },
			want: []events.Event{bound}},
		{name: "binding the same topic again refreshes it",
			when: func(c domain.TopicChat) ([]events.Event, error) {
				return c.BindTopic(bind, &domain.TopicBinding{ChatID: "12", ThreadID: "7"}, t0)
			},
			want: []events.Event{bound}},
		{name: "a session bound to another topic is refused",
			when: func(c domain.TopicChat) ([]events.Event, error) {
				return c.BindTopic(bind, &domain.TopicBinding{ChatID: "12", ThreadID: "8"}, t0)
			},
			wantErr: domain.ErrTopicTaken},
		{name: "an unsafe session id is refused",
			when: func(c domain.TopicChat) ([]events.Event, error) {
				b := bind
				b.SessionID = "../x"
				return c.BindTopic(b, nil, t0)
			},
			wantErr: domain.ErrInvalidSessionID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c domain.TopicChat
			for _, e := range tt.given {
				c = c.Evolve(e)
			}
			got, err := tt.when(c)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || len(got) != 0 {
					t.Fatalf("got %v, %v; want no events and %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				got = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decided events (-want +got):\n%s", diff)
			}
		})
	}
}
