package transcripts

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"hermes/events"
)

// flagSet reports whether a flag was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

var (
	propLanes    = []string{"agent:main:telegram:dm:1", "agent:main:discord:group:2", "agent:main:cli:dm:3"}
	propSessions = []string{"s0", "s1", "s2", "s3", "s4", "s5"}
	propWords    = []string{"docker", "deploy", "记忆断裂", "完成", "100%", "chat-send", "hello world", "<memory-context>x</memory-context> hi", ""}
)

func drawJSONContent(t *rapid.T, label string) json.RawMessage {
	word := rapid.SampledFrom(propWords).Draw(t, label+" word")
	switch rapid.IntRange(0, 5).Draw(t, label+" kind") {
	case 0:
		return raw(`null`)
	case 1:
		return raw(fmt.Sprintf(`[{"type":"text","text":%s},{"type":"image_url","image_url":{"url":"u"}}]`, jsonString(word)))
	case 2:
		return raw(fmt.Sprintf(`{"note": %s}`, jsonString(word)))
	default:
		return jsonString(word)
	}
}

func drawMessage(t *rapid.T) events.Message {
	m := events.Message{
		Role:    rapid.SampledFrom([]string{"user", "assistant", "tool", "system"}).Draw(t, "role"),
		Content: drawJSONContent(t, "content"),
	}
	switch rapid.IntRange(0, 4).Draw(t, "tool calls") {
	case 0:
		m.ToolCalls = raw(`[{"id":"c1","function":{"name":"terminal","arguments":"{}"}}]`)
	case 1:
		m.ToolCalls = raw(`[]`)
	case 2:
		m.ToolCalls = raw(`{"id":"c2"}`)
	}
	if rapid.Bool().Draw(t, "tool name") {
		m.ToolName, m.ToolCallID = "terminal", "c1"
	}
	if rapid.Bool().Draw(t, "reasoning") {
		m.Reasoning = ptr(rapid.SampledFrom([]string{"", "think"}).Draw(t, "reasoning text"))
		m.ReasoningContent = ptr("")
	}
	return m
}

func drawPtr(t *rapid.T, label string, values ...string) *string {
	if rapid.Bool().Draw(t, label+" set") {
		return ptr(rapid.SampledFrom(values).Draw(t, label))
	}
	return nil
}

// drawHistory draws a history over a few lanes and sessions, with the
// events in any order a buggy or racing command layer could produce.
func drawHistory(t *rapid.T) *history {
	h := newHistory()
	now := t0
	n := rapid.IntRange(1, 60).Draw(t, "events")
	for range n {
		now = now.Add(time.Duration(rapid.IntRange(0, 3).Draw(t, "tick")) * time.Second)
		key := rapid.SampledFrom(propLanes).Draw(t, "lane")
		sid := rapid.SampledFrom(propSessions).Draw(t, "session")
		prev := rapid.SampledFrom(append([]string{""}, propSessions...)).Draw(t, "previous")
		switch rapid.IntRange(0, 17).Draw(t, "kind") {
		case 0:
			e := created(key, sid, now)
			e.PreviousSessionID = prev
			h.lane(key, e)
		case 1:
			h.lane(key, events.SessionAutoReset{SessionKey: key, SessionID: sid, PreviousSessionID: prev,
				Reason: events.AutoResetIdle, Origin: src("discord", "u2"), Platform: "discord", At: now})
		case 2:
			h.lane(key, events.SessionReset{SessionID: sid, PreviousSessionID: prev, At: now})
		case 3:
			h.lane(key, events.SessionSwitched{SessionID: sid, PreviousSessionID: prev, At: now})
		case 4:
			h.lane(key, events.Touched{At: now})
		case 5, 6, 7, 8:
			h.tr(sid, appended(sid, drawMessage(t), now))
		case 9:
			msgs := make([]events.Message, rapid.IntRange(0, 3).Draw(t, "rewritten"))
			for i := range msgs {
				msgs[i] = drawMessage(t)
			}
			h.tr(sid, events.TranscriptRewritten{SessionID: sid, Messages: msgs, At: now})
		case 10:
			h.tr(sid, events.TurnsRewound{SessionID: sid, TargetMessageID: int64(rapid.IntRange(1, 30).Draw(t, "target")), At: now})
		case 11:
			h.tr(sid, events.TitleSet{SessionID: sid, Title: rapid.SampledFrom([]string{"", "A", "B", "A #2"}).Draw(t, "title"), At: now})
		case 12:
			e := events.SessionMetadataUpdated{SessionID: sid, Model: drawPtr(t, "model", "m1", "m2"),
				CostStatus: drawPtr(t, "cost status", "estimated", "actual"), SystemPrompt: drawPtr(t, "prompt", "p"),
				ParentSessionID: drawPtr(t, "parent", append([]string{""}, propSessions...)...),
				InputTokens:     int64(rapid.IntRange(0, 100).Draw(t, "input")), APICallCount: 1, At: now}
			if rapid.Bool().Draw(t, "cost") {
				e.EstimatedCostUSD = ptr(0.25)
			}
			h.tr(sid, e)
		case 13:
			h.tr(sid, events.TranscriptCleared{SessionID: sid, At: now})
		case 14:
			h.tr(sid, events.TranscriptDeleted{SessionID: sid, Reason: events.DeletePruned, At: now})
		case 15:
			h.tr(sid, events.TranscriptEnded{SessionID: sid, Reason: rapid.SampledFrom([]string{"user_exit", "compression"}).Draw(t, "reason"), At: now})
		case 16:
			h.tr(sid, events.TranscriptReopened{SessionID: sid, At: now})
		case 17:
			h.add(events.GatewayStream, events.GatewayStarted{PID: 1, At: now})
		}
	}
	return h
}

