package transcripts

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hermes/events"
)

func TestResolveSessionID(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	for i, id := range []string{"20260301_090000_aaaa1111", "20260301_090000_aaaa2222", "20260302_100000_bbbb3333", "x_y", "x%y"} {
		key := "k" + id
		h.lane(key, created(key, id, at(i)))
	}
	mustApply(t, p, h.all)
	ctx := context.Background()
	for _, tc := range []struct{ in, want string }{
		{"20260301_090000_aaaa1111", "20260301_090000_aaaa1111"},
		{"20260302", "20260302_100000_bbbb3333"},
		{"20260301_090000_aaaa2", "20260301_090000_aaaa2222"},
		{"x_", "x_y"}, // "_" is literal
		{"x%", "x%y"}, // "%" is literal
	} {
		got, err := p.ResolveSessionID(ctx, tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ResolveSessionID(%q) = %q, %v, want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"20260301", "zzz", "x"} {
		if got, err := p.ResolveSessionID(ctx, in); !errors.Is(err, ErrNotFound) {
			t.Errorf("ResolveSessionID(%q) = %q, %v, want ErrNotFound (ambiguous or none)", in, got, err)
		}
	}
	if ok, err := p.SessionExists(ctx, "x_y"); !ok || err != nil {
		t.Errorf("SessionExists(x_y) = %v, %v", ok, err)
	}
	if ok, err := p.SessionExists(ctx, "x"); ok || err != nil {
		t.Errorf("SessionExists(x) = %v, %v", ok, err)
	}
}

func TestLineage(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	link := func(child, parent string, n int) {
		h.lane("k"+child, created("k"+child, child, at(n)))
		if parent != "" {
			h.tr(child, events.SessionMetadataUpdated{SessionID: child, ParentSessionID: ptr(parent), At: at(n)})
		}
	}
	link("root", "", 0)
	link("a", "root", 1)
	link("b", "root", 2)
	link("a1", "a", 3)
	link("lone", "", 4)
	h.tr("a1", events.TitleSet{SessionID: "a1", Title: "deep", At: at(5)})
	mustApply(t, p, h.all)
	l, err := p.Lineage(context.Background(), "a1")
	if err != nil {
		t.Fatal(err)
	}
	var anc []string
	for _, n := range l.Ancestors {
		anc = append(anc, n.ID)
	}
	if diff := cmp.Diff([]string{"a1", "a", "root"}, anc); diff != "" {
		t.Errorf("ancestors of a1 (-want +got):\n%s", diff)
	}
	if l.Ancestors[0].Title == nil || *l.Ancestors[0].Title != "deep" || *l.Ancestors[0].ParentSessionID != "a" {
		t.Errorf("ancestor a1 = %+v", l.Ancestors[0])
	}
	l, err = p.Lineage(context.Background(), "root")
	if err != nil {
		t.Fatal(err)
	}
	var desc []string
	for _, n := range l.Descendants {
		desc = append(desc, n.ID)
	}
	if diff := cmp.Diff([]string{"root", "a", "b", "a1"}, desc); diff != "" {
		t.Errorf("descendants of root (-want +got):\n%s", diff)
	}
	if _, err := p.Lineage(context.Background(), "missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Lineage(missing) error = %v, want ErrNotFound", err)
	}
	// A loop of parent links ends.
	mustApply(t, p, h.tr("root", events.SessionMetadataUpdated{SessionID: "root", ParentSessionID: ptr("a1"), At: at(9)}))
	if l, err = p.Lineage(context.Background(), "a1"); err != nil || len(l.Ancestors) != 3 {
		t.Errorf("Lineage(a1) in a loop = %+v, %v, want 3 ancestors", l.Ancestors, err)
	}
	if conv, err := p.Conversation(context.Background(), "a1", true); err != nil || len(conv) != 0 {
		t.Errorf("Conversation(a1, ancestors) in a loop = %v, %v", conv, err)
	}
}

