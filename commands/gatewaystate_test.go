package commands_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"hermes/commands"
	"hermes/domain"
	"hermes/events"
)

// stateIndex is a StateIndex over fixed answers.
type stateIndex struct {
	exists  map[string]bool
	handoff map[string]string
	binding map[string]*domain.TopicBinding
}

func (x stateIndex) SessionExists(_ context.Context, id string) (bool, error) {
	return x.exists[id], nil
}
func (x stateIndex) HandoffState(_ context.Context, id string) (string, bool, error) {
	return x.handoff[id], x.exists[id], nil
}
func (x stateIndex) TopicBindingOfSession(_ context.Context, id string) (*domain.TopicBinding, error) {
	return x.binding[id], nil
}

func streamEvents(t *testing.T, f *fixture, stream string) []events.Envelope {
	t.Helper()
	envs, err := f.store.ReadStream(context.Background(), stream, 1, 10000, events.Forwards)
	if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
		t.Fatal(err)
	}
	return envs
}

// TestSetMeta_SessionKeysGoWithTheirSession: a key about an existing session
// is stored on its transcript stream, any other on the meta stream; hermes'
// own keys are refused.
func TestSetMeta_SessionKeysGoWithTheirSession(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, idleConfig())
	sid := "20260509_100000_aaaaaaaa"
	s := f.handler.State(stateIndex{exists: map[string]bool{sid: true}})
	for _, key := range []string{"goal:" + sid, "goal:20260509_100000_bbbbbbbb", "ghost_session_prune_v1"} {
		if _, err := s.SetMeta(ctx, commands.SetMeta{Key: key, Value: "v"}); err != nil {
			t.Fatalf("SetMeta(%q) = %v", key, err)
		}
	}
	if n := countType[events.SessionMetaSet](streamEvents(t, f, events.TranscriptStream(sid))); n != 1 {
		t.Errorf("transcript.meta_set on the session = %d, want 1", n)
	}
	if n := countType[events.MetaSet](streamEvents(t, f, events.MetaStream)); n != 2 {
		t.Errorf("meta.set on the meta stream = %d, want 2 (a key of an unknown session, a key of none)", n)
	}
	for _, bad := range []commands.SetMeta{{Key: "hermes_checkpoint", Value: "0"}, {Key: "", Value: "x"}, {Key: "k", Value: "a\x00b"}} {
		if _, err := s.SetMeta(ctx, bad); !errors.Is(err, domain.ErrInvalidArgument) {
			t.Errorf("SetMeta(%q, %q) = %v, want ErrInvalidArgument", bad.Key, bad.Value, err)
		}
	}
}

// TestHandoff_ClaimOnce: a pending handoff is claimed once; a missing
// session is refused.
func TestHandoff_ClaimOnce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, idleConfig())
	sid := "20260509_100000_aaaaaaaa"
	idx := stateIndex{exists: map[string]bool{sid: true}, handoff: map[string]string{sid: events.HandoffStatePending}}
	s := f.handler.State(idx)
	got, err := s.ClaimHandoff(ctx, commands.Handoff{SessionID: sid})
	if err != nil || !got.Changed {
		t.Fatalf("first claim = %+v, %v; want claimed", got, err)
	}
	idx.handoff[sid] = events.HandoffStateRunning // the read model caught up
	if got, err := s.ClaimHandoff(ctx, commands.Handoff{SessionID: sid}); err != nil || got.Changed {
		t.Errorf("second claim = %+v, %v; want not claimed", got, err)
	}
	if _, err := s.CompleteHandoff(ctx, commands.Handoff{SessionID: "20260509_100000_cccccccc"}); !errors.Is(err, commands.ErrSessionNotFound) {
		t.Errorf("completing a missing session's handoff = %v, want ErrSessionNotFound", err)
	}
	if n := countType[events.HandoffClaimed](streamEvents(t, f, events.TranscriptStream(sid))); n != 1 {
		t.Errorf("handoff_claimed events = %d, want 1", n)
	}
}

// TestForget_ErasesTheTelegramTopicUser: a person erasure of a Telegram
// user also erases their user id from their chat's topic stream.
func TestForget_ErasesTheTelegramTopicUser(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, idleConfig())
	src := domain.SessionSource{Platform: "telegram", ChatID: "4242", ChatType: "dm", UserID: "4242"}
	res, err := f.handler.ResolveSession(ctx, commands.ResolveSession{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	s := f.handler.State(stateIndex{exists: map[string]bool{res.Lane.SessionID: true}})
	if _, err := s.EnableTopicMode(ctx, commands.EnableTopicMode{Mode: domain.TopicMode{ChatID: "4242", UserID: "4242"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BindTopic(ctx, commands.BindTopic{Binding: events.TopicBound{ChatID: "4242", ThreadID: "7", UserID: "4242",
		SessionKey: res.Lane.SessionKey, SessionID: res.Lane.SessionID, ManagedMode: "auto"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.handler.Forget(ctx, commands.Forget{Platform: "telegram", UserID: "4242"}); err != nil {
		t.Fatal(err)
	}
	envs := streamEvents(t, f, events.TelegramStream("4242"))
	if countType[events.TopicsErased](envs) != 1 {
		t.Fatalf("the chat's topic stream has no telegram.person_erased: %v", envs)
	}
	for _, env := range envs {
		data, err := events.Encode(env.Event)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), `"user_id":"4242"`) {
			t.Errorf("after the erasure %s still names the user: %s", env.Type, data)
		}
	}
}
