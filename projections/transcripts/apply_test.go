package transcripts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hermes/events"
)

const lane = "agent:main:telegram:dm:1"

func TestLaneTransitions(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	h.lane(lane,
		created(lane, "s1", at(0)),
		events.SessionAutoReset{SessionKey: lane, SessionID: "s2", PreviousSessionID: "s1", Reason: events.AutoResetIdle,
			Origin: src("telegram", "u1"), Platform: "telegram", At: at(10)},
		events.SessionReset{SessionID: "s3", PreviousSessionID: "s2", At: at(20)},
		events.Touched{At: at(21)},
		events.SessionSwitched{SessionID: "s1", PreviousSessionID: "s3", At: at(30)},
		events.SessionSwitched{SessionID: "s9", PreviousSessionID: "s1", At: at(40)},
	)
	mustApply(t, p, h.all)

	type row struct {
		Source    string
		UserID    *string
		StartedAt float64
		EndedAt   *float64
		EndReason *string
	}
	get := func(id string) row {
		s := mustSession(t, p.Reader, id)
		return row{s.Source, s.UserID, s.StartedAt, s.EndedAt, s.EndReason}
	}
	sec := func(n int) *float64 { f := unixSeconds(at(n)); return &f }
	want := map[string]row{
		// reopened by the first switch, ended again by the second
		"s1": {"telegram", ptr("u1"), unixSeconds(at(0)), sec(40), ptr(EndSessionSwitch)},
		"s2": {"telegram", ptr("u1"), unixSeconds(at(10)), sec(20), ptr(EndSessionReset)},
		// /new keeps the lane's origin (the event carries none)
		"s3": {"telegram", ptr("u1"), unixSeconds(at(20)), sec(30), ptr(EndSessionSwitch)},
		// a switch to an unknown id creates it, from the lane's origin
		"s9": {"telegram", ptr("u1"), unixSeconds(at(40)), nil, nil},
	}
	for id, w := range want {
		if diff := cmp.Diff(w, get(id)); diff != "" {
			t.Errorf("session %s (-want +got):\n%s", id, diff)
		}
	}
}

func TestSessionCreatedForceNewEndsPrevious(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	c2 := created(lane, "s2", at(5))
	c2.PreviousSessionID, c2.ForceNew = "s1", true
	c2.Origin.UserID = ""
	h.lane(lane, created(lane, "s1", at(0)), c2)
	mustApply(t, p, h.all)
	s1 := mustSession(t, p.Reader, "s1")
	if s1.EndReason == nil || *s1.EndReason != EndSessionReset {
		t.Errorf("s1 end_reason = %v, want session_reset", s1.EndReason)
	}
	if s2 := mustSession(t, p.Reader, "s2"); s2.UserID != nil {
		t.Errorf("s2 user_id = %q, want NULL for an origin without user", *s2.UserID)
	}
}

func TestResetWithoutLaneOriginUsesPreviousSession(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	// s1's row comes from a transcript event only ("unknown"), then a
	// lane that never recorded an origin resets it.
	h.tr("s1", appended("s1", text("user", "hi"), at(0)))
	h.lane(lane, events.SessionReset{SessionID: "s2", PreviousSessionID: "s1", At: at(1)})
	h.lane("other", events.SessionReset{SessionID: "s3", At: at(2)})
	mustApply(t, p, h.all)
	if s := mustSession(t, p.Reader, "s2"); s.Source != "unknown" {
		t.Errorf("s2 source = %q, want unknown (from s1)", s.Source)
	}
	if s := mustSession(t, p.Reader, "s3"); s.Source != "unknown" {
		t.Errorf("s3 source = %q, want unknown", s.Source)
	}
}