func TestRecent(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	long := "first line\r\nsecond line that goes on and on and on until it is well past sixty characters"
	h.lane("k1", created("k1", "old", at(0)))
	h.tr("old",
		appended("old", text("assistant", "hello"), at(1)),
		appended("old", text("user", long), at(2)),
		appended("old", text("user", "later"), at(3)),
	)
	h.lane("k2", created("k2", "new", at(10)))
	h.tr("new", appended("new", text("user", "  short  "), at(11)))
	h.lane("k3", created("k3", "empty", at(20)))
	mustApply(t, p, h.all)
	got, err := p.Recent(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID         string
		Preview    string
		LastActive float64
	}
	var rows []row
	for _, r := range got {
		rows = append(rows, row{r.ID, r.Preview, r.LastActive})
	}
	cut := strings.ReplaceAll(long, "\r\n", "  ")[:60] + "..."
	want := []row{
		{"empty", "", unixSeconds(at(20))},
		{"new", "short", unixSeconds(at(11))},
		{"old", cut, unixSeconds(at(3))},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("Recent (-want +got):\n%s", diff)
	}
	if got, _ := p.Recent(context.Background(), 1); len(got) != 1 {
		t.Errorf("Recent(1) = %d rows", len(got))
	}
}

func TestTokenStats(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	meta := func(id, model string, in, out int64, cost *float64) {
		h.tr(id, events.SessionMetadataUpdated{SessionID: id, Model: ptr(model), InputTokens: in, OutputTokens: out,
			EstimatedCostUSD: cost, At: at(0)})
	}
	meta("a", "cheap", 10, 1, ptr(0.25))
	meta("b", "cheap", 20, 2, ptr(0.5))
	meta("c", "dear", 5, 5, ptr(3.0))
	meta("d", "free", 1, 1, nil)
	h.tr("e", events.SessionMetadataUpdated{SessionID: "e", InputTokens: 99, At: at(0)}) // no model
	mustApply(t, p, h.all)
	got, err := p.TokenStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []ModelUsage{
		{Model: "dear", SessionCount: 1, TotalInput: 5, TotalOutput: 5, TotalCost: ptr(3.0)},
		{Model: "cheap", SessionCount: 2, TotalInput: 30, TotalOutput: 3, TotalCost: ptr(0.75)},
		{Model: "free", SessionCount: 1, TotalInput: 1, TotalOutput: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TokenStats (-want +got):\n%s", diff)
	}
}

func TestExport(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	h.lane("k1", created("k1", "s1", at(0)))
	e := created("k2", "s2", at(10))
	e.Platform = "discord"
	h.lane("k2", e)
	turns(h, "s1", "one", "two")
	h.tr("s1", events.TurnsRewound{SessionID: "s1", TargetMessageID: 3, TurnsUndone: 1, At: at(20)})
	mustApply(t, p, h.all)
	ctx := context.Background()
	ex, err := p.ExportSession(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if ex.ID != "s1" || ex.RewindCount != 1 || len(ex.Messages) != 2 {
		t.Errorf("ExportSession(s1) = %s with %d messages, rewind_count %d, want s1, 2 active, 1", ex.ID, len(ex.Messages), ex.RewindCount)
	}
	if _, err := p.ExportSession(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ExportSession(nope) error = %v, want ErrNotFound", err)
	}
	all, err := p.ExportAll(ctx, "")
	if err != nil || len(all) != 2 || all[0].ID != "s2" {
		t.Errorf("ExportAll() = %d sessions (first %v), %v, want s2 (most recently active) then s1", len(all), all, err)
	}
	tg, err := p.ExportAll(ctx, "telegram")
	if err != nil || len(tg) != 1 || tg[0].ID != "s1" {
		t.Errorf("ExportAll(telegram) = %v, %v, want s1", tg, err)
	}
}

func TestPrunableSessions(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	day := 24 * time.Hour
	start := func(key, id, platform string, when time.Time) {
		e := created(key, id, when)
		e.Platform = platform
		h.lane(key, e)
	}
	start("k1", "old-ended", "telegram", t0)
	start("k2", "old-open", "telegram", t0.Add(time.Hour))
	start("k3", "old-ended-cli", "cli", t0.Add(2*time.Hour))
	start("k4", "new-ended", "telegram", t0.Add(80*day))
	for _, id := range []string{"old-ended", "old-ended-cli", "new-ended"} {
		// Ended long after they started: age counts from the start.
		h.tr(id, events.TranscriptEnded{SessionID: id, Reason: "user_exit", At: t0.Add(85 * day)})
	}
	mustApply(t, p, h.all)
	now := t0.Add(95 * day)
	got, err := p.PrunableSessions(context.Background(), 90*day, "", now)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"old-ended", "old-ended-cli"}, got); diff != "" {
		t.Errorf("PrunableSessions(90d) (-want +got):\n%s", diff)
	}
	got, err = p.PrunableSessions(context.Background(), 90*day, "telegram", now)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"old-ended"}, got); diff != "" {
		t.Errorf("PrunableSessions(90d, telegram) (-want +got):\n%s", diff)
	}
}
