package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"hermes/commands"
	"hermes/domain"
	"hermes/events"
)

// laneIndex says every session exists and is on the lane key.
type laneIndex struct {
	totalsIndex
	key string
}

func (x laneIndex) LaneOfSession(context.Context, string) (string, error) { return x.key, nil }

// pausingStore is a store whose next append to a stream named with prefix
// (default: a transcript) first runs pause (once): the process stopped
// between its checks and its write.
type pausingStore struct {
	events.Store
	prefix string
	once   sync.Once
	pause  func()
}

func (p *pausingStore) Append(ctx context.Context, stream string, expected events.ExpectedVersion, proposed []events.Proposed) (events.AppendResult, error) {
	prefix := p.prefix
	if prefix == "" {
		prefix = events.TranscriptStream("")
	}
	if strings.HasPrefix(stream, prefix) && p.pause != nil {
		p.once.Do(p.pause)
	}
	return p.Store.Append(ctx, stream, expected, proposed)
}

func userMessage(text string) events.Message {
	content, _ := json.Marshal(text)
	return events.Message{Role: "assistant", Content: content}
}

// TestFencedWrites_RefusedAfterAdoption: node "paused" opens a turn, its
// lease runs out and n2 adopts its run; what "paused" writes for that turn
// afterwards (the rest of the reply, the completion) is refused with
// ErrTurnNotOpen and appends nothing, while unfenced writes still pass. A
// turn start over an open turn is refused with ErrTurnBusy.
func TestFencedWrites_RefusedAfterAdoption(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, "paused", "n2")
	key := openTurnOn(t, c, "paused", "fenced-1")
	paused := c.nodes["paused"]
	lane, _, err := paused.Lane(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	turn, sid := lane.OpenTurnID, lane.SessionID
	tc := paused.Transcripts(laneIndex{key: key})

	if _, _, err := c.nodes["n2"].StartTurn(ctx, commands.StartTurn{Key: key, TurnID: "other"}); !errors.Is(err, domain.ErrTurnBusy) {
		t.Fatalf("StartTurn(other) on a lane whose turn %s is open = %v, want ErrTurnBusy", turn, err)
	}
	if _, err := tc.AppendMessage(ctx, commands.AppendMessage{SessionID: sid, Message: userMessage("part 1"), TurnID: turn}); err != nil {
		t.Fatalf("AppendMessage(turn %s) while the turn is open = %v", turn, err)
	}

	c.advance(leaseTTL + 1)
	turns, err := c.nodes["n2"].OpenTurns(ctx, []string{key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.nodes["n2"].AdoptDeadRuns(ctx, commands.AdoptDeadRuns{Turns: turns, TTL: leaseTTL}); err != nil {
		t.Fatal(err)
	}
	head, err := c.store.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}

	_, err = tc.AppendMessage(ctx, commands.AppendMessage{SessionID: sid, Message: userMessage("part 2"), TurnID: turn})
	if !errors.Is(err, domain.ErrTurnNotOpen) {
		t.Errorf("AppendMessage(turn %s) after the adoption = %v, want ErrTurnNotOpen", turn, err)
	}
	_, err = paused.CompleteTurn(ctx, commands.CompleteTurn{Key: key, Outcome: domain.TurnOutcome{TurnID: turn, OutputTokens: 7}})
	if !errors.Is(err, domain.ErrTurnNotOpen) {
		t.Errorf("CompleteTurn(turn %s) after the adoption = %v, want ErrTurnNotOpen", turn, err)
	}
	if after, _ := c.store.Head(ctx); after != head {
		t.Errorf("the refused writes moved the head %d -> %d, want nothing appended", head, after)
	}
	if n := c.count(t, events.LaneStream(key), func(e events.Event) bool { _, ok := e.(events.TurnCompleted); return ok }); n != 0 {
		t.Errorf("lane holds %d turn_completed, want 0", n)
	}
	isMessage := func(e events.Event) bool { _, ok := e.(events.MessageAppended); return ok }
	if n := c.count(t, events.TranscriptStream(sid), isMessage); n != 1 {
		t.Errorf("transcript holds %d messages, want the 1 written while the turn was open", n)
	}
	// Unfenced writes (no turn id) are not the fence's business.
	if _, err := tc.AppendMessage(ctx, commands.AppendMessage{SessionID: sid, Message: userMessage("note")}); err != nil {
		t.Errorf("AppendMessage without a turn id = %v, want it stored", err)
	}
	// The lane is free: a new turn starts on it.
	if _, _, err := c.nodes["n2"].StartTurn(ctx, commands.StartTurn{Key: key, TurnID: "next"}); err != nil {
		t.Errorf("StartTurn(next) after the adoption = %v", err)
	}
}

// TestFencedMessage_PausedBetweenCheckAndAppend: the appending node checks
// the lane (the turn is open), then stops before its append reaches the
// store; meanwhile another node adopts the turn. The append, arriving
// after the interruption, is refused and the transcript holds no message
// of the adopted turn after it.
func TestFencedMessage_PausedBetweenCheckAndAppend(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, "paused", "n2")
	key := openTurnOn(t, c, "paused", "fenced-2")
	lane, _, err := c.nodes["paused"].Lane(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	turn, sid := lane.OpenTurnID, lane.SessionID
	ps := &pausingStore{Store: c.store}
	ps.pause = func() {
		c.advance(leaseTTL + 1)
		turns, err := c.nodes["n2"].OpenTurns(ctx, []string{key})
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := c.nodes["n2"].AdoptDeadRuns(ctx, commands.AdoptDeadRuns{Turns: turns, TTL: leaseTTL}); err != nil {
			t.Error(err)
		}
	}
	paused := commands.NewHandler(ps, idleConfig(), commands.WithClock(c.clocks["paused"].Now), commands.WithNode("paused"))
	tc := paused.Transcripts(laneIndex{key: key})
	_, err = tc.AppendMessage(ctx, commands.AppendMessage{SessionID: sid, Message: userMessage("late"), TurnID: turn})
	if !errors.Is(err, domain.ErrTurnNotOpen) {
		t.Errorf("AppendMessage(turn %s) that reached the store after the adoption = %v, want ErrTurnNotOpen", turn, err)
	}
	if n := c.count(t, events.LaneStream(key), func(e events.Event) bool { _, ok := e.(events.TurnInterrupted); return ok }); n != 1 {
		t.Fatalf("lane holds %d turn_interrupted, want the adoption's 1", n)
	}
	if n := c.count(t, events.TranscriptStream(sid), func(e events.Event) bool { _, ok := e.(events.MessageAppended); return ok }); n != 0 {
		t.Errorf("transcript holds %d messages of the adopted turn, want 0", n)
	}
	if n := c.count(t, events.TranscriptStream(sid), func(e events.Event) bool { f, ok := e.(events.TurnFenced); return ok && f.TurnID == turn }); n != 1 {
		t.Errorf("transcript holds %d turn_fenced of %s, want 1", n, turn)
	}
}

// TestFencedWrites_RetryAfterTheTurnEnded: a completion (and a message)
// retried with its Idempotency-Key after the first attempt went through
// answers as the first did, though the turn is no longer open.
func TestFencedWrites_RetryAfterTheTurnEnded(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, "n1")
	key := openTurnOn(t, c, "n1", "retry-1")
	h := c.nodes["n1"]
	lane, _, err := h.Lane(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	turn, sid := lane.OpenTurnID, lane.SessionID
	tc := h.Transcripts(laneIndex{key: key})
	msg := commands.AppendMessage{SessionID: sid, Message: userMessage("reply"), TurnID: turn, CommandID: "msg-1"}
	first, err := tc.AppendMessage(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	done := commands.CompleteTurn{Key: key, Outcome: domain.TurnOutcome{TurnID: turn, OutputTokens: 3}, CommandID: "done-1"}
	if _, err := h.CompleteTurn(ctx, done); err != nil {
		t.Fatal(err)
	}
	again, err := h.CompleteTurn(ctx, done)
	if err != nil {
		t.Errorf("CompleteTurn retried after it went through = %v, want the first answer", err)
	}
	if len(again.Events) != 1 {
		t.Errorf("retried CompleteTurn events = %v, want the original turn_completed", again.Events)
	}
	retried, err := tc.AppendMessage(ctx, msg)
	if err != nil || retried.MessagePosition != first.MessagePosition {
		t.Errorf("AppendMessage retried after the turn ended = %+v, %v; want position %d", retried, err, first.MessagePosition)
	}
	if _, err := h.CompleteTurn(ctx, commands.CompleteTurn{Key: key, Outcome: domain.TurnOutcome{TurnID: turn}, CommandID: "done-2"}); !errors.Is(err, domain.ErrTurnNotOpen) {
		t.Errorf("a second completion of %s (another key) = %v, want ErrTurnNotOpen", turn, err)
	}
	if n := c.count(t, events.LaneStream(key), func(e events.Event) bool { _, ok := e.(events.TurnCompleted); return ok }); n != 1 {
		t.Errorf("lane holds %d turn_completed, want 1", n)
	}
	if n := c.count(t, events.TranscriptStream(sid), func(e events.Event) bool { _, ok := e.(events.MessageAppended); return ok }); n != 1 {
		t.Errorf("transcript holds %d messages, want 1", n)
	}
}

// TestFencedCompletion_LaneResetMeanwhile: a completion fences its turn's
// transcript, then, before its lane append, another node resets the lane
// (the turn stays open on the new session). The completion fences the new
// session's transcript too before it closes the turn, so a message of the
// turn to the new session cannot land after the completion.
func TestFencedCompletion_LaneResetMeanwhile(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, "n1", "n2")
	key := openTurnOn(t, c, "n1", "fenced-3")
	lane, _, err := c.nodes["n1"].Lane(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	turn := lane.OpenTurnID
	ps := &pausingStore{Store: c.store, prefix: events.LaneStream("")}
	ps.pause = func() {
		if _, err := c.nodes["n2"].ResetSession(ctx, commands.ResetSession{Key: key}); err != nil {
			t.Error(err)
		}
	}
	closer := commands.NewHandler(ps, idleConfig(), commands.WithClock(c.clocks["n1"].Now), commands.WithNode("n1"))
	if _, err := closer.CompleteTurn(ctx, commands.CompleteTurn{Key: key, Outcome: domain.TurnOutcome{TurnID: turn}}); err != nil {
		t.Fatalf("CompleteTurn(%s) = %v", turn, err)
	}
	after, _, err := c.nodes["n2"].Lane(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if after.SessionID == lane.SessionID || after.TurnOpen() {
		t.Fatalf("lane after = session %s, open turn %q; want a new session and the turn closed", after.SessionID, after.OpenTurnID)
	}
	for _, sid := range []string{lane.SessionID, after.SessionID} {
		if n := c.count(t, events.TranscriptStream(sid), func(e events.Event) bool { f, ok := e.(events.TurnFenced); return ok && f.TurnID == turn }); n != 1 {
			t.Errorf("transcript of %s holds %d turn_fenced of %s, want 1", sid, n, turn)
		}
	}
	tc := c.nodes["n2"].Transcripts(laneIndex{key: key})
	if _, err := tc.AppendMessage(ctx, commands.AppendMessage{SessionID: after.SessionID, Message: userMessage("late"), TurnID: turn}); !errors.Is(err, domain.ErrTurnNotOpen) {
		t.Errorf("AppendMessage(turn %s) to the new session after the completion = %v, want ErrTurnNotOpen", turn, err)
	}
}
