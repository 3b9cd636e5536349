package transcripts

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hermes/events"
)

// TestGatewayState_MetaHandoffsTopics: given meta values, a handoff's
// steps and a topic binding, the read model answers them as Hermes'
// SessionDB does; deleting the session drops its binding and its meta
// values, not another session's; a rebuild gives the same file.
func TestGatewayState_MetaHandoffsTopics(t *testing.T) {
	ctx := context.Background()
	p := openTemp(t)
	h := newHistory()
	h.lane("k1", created("k1", "s1", at(0)))
	h.lane("k2", created("k2", "s2", at(0)))
	h.add(events.MetaStream, events.MetaSet{Key: "ghost_session_prune_v1", Value: "1", At: at(1)})
	h.tr("s1", events.SessionMetaSet{SessionID: "s1", Key: "goal:s1", Value: `{"goal":"ship"}`, At: at(2)},
		events.HandoffRequested{SessionID: "s1", Platform: "telegram", At: at(3)},
		events.HandoffClaimed{SessionID: "s1", At: at(4)},
		events.HandoffFailed{SessionID: "s1", Error: "adapter down", At: at(5)})
	h.tr("s2", events.SessionMetaSet{SessionID: "s2", Key: "goal:s2", Value: "keep", At: at(2)},
		events.HandoffRequested{SessionID: "s2", Platform: "discord", At: at(3)})
	yes := true
	h.add(events.TelegramStream("c1"), events.TopicModeEnabled{ChatID: "c1", UserID: "u1", HasTopicsEnabled: &yes, At: at(6)})
	h.add(events.TelegramStream("c1"), events.TopicBound{ChatID: "c1", ThreadID: "7", UserID: "u1", SessionKey: "k1", SessionID: "s1", ManagedMode: "auto", At: at(7)})
	h.add(events.TelegramStream("c1"), events.TopicBound{ChatID: "c1", ThreadID: "8", UserID: "u1", SessionKey: "k2", SessionID: "s2", ManagedMode: "auto", At: at(8)})
	mustApply(t, p, h.all)

	r := p.Reader
	for key, want := range map[string]string{"ghost_session_prune_v1": "1", "goal:s1": `{"goal":"ship"}`} {
		if got, ok, err := r.Meta(ctx, key); err != nil || !ok || got != want {
			t.Errorf("Meta(%q) = %q, %v, %v; want %q", key, got, ok, err, want)
		}
	}
	if _, ok, _ := r.Meta(ctx, "hermes_checkpoint"); ok {
		t.Errorf("Meta(hermes_checkpoint) answered hermes' own key")
	}
	state, platform, reason, err := r.HandoffState(ctx, "s1")
	if err != nil || *state != events.HandoffStateFailed || *platform != "telegram" || *reason != "adapter down" {
		t.Errorf("HandoffState(s1) = %v %v %v %v, want failed telegram \"adapter down\"", state, platform, reason, err)
	}
	pending, err := r.PendingHandoffs(ctx)
	if err != nil || len(pending) != 1 || pending[0]["id"] != "s2" {
		t.Errorf("PendingHandoffs = %v, %v; want s2", pending, err)
	}
	mode, err := r.TopicMode(ctx, "c1")
	if err != nil || mode["enabled"] != int64(1) || mode["has_topics_enabled"] != int64(1) || mode["allows_users_to_create_topics"] != nil {
		t.Errorf("TopicMode(c1) = %v, %v", mode, err)
	}
	bindings, err := r.TopicBindings(ctx, "c1")
	if err != nil || len(bindings) != 2 || bindings[0]["thread_id"] != "8" {
		t.Errorf("TopicBindings(c1) = %v, %v; want 8 then 7", bindings, err)
	}

	before := dumpOf(t, r)
	rebuilt := openTemp(t)
	mustApply(t, rebuilt, h.all)
	if diff := cmp.Diff(before, dumpOf(t, rebuilt.Reader)); diff != "" {
		t.Errorf("a rebuild differs (-incremental +rebuild):\n%s", diff)
	}

	h.tr("s1", events.TranscriptDeleted{SessionID: "s1", Reason: "requested", At: at(9)})
	h.add(events.TelegramStream("c1"), events.TopicModeDisabled{ChatID: "c1", ClearBindings: false, At: at(10)})
	mustApply(t, p, h.all[len(h.all)-2:])
	if b, _ := r.TopicBindingOfSession(ctx, "s1"); b != nil {
		t.Errorf("the deleted session's binding stayed: %v", b)
	}
	if b, _ := r.TopicBindingOfSession(ctx, "s2"); b == nil {
		t.Errorf("the other session's binding went with it")
	}
	if _, ok, _ := r.Meta(ctx, "goal:s1"); ok {
		t.Errorf("the deleted session's goal stayed")
	}
	if got, _, _ := r.Meta(ctx, "goal:s2"); got != "keep" {
		t.Errorf("Meta(goal:s2) = %q after s1 was deleted, want keep", got)
	}
	if mode, _ := r.TopicMode(ctx, "c1"); mode["enabled"] != int64(0) {
		t.Errorf("after disable, enabled = %v", mode["enabled"])
	}
	h.add(events.TelegramStream("c1"), events.TopicsErased{ChatID: "c1", ErasureID: "er_1", Reason: events.ErasurePerson, At: at(11)})
	mustApply(t, p, h.all[len(h.all)-1:])
	mode, _ = r.TopicMode(ctx, "c1")
	b, _ := r.TopicBindingOfSession(ctx, "s2")
	if mode["user_id"] != "" || b["user_id"] != "" {
		t.Errorf("after the person erasure: mode user %v, binding user %v; want both erased", mode["user_id"], b["user_id"])
	}
}