func TestFirstEndReasonWinsAndReopen(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	h.lane(lane, created(lane, "s1", at(0)))
	h.tr("s1",
		events.TranscriptEnded{SessionID: "s1", Reason: "compression", At: at(1)},
		events.TranscriptEnded{SessionID: "s1", Reason: "user_exit", At: at(2)},
	)
	mustApply(t, p, h.all)
	s := mustSession(t, p.Reader, "s1")
	if *s.EndReason != "compression" || *s.EndedAt != unixSeconds(at(1)) {
		t.Errorf("end = %v at %v, want compression at %v", *s.EndReason, *s.EndedAt, unixSeconds(at(1)))
	}
	mustApply(t, p, h.tr("s1", events.TranscriptReopened{SessionID: "s1", At: at(3)}))
	if s := mustSession(t, p.Reader, "s1"); s.EndedAt != nil || s.EndReason != nil {
		t.Errorf("after reopen ended_at = %v, end_reason = %v, want NULL", s.EndedAt, s.EndReason)
	}
}

type storedRow struct {
	Content, ToolCalls, ToolName, ToolCallID, FinishReason sql.NullString
	Reasoning, ReasoningContent, ReasoningDetails          sql.NullString
	TokenCount                                             sql.NullInt64
	Timestamp                                              float64
}

func stored(t *testing.T, p *Projection, id int64) storedRow {
	t.Helper()
	var r storedRow
	queryRow(t, p, `SELECT content, tool_calls, tool_name, tool_call_id, finish_reason, reasoning,
		reasoning_content, reasoning_details, token_count, timestamp FROM messages WHERE id = ?`, []any{id},
		&r.Content, &r.ToolCalls, &r.ToolName, &r.ToolCallID, &r.FinishReason, &r.Reasoning,
		&r.ReasoningContent, &r.ReasoningDetails, &r.TokenCount, &r.Timestamp)
	return r
}

func ns(s string) sql.NullString { return sql.NullString{String: s, Valid: true} }

func TestMessageStorageAndCounters(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	msgs := []events.Message{
		text("user", "hello"),
		{Role: "user", Content: raw(`[ {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}} ]`)},
		{Role: "user", Content: raw(`{"a": 1}`)},
		{Role: "assistant", Content: raw(`null`), ToolCalls: raw(`[{"id":"a"},{"id":"b"}]`), FinishReason: "tool_calls",
			TokenCount: ptr(int64(150)), Reasoning: ptr("think"), ReasoningContent: ptr(""), ReasoningDetails: raw(`[{"type": "summary"}]`)},
		{Role: "tool", Content: jsonString("done"), ToolCallID: "a", ToolName: "terminal"},
		{Role: "assistant", Content: jsonString("x"), ToolCalls: raw(`[]`)},          // counts 0, not stored
		{Role: "assistant", Content: jsonString("y"), ToolCalls: raw(`{"id": "c"}`)}, // counts 1, stored
		{Role: "assistant", Content: jsonString("z"), ToolCalls: raw(`{}`)},          // counts 1, not stored
		{Role: "assistant", Content: jsonString("w"), ToolCalls: raw(`null`)},        // counts 0
		{Role: "assistant", Content: raw(`42`), ReasoningDetails: raw(`[]`)},         // number as text
	}
	for i, m := range msgs {
		h.tr("s1", appended("s1", m, at(i)))
	}
	mustApply(t, p, h.all)

	want := []storedRow{
		{Content: ns("hello"), Timestamp: unixSeconds(at(0))},
		{Content: ns("\x00json:" + `[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"x"}}]`), Timestamp: unixSeconds(at(1))},
		{Content: ns("\x00json:" + `{"a":1}`), Timestamp: unixSeconds(at(2))},
		{ToolCalls: ns(`[{"id":"a"},{"id":"b"}]`), FinishReason: ns("tool_calls"), TokenCount: sql.NullInt64{Int64: 150, Valid: true},
			Reasoning: ns("think"), ReasoningContent: ns(""), ReasoningDetails: ns(`[{"type":"summary"}]`), Timestamp: unixSeconds(at(3))},
		{Content: ns("done"), ToolCallID: ns("a"), ToolName: ns("terminal"), Timestamp: unixSeconds(at(4))},
		{Content: ns("x"), Timestamp: unixSeconds(at(5))},
		{Content: ns("y"), ToolCalls: ns(`{"id":"c"}`), Timestamp: unixSeconds(at(6))},
		{Content: ns("z"), Timestamp: unixSeconds(at(7))},
		{Content: ns("w"), Timestamp: unixSeconds(at(8))},
		{Content: ns("42"), Timestamp: unixSeconds(at(9))},
	}
	for i, w := range want {
		if diff := cmp.Diff(w, stored(t, p, int64(i+1))); diff != "" {
			t.Errorf("message %d stored (-want +got):\n%s", i+1, diff)
		}
	}
	s := mustSession(t, p.Reader, "s1")
	if s.Source != "unknown" || s.StartedAt != unixSeconds(at(0)) {
		t.Errorf("implicit session = %q at %v, want unknown at %v", s.Source, s.StartedAt, unixSeconds(at(0)))
	}
	// 2 (list) + 0 ([]) + 1 (object) + 1 ({}) + 0 (null); the tool row adds nothing.
	if s.MessageCount != 10 || s.ToolCallCount != 4 {
		t.Errorf("counts = %d messages, %d tool calls, want 10, 4", s.MessageCount, s.ToolCallCount)
	}

	// The API answers an append with the row id it inserted.
	for i, env := range h.all {
		got, err := p.MessageIDs(context.Background(), env.Position)
		if err != nil {
			t.Fatal(err)
		}
		if want := (MessageRange{SessionID: "s1", FirstID: int64(i + 1), Count: 1}); got != want {
			t.Errorf("MessageIDs(%d) = %+v, want %+v", env.Position, got, want)
		}
	}
	mustApply(t, p, []events.Envelope{h.add(events.GatewayStream, events.DrainStarted{At: at(100)})})
	if _, err := p.MessageIDs(context.Background(), h.pos); err == nil {
		t.Errorf("MessageIDs(gateway event) = nil error, want ErrNotFound")
	}
}