// TestIncrementalEqualsRebuild: however a history is delivered — one event
// per batch, batches of any size, batches delivered again or overlapping,
// the projection closed and reopened between them — the file ends up byte
// for byte the one a single from-scratch Apply gives.
func TestIncrementalEqualsRebuild(t *testing.T) {
	if !flagSet("rapid.checks") {
		// rapid's default of 100 histories with HERMES_TEST_LARGE=1; the
		// race detector slows the transpiled SQLite about forty-fold.
		if err := flag.Set("rapid.checks", strconv.Itoa(sized(20, 100))); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(root, "case")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		h := drawHistory(rt)

		ref, err := Open(filepath.Join(dir, "rebuild.db"))
		if err != nil {
			rt.Fatal(err)
		}
		defer ref.Close()
		if err := ref.Apply(ctx, h.all); err != nil {
			rt.Fatalf("Apply(all) error = %v", err)
		}
		want := dumpOf(t, ref.Reader)

		// One event per batch: nothing is gathered, so this checks that
		// gathering appended messages (see applier.flush) changes nothing.
		single, err := Open(filepath.Join(dir, "single.db"))
		if err != nil {
			rt.Fatal(err)
		}
		defer single.Close()
		for _, env := range h.all {
			if err := single.Apply(ctx, []events.Envelope{env}); err != nil {
				rt.Fatalf("Apply(%d) error = %v", env.Position, err)
			}
		}
		if diff := cmp.Diff(want, dumpOf(t, single.Reader)); diff != "" {
			rt.Fatalf("one event per batch differs from one batch (-batch +single):\n%s", diff)
		}

		path := filepath.Join(dir, "incremental.db")
		p, err := Open(path)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { p.Close() }()
		n := len(h.all)
		for next := 0; next < n; {
			switch rapid.IntRange(0, 5).Draw(rt, "delivery") {
			case 0: // redeliver an earlier window, possibly reaching past next
				from := rapid.IntRange(0, next).Draw(rt, "from")
				to := min(n, from+rapid.IntRange(1, 10).Draw(rt, "size"))
				if err := p.Apply(ctx, h.all[from:to]); err != nil {
					rt.Fatalf("Apply(redelivery %d:%d) error = %v", from, to, err)
				}
				next = max(next, to)
			case 1: // close and reopen
				if err := p.Close(); err != nil {
					rt.Fatal(err)
				}
				if p, err = Open(path); err != nil {
					rt.Fatal(err)
				}
				cp, err := p.Checkpoint(ctx)
				if err != nil || (next > 0 && cp != h.all[next-1].Position) {
					rt.Fatalf("Checkpoint() after reopen = %d, %v, want %d", cp, err, h.all[next-1].Position)
				}
			default:
				to := min(n, next+rapid.IntRange(1, 12).Draw(rt, "size"))
				if err := p.Apply(ctx, h.all[next:to]); err != nil {
					rt.Fatalf("Apply(%d:%d) error = %v", next, to, err)
				}
				next = to
			}
		}
		if diff := cmp.Diff(want, dumpOf(t, p.Reader)); diff != "" {
			rt.Fatalf("incremental file differs from the rebuild (-rebuild +incremental):\n%s", diff)
		}
	})
}
