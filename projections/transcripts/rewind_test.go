package transcripts

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hermes/events"
)

// turns appends user/assistant pairs: ids 1,2 for turn one, 3,4 for two…
func turns(h *history, id string, texts ...string) {
	for i, s := range texts {
		h.tr(id,
			appended(id, text("user", s), at(2*i)),
			appended(id, text("assistant", "re: "+s), at(2*i+1)),
		)
	}
}

func TestRewind(t *testing.T) {
	p := openTemp(t)
	ctx := context.Background()
	h := newHistory()
	h.lane(lane, created(lane, "s1", at(0)))
	turns(h, "s1", "deploy the stack", "check the logs", "restart nginx")
	mustApply(t, p, h.all)

	// /rewind 2: two turns back is the user message "check the logs" (id 3).
	rw, err := p.RewindTarget(ctx, "s1", 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Rewind{TargetID: 3, TurnsUndone: 2, TargetText: "check the logs"}); rw != want {
		t.Fatalf("RewindTarget(s1, 2) = %+v, want %+v", rw, want)
	}
	mustApply(t, p, h.tr("s1", events.TurnsRewound{SessionID: "s1", TargetMessageID: rw.TargetID, TurnsUndone: rw.TurnsUndone, At: at(50)}))

	// The target and everything after it are hidden, kept for audit.
	active, err := p.Messages(ctx, "s1", false)
	if err != nil {
		t.Fatal(err)
	}
	all, err := p.Messages(ctx, "s1", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(active) != 2 || len(all) != 6 || all[2].Active || !all[1].Active {
		t.Fatalf("after rewind: %d active, %d in all, want 2 and 6 (ids ≥ 3 inactive)", len(active), len(all))
	}
	conv := conversationJSON(t, p.Reader, "s1", false)
	if diff := cmp.Diff([]string{`{"role":"user","content":"deploy the stack"}`, `{"role":"assistant","content":"re: deploy the stack"}`}, conv); diff != "" {
		t.Errorf("Conversation after rewind (-want +got):\n%s", diff)
	}
	for _, q := range []string{"logs", "nginx"} {
		if res, err := p.Search(ctx, SearchQuery{Query: q}); err != nil || len(res) != 0 {
			t.Errorf("Search(%q) after rewind = %d results, %v, want none", q, len(res), err)
		}
	}
	res, err := p.Search(ctx, SearchQuery{Query: "deploy"})
	if err != nil || len(res) != 2 {
		t.Fatalf("Search(deploy) = %d results, %v, want 2", len(res), err)
	}
	if s := mustSession(t, p.Reader, "s1"); s.RewindCount != 1 {
		t.Errorf("rewind_count = %d, want 1", s.RewindCount)
	}

	// Rewinding again to a hidden message changes no row but still counts.
	before := dumpOf(t, p.Reader)
	mustApply(t, p, h.tr("s1", events.TurnsRewound{SessionID: "s1", TargetMessageID: 3, TurnsUndone: 1, At: at(60)}))
	if s := mustSession(t, p.Reader, "s1"); s.RewindCount != 2 {
		t.Errorf("rewind_count after a no-op rewind = %d, want 2", s.RewindCount)
	}
	after := dumpOf(t, p.Reader)
	if strings.Count(before, "\n") != strings.Count(after, "\n") {
		t.Errorf("a no-op rewind changed rows")
	}

	// New turns after a rewind are active again.
	mustApply(t, p, h.tr("s1", appended("s1", text("user", "tail the logs instead"), at(70))))
	recent, err := p.RecentUserMessages(ctx, "s1", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []UserMessage{
		{ID: 7, Timestamp: unixSeconds(at(70)), Preview: "tail the logs instead"},
		{ID: 1, Timestamp: unixSeconds(at(0)), Preview: "deploy the stack"},
	}
	if diff := cmp.Diff(want, recent); diff != "" {
		t.Errorf("RecentUserMessages (-want +got):\n%s", diff)
	}
}

func TestRewindTargetRules(t *testing.T) {
	p := openTemp(t)
	ctx := context.Background()
	h := newHistory()
	turns(h, "s1", "one", "two", "three")
	h.tr("s1", appended("s1", events.Message{Role: "user",
		Content: raw(`[{"type":"text","text":"look at"},{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"this"}]`)}, at(10)))
	h.tr("empty", appended("empty", text("assistant", "no user here"), at(0)))
	mustApply(t, p, h.all)
	for _, tc := range []struct {
		n    int
		want Rewind
	}{
		{0, Rewind{TargetID: 7, TurnsUndone: 1, TargetText: "look at\nthis"}},  // n < 1 is 1
		{-3, Rewind{TargetID: 7, TurnsUndone: 1, TargetText: "look at\nthis"}}, // n < 1 is 1
		{2, Rewind{TargetID: 5, TurnsUndone: 2, TargetText: "three"}},
		{4, Rewind{TargetID: 1, TurnsUndone: 4, TargetText: "one"}},
		{50, Rewind{TargetID: 1, TurnsUndone: 4, TargetText: "one"}}, // past the oldest: the oldest
	} {
		got, err := p.RewindTarget(ctx, "s1", tc.n)
		if err != nil || got != tc.want {
			t.Errorf("RewindTarget(s1, %d) = %+v, %v, want %+v", tc.n, got, err, tc.want)
		}
	}
	for _, id := range []string{"empty", "missing"} {
		if _, err := p.RewindTarget(ctx, id, 1); !errors.Is(err, ErrNoUserMessages) {
			t.Errorf("RewindTarget(%s) error = %v, want ErrNoUserMessages", id, err)
		}
	}
}

func TestRecentUserMessagesPreview(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	long := strings.Repeat("word ", 30)
	h.tr("s1",
		appended("s1", text("user", "line one\n\n  line\ttwo "), at(0)),
		appended("s1", text("user", long), at(1)),
		appended("s1", events.Message{Role: "user", Content: raw(`[{"type":"image_url","image_url":{"url":"u"}}]`)}, at(2)),
	)
	mustApply(t, p, h.all)
	got, err := p.RecentUserMessages(context.Background(), "s1", 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []UserMessage{
		{ID: 3, Timestamp: unixSeconds(at(2)), Preview: "[multimodal content]"},
		{ID: 2, Timestamp: unixSeconds(at(1)), Preview: strings.TrimSpace(long)[:77] + "..."},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RecentUserMessages(limit 2) (-want +got):\n%s", diff)
	}
	all, err := p.RecentUserMessages(context.Background(), "s1", 10)
	if err != nil || len(all) != 3 || all[2].Preview != "line one line two" {
		t.Errorf("RecentUserMessages = %+v, %v, want the first preview %q", all, err, "line one line two")
	}
}