// TestMessagesAround_AndAnchoredView follows Hermes' get_messages_around
// and get_anchored_view on a session of ten messages.
func TestMessagesAround_AndAnchoredView(t *testing.T) {
	ctx := context.Background()
	p := openTemp(t)
	h := newHistory()
	h.lane("k1", created("k1", "s1", at(0)))
	roles := []string{"user", "assistant", "tool", "user", "assistant", "tool", "user", "assistant", "user", "assistant"}
	for i, role := range roles {
		h.tr("s1", appended("s1", text(role, "m"+string(rune('0'+i))), at(i+1)))
	}
	mustApply(t, p, h.all)
	ids := func(ms []Message) []int64 {
		out := []int64{}
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	r := p.Reader
	a, err := r.MessagesAround(ctx, "s1", 5, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(ids(a.Window), []int64{3, 4, 5, 6, 7}) || a.MessagesBefore != 2 || a.MessagesAfter != 2 {
		t.Errorf("MessagesAround(5, 2) = %v before %d after %d, want 3..7, 2, 2", ids(a.Window), a.MessagesBefore, a.MessagesAfter)
	}
	edge, _ := r.MessagesAround(ctx, "s1", 1, 3)
	if !cmp.Equal(ids(edge.Window), []int64{1, 2, 3, 4}) || edge.MessagesBefore != 0 || edge.MessagesAfter != 3 {
		t.Errorf("MessagesAround(1, 3) = %v before %d after %d", ids(edge.Window), edge.MessagesBefore, edge.MessagesAfter)
	}
	if miss, _ := r.MessagesAround(ctx, "s1", 99, 3); len(miss.Window) != 0 || miss.MessagesBefore != 0 {
		t.Errorf("MessagesAround(99) = %+v, want empty", miss)
	}
	v, err := r.AnchoredView(ctx, "s1", 6, 1, 1, []string{"user", "assistant"})
	if err != nil {
		t.Fatal(err)
	}
	// window 5,6,7 with the anchor 6 (a tool message) kept; bookends 1 and 10.
	if !cmp.Equal(ids(v.Window), []int64{5, 6, 7}) || !cmp.Equal(ids(v.BookendStart), []int64{1}) || !cmp.Equal(ids(v.BookendEnd), []int64{10}) {
		t.Errorf("AnchoredView(6) = %v / %v / %v", ids(v.Window), ids(v.BookendStart), ids(v.BookendEnd))
	}
	f, _ := r.AnchoredView(ctx, "s1", 5, 1, 0, []string{"user"})
	if !cmp.Equal(ids(f.Window), []int64{4, 5}) {
		t.Errorf("AnchoredView(5, keep user) window = %v, want the anchor and the user message", ids(f.Window))
	}
}

// TestTopicReads_WithoutTheTables: a state.db that never saw a topic event
// has no topic tables (as Hermes before /topic): the topic reads answer
// none, the unlinked sessions are every telegram session of the user, and
// deleting a session works.
func TestTopicReads_WithoutTheTables(t *testing.T) {
	ctx := context.Background()
	p := openTemp(t)
	h := newHistory()
	h.lane("k1", created("k1", "s1", at(0)))
	mustApply(t, p, h.all)
	r := p.Reader
	var n int
	queryRow(t, p, "SELECT count(*) FROM sqlite_schema WHERE name LIKE 'telegram_dm_topic_%'", nil, &n)
	if n != 0 {
		t.Fatalf("a state.db without topic events has %d topic objects, want 0", n)
	}
	if mode, err := r.TopicMode(ctx, "c1"); err != nil || mode != nil {
		t.Errorf("TopicMode = %v, %v; want nil", mode, err)
	}
	if b, err := r.TopicBindings(ctx, "c1"); err != nil || len(b) != 0 {
		t.Errorf("TopicBindings = %v, %v; want none", b, err)
	}
	unlinked, err := r.UnlinkedTelegramSessions(ctx, "u1", 10)
	if err != nil || len(unlinked) != 1 || unlinked[0]["id"] != "s1" {
		t.Errorf("UnlinkedTelegramSessions = %v, %v; want s1", unlinked, err)
	}
	h.tr("s1", events.TranscriptDeleted{SessionID: "s1", Reason: "requested", At: at(1)})
	mustApply(t, p, h.all[len(h.all)-1:])
}