func TestTranscriptRewritten(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	h.lane(lane, created(lane, "s1", at(0)))
	h.tr("s1",
		appended("s1", text("user", "one"), at(1)),
		appended("s1", text("assistant", "two"), at(2)),
		events.TranscriptRewritten{SessionID: "s1", At: at(10), Messages: []events.Message{
			text("user", "one again"),
			{Role: "assistant", Content: raw(`null`), ToolCalls: raw(`[{"id":"a"},{"id":"b"},{"id":"c"}]`)},
			{Role: "tool", Content: jsonString("r"), ToolCallID: "a"},
		}},
	)
	mustApply(t, p, h.all)
	msgs, err := p.Messages(context.Background(), "s1", true)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	var ts []float64
	for _, m := range msgs {
		ids = append(ids, m.ID)
		ts = append(ts, m.Timestamp)
	}
	base := unixSeconds(at(10))
	if diff := cmp.Diff([]int64{3, 4, 5}, ids); diff != "" {
		t.Errorf("ids after rewrite (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float64{base, base + 1e-6, base + 2e-6}, ts); diff != "" {
		t.Errorf("timestamps after rewrite (-want +got):\n%s", diff)
	}
	s := mustSession(t, p.Reader, "s1")
	if s.MessageCount != 3 || s.ToolCallCount != 3 {
		t.Errorf("counts = %d, %d, want 3, 3", s.MessageCount, s.ToolCallCount)
	}
	got, err := p.MessageIDs(context.Background(), h.pos)
	if err != nil || got.FirstID != 3 || got.Count != 3 {
		t.Errorf("MessageIDs(rewrite) = %+v, %v, want first 3, count 3", got, err)
	}
	if diff := cmp.Diff([]int64{3, 4, 5}, got.IDs()); diff != "" {
		t.Errorf("IDs() (-want +got):\n%s", diff)
	}
	// The indexes follow the rewrite.
	res, err := p.Search(context.Background(), SearchQuery{Query: "two"})
	if err != nil || len(res) != 0 {
		t.Errorf("Search(two) after rewrite = %v, %v, want none", res, err)
	}
}

func TestTitleSet(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	h.lane(lane, created(lane, "s1", at(0)), events.SessionReset{SessionID: "s2", PreviousSessionID: "s1", At: at(1)})
	h.tr("s1", events.TitleSet{SessionID: "s1", Title: "Fix Docker Build", At: at(2)})
	h.tr("s2", events.TitleSet{SessionID: "s2", Title: "Fix Docker Build", At: at(3)}) // lost race
	h.tr("s1", events.TitleSet{SessionID: "s1", Title: "Fix Docker Build", At: at(4)}) // its own title again
	h.tr("s9", events.TitleSet{SessionID: "s9", Title: "Nobody", At: at(5)})           // unknown session
	mustApply(t, p, h.all)
	if s := mustSession(t, p.Reader, "s1"); s.Title == nil || *s.Title != "Fix Docker Build" {
		t.Errorf("s1 title = %v, want Fix Docker Build", s.Title)
	}
	if s := mustSession(t, p.Reader, "s2"); s.Title != nil {
		t.Errorf("s2 title = %q, want NULL (taken)", *s.Title)
	}
	if ok, _ := p.SessionExists(context.Background(), "s9"); ok {
		t.Error("a title created session s9")
	}
	mustApply(t, p, h.tr("s1", events.TitleSet{SessionID: "s1", Title: "", At: at(6)}))
	if s := mustSession(t, p.Reader, "s1"); s.Title != nil {
		t.Errorf("s1 title after clearing = %q, want NULL", *s.Title)
	}
}

func TestMetadataUpdated(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	h.lane(lane, created(lane, "parent", at(0)))
	h.tr("child",
		events.SessionMetadataUpdated{SessionID: "child", Model: ptr("m1"), BillingProvider: ptr("openrouter"),
			CostStatus: ptr("estimated"), ModelConfig: ptr(`{"t":1}`), SystemPrompt: ptr("p1"),
			ParentSessionID: ptr("parent"), InputTokens: 10, OutputTokens: 5, CacheReadTokens: 1, CacheWriteTokens: 2,
			ReasoningTokens: 3, APICallCount: 1, EstimatedCostUSD: ptr(0.5), At: at(1)},
		events.SessionMetadataUpdated{SessionID: "child", Model: ptr("m2"), BillingProvider: ptr("other"),
			CostStatus: ptr("actual"), CostSource: ptr("provider"), SystemPrompt: ptr("p2"),
			InputTokens: 1, APICallCount: 2, EstimatedCostUSD: ptr(0.25), ActualCostUSD: ptr(1.0), At: at(2)},
		events.SessionMetadataUpdated{SessionID: "child", PricingVersion: ptr("v3"), At: at(3)},
	)
	mustApply(t, p, h.all)
	s := mustSession(t, p.Reader, "child")
	want := Session{ID: "child", Source: "unknown", StartedAt: unixSeconds(at(1)),
		Model: ptr("m1"), BillingProvider: ptr("openrouter"), CostStatus: ptr("actual"), CostSource: ptr("provider"),
		PricingVersion: ptr("v3"), ModelConfig: ptr(`{"t":1}`), SystemPrompt: ptr("p2"), ParentSessionID: ptr("parent"),
		InputTokens: 11, OutputTokens: 5, CacheReadTokens: 1, CacheWriteTokens: 2, ReasoningTokens: 3, APICallCount: 3,
		EstimatedCostUSD: ptr(0.75), ActualCostUSD: ptr(1.0)}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("session after metadata (-want +got):\n%s", diff)
	}
	// A parent that does not exist is stored as NULL; "" clears it.
	mustApply(t, p, h.tr("child", events.SessionMetadataUpdated{SessionID: "child", ParentSessionID: ptr("ghost"), At: at(4)}))
	if s := mustSession(t, p.Reader, "child"); s.ParentSessionID != nil {
		t.Errorf("parent = %q, want NULL for a missing parent", *s.ParentSessionID)
	}
}

func TestClearedAndDeleted(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	h.lane(lane, created(lane, "root", at(0)))
	h.tr("mid", events.SessionMetadataUpdated{SessionID: "mid", ParentSessionID: ptr("root"), At: at(1)})
	h.tr("leaf", events.SessionMetadataUpdated{SessionID: "leaf", ParentSessionID: ptr("mid"), At: at(2)})
	h.tr("mid",
		appended("mid", events.Message{Role: "assistant", Content: jsonString("a"), ToolCalls: raw(`[{"id":"x"}]`)}, at(3)),
		events.TranscriptCleared{SessionID: "mid", At: at(4)},
	)
	mustApply(t, p, h.all)
	s := mustSession(t, p.Reader, "mid")
	if s.MessageCount != 0 || s.ToolCallCount != 0 {
		t.Errorf("counts after clear = %d, %d, want 0, 0", s.MessageCount, s.ToolCallCount)
	}
	mustApply(t, p, h.tr("mid",
		appended("mid", text("user", "again"), at(5)),
		events.TranscriptDeleted{SessionID: "mid", Reason: events.DeleteRequested, At: at(6)},
	))
	if _, err := p.Session(context.Background(), "mid"); err == nil {
		t.Error("Session(mid) after delete = nil error, want ErrNotFound")
	}
	if s := mustSession(t, p.Reader, "leaf"); s.ParentSessionID != nil {
		t.Errorf("leaf parent = %q, want NULL (orphaned)", *s.ParentSessionID)
	}
	if s := mustSession(t, p.Reader, "root"); s.ParentSessionID != nil {
		t.Error("root gained a parent")
	}
	var n int
	queryRow(t, p, "SELECT count(*) FROM messages WHERE session_id = 'mid'", nil, &n)
	if n != 0 {
		t.Errorf("%d messages left of a deleted session", n)
	}
	queryRow(t, p, "SELECT count(*) FROM messages_fts", nil, &n)
	if n != 0 {
		t.Errorf("%d FTS rows left of a deleted session", n)
	}
}

// TestLargeBatchMapsEveryAppend applies more messages in one batch than
// one INSERT takes (maxMessageChunk, smaller for the small corpus), mixed
// with events that must see them, and checks that every append maps to
// its own row.
func TestLargeBatchMapsEveryAppend(t *testing.T) {
	defer func(old int) { maxMessageChunk = old }(maxMessageChunk)
	maxMessageChunk = sized(256, 2048)
	n := maxMessageChunk * 3 / 2 // 1.5 INSERTs
	p := openTemp(t)
	h := newHistory()
	h.lane(lane, created(lane, "s1", at(0)))
	want := map[uint64]string{} // position → content
	for i := range n {
		body := fmt.Sprintf("message %d", i)
		env := h.tr("s1", appended("s1", text("user", body), at(1)))[0]
		want[env.Position] = body
		if i == n/2 {
			// Seen by the clear: the n/2+1 messages so far go, the rest stay.
			h.tr("s1", events.TranscriptCleared{SessionID: "s1", At: at(2)})
		}
		if i%(n/4) == 0 {
			h.lane(lane, events.Touched{At: at(1)})
		}
	}
	mustApply(t, p, h.all)
	ctx := context.Background()
	kept := int64(n - n/2 - 1)
	s := mustSession(t, p.Reader, "s1")
	if s.MessageCount != kept {
		t.Errorf("message_count = %d, want %d (appended after the clear)", s.MessageCount, kept)
	}
	msgs, err := p.Messages(ctx, "s1", true)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]string{}
	for _, m := range msgs {
		byID[m.ID], _ = asString(m.Content)
	}
	var prev int64
	for _, env := range h.all {
		body, ok := want[env.Position]
		if !ok {
			continue
		}
		r, err := p.MessageIDs(ctx, env.Position)
		if err != nil {
			t.Fatalf("MessageIDs(%d) error = %v", env.Position, err)
		}
		if r.Count != 1 || r.FirstID != prev+1 {
			t.Fatalf("MessageIDs(%d) = %+v, want the id after %d", env.Position, r, prev)
		}
		prev = r.FirstID
		if got, kept := byID[r.FirstID]; kept && got != body {
			t.Fatalf("position %d maps to row %d holding %q, want %q", env.Position, r.FirstID, got, body)
		}
	}
	if last := fmt.Sprintf("message %d", n-1); int64(len(byID)) != kept || byID[prev] != last {
		t.Errorf("%d rows kept, last %q, want %d ending with %s", len(byID), byID[prev], kept, last)
	}
}

// TestBatchAppliedAgainAfterFailure: the stream versions and session rows
// the live path holds between batches are dropped with a batch that rolls
// back, so the batch applied again writes everything it holds.
func TestBatchAppliedAgainAfterFailure(t *testing.T) {
	h := newHistory()
	// given: a lane, its session and a message, committed.
	first := h.lane(lane, created(lane, "s1", at(0)))
	first = append(first, h.tr("s1", appended("s1", text("user", "hello"), at(1)))...)
	// second batch: more for s1, and a session named only by its messages.
	big := strings.Repeat("padding that fills pages ", 80)
	var second []events.Envelope
	for i := range sized(40, 300) {
		second = append(second, h.tr("s1", appended("s1", text("user", fmt.Sprintf("s1 %d %s", i, big)), at(2)))...)
		second = append(second, h.tr("s2", appended("s2", text("user", fmt.Sprintf("s2 %d %s", i, big)), at(2)))...)
	}

	p := openTemp(t)
	mustApply(t, p, first)
	var pages int64
	queryRow(t, p, "PRAGMA page_count", nil, &pages)
	// when: the second batch fails (the file may not grow), then is
	// applied again once it may.
	p.SetMaxPageCount(pages)
	if err := p.Apply(context.Background(), second); !errors.Is(err, events.ErrStorageFull) {
		t.Fatalf("Apply() with a full file = %v, want ErrStorageFull", err)
	}
	p.SetMaxPageCount(0)
	mustApply(t, p, second)

	// then: the file is the one a projection that never failed writes.
	want := openTemp(t)
	mustApply(t, want, first)
	mustApply(t, want, second)
	if diff := cmp.Diff(dumpOf(t, want.Reader), dumpOf(t, p.Reader)); diff != "" {
		t.Errorf("dump after a failed batch applied again (-want +got):\n%s", diff)
	}
}

// TestSessionEventsLeaveGatheredMessagesPending: events that change
// session rows only (lane, title, metadata, end and reopen events) do not
// have the messages appended before them in the batch inserted first, so
// the batch writes one FTS5 segment per index, however they interleave.
func TestSessionEventsLeaveGatheredMessagesPending(t *testing.T) {
	// given: a batch where every message is followed by session events
	h := newHistory()
	h.lane(lane, created(lane, "s1", at(0)))
	for i := range 8 {
		h.tr("s1", appended("s1", text("user", fmt.Sprintf("message %d", i)), at(i)))
		h.tr("s1", events.SessionMetadataUpdated{SessionID: "s1", InputTokens: 10, APICallCount: 1, At: at(i)})
		h.tr("s1", events.TitleSet{SessionID: "s1", Title: fmt.Sprintf("title %d", i), At: at(i)})
		h.tr("s1", events.TranscriptEnded{SessionID: "s1", Reason: "user_exit", At: at(i)})
		h.tr("s1", events.TranscriptReopened{SessionID: "s1", At: at(i)})
	}
	h.lane(lane, events.SessionReset{SessionID: "s2", PreviousSessionID: "s1", At: at(9)})

	// when: it is applied
	p := openTemp(t)
	mustApply(t, p, h.all)

	// then: each FTS index got one segment, holding every message
	for _, table := range []string{"messages_fts", "messages_fts_trigram"} {
		var segments int
		queryRow(t, p, "SELECT count(DISTINCT segid) FROM "+table+"_idx", nil, &segments)
		if segments != 1 {
			t.Errorf("%s has %d segments after one batch, want 1", table, segments)
		}
	}
	s := mustSession(t, p.Reader, "s1")
	if s.MessageCount != 8 || s.InputTokens != 80 {
		t.Errorf("s1 message_count, input_tokens = %d, %d; want 8, 80", s.MessageCount, s.InputTokens)
	}
}
