package sqlite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/commands"
	"hermes/domain"
	"hermes/events"
	"hermes/projections"
	"hermes/projections/sessions"
	"hermes/projections/transcripts"
	"hermes/testfixtures"
)

var update = flag.Bool("update", false, "rewrite the goldens of testdata/schema-1 from the checked-in log (never the log itself)")

// schema1Dir holds a log written by the build that introduced schema 1,
// before migrations existed, and what it replays to. The log is written
// once, by that build (see TestWriteSchema1Log); every later build must
// open it and replay it to the same state.
const schema1Dir = "testdata/schema-1"

// TestSchema1LogOpensAndReplays: the checked-in schema-1 log, opened by
// this build (a copy: testdata is never written), reads back event for
// event as it was written, and replays into fresh read models that dump
// exactly as the goldens say. Rewrite the goldens, after a change that
// means to alter the replayed state, with
//
//	go test ./adapters/eventstore/sqlite -run TestSchema1LogOpensAndReplays -update
func TestSchema1LogOpensAndReplays(t *testing.T) {
	ctx := context.Background()
	// Given a copy of the log written by the schema-1 build.
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	copyFile(t, filepath.Join(schema1Dir, "events.db"), path)

	// When this build opens it and replays it into fresh read models.
	store, err := sqlite.Open(path)
	if err != nil {
		t.Fatalf("Open(schema-1 log) error = %v", err)
	}
	defer store.Close()
	log := dumpLog(t, store)
	models := filepath.Join(dir, "models")
	if err := projections.Rebuild(ctx, store, openReadModels, models, nil); err != nil {
		t.Fatalf("Rebuild(schema-1 log) error = %v", err)
	}
	ps, err := openReadModels(models)
	if err != nil {
		t.Fatalf("open rebuilt read models: %v", err)
	}
	dumps := map[string]string{"events.golden": log}
	for _, p := range ps {
		var b bytes.Buffer
		if err := p.(projections.Dumper).Dump(ctx, &b); err != nil {
			t.Fatalf("Dump(%s) error = %v", p.Name(), err)
		}
		dumps[p.Name()+".golden"] = b.String()
		if err := p.Close(); err != nil {
			t.Fatalf("Close(%s) error = %v", p.Name(), err)
		}
	}

	// Then the events and both read models are what the goldens hold.
	for name, got := range dumps {
		golden := filepath.Join(schema1Dir, name)
		if *update {
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("read golden: %v (run with -update to write it)", err)
		}
		if got != string(want) {
			t.Errorf("replay of the schema-1 log: %s differs from the golden at line %d", name, firstDiffLine(got, string(want)))
		}
	}
}

func openReadModels(dir string) ([]projections.Projection, error) {
	lanes, err := sessions.Open(filepath.Join(dir, "lanes.db"), sessions.Exports{})
	if err != nil {
		return nil, err
	}
	state, err := transcripts.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		return nil, fmt.Errorf("%w (and close lanes: %v)", err, lanes.Close())
	}
	return []projections.Projection{lanes, state}, nil
}

// dumpLog writes every stored event, in position order, one JSON line each:
// the envelope as read plus the event encoded again.
func dumpLog(t *testing.T, store events.Store) string {
	t.Helper()
	var b strings.Builder
	for after := uint64(0); ; {
		batch, err := store.ReadAll(context.Background(), after, 500)
		if err != nil {
			t.Fatalf("ReadAll(%d) error = %v", after, err)
		}
		if len(batch) == 0 {
			return b.String()
		}
		for _, env := range batch {
			data, err := json.Marshal(env.Event)
			if err != nil {
				t.Fatalf("encode %s: %v", env.Type, err)
			}
			line, err := json.Marshal(struct {
				Position, Version uint64
				Stream, ID, Type  string
				Event             string
				RecordedAt        string
				Metadata          events.Metadata
				Data              json.RawMessage
			}{env.Position, env.Version, env.Stream, env.ID, env.Type, env.Event.EventType(),
				env.RecordedAt.UTC().Format(time.RFC3339Nano), env.Metadata, data})
			if err != nil {
				t.Fatal(err)
			}
			b.Write(line)
			b.WriteByte('\n')
			after = env.Position
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

func firstDiffLine(a, b string) int {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}

// TestWriteSchema1Log writes testdata/schema-1/events.db. It ran once, on
// the build that introduced schema 1 (commit 0bdf537), and must not be run
// again to replace the file: the point of the file is that an old build
// wrote it. It is kept to show what the log holds: a generated history
// (lanes, turns, touches, resets, messages in English and Chinese), lane
// commands (resolve, queue, turns, suspend and resume, notices) and
// transcript commands, and the golden value of every event type appended as
// stored. Run it with
//
//	HERMES_WRITE_SCHEMA1_LOG=/tmp/events.db go test ./adapters/eventstore/sqlite -run TestWriteSchema1Log
func TestWriteSchema1Log(t *testing.T) {
	path := os.Getenv("HERMES_WRITE_SCHEMA1_LOG")
	if path == "" {
		t.Skip("HERMES_WRITE_SCHEMA1_LOG not set: the schema-1 log is written once, by the schema-1 build")
	}
	ctx := context.Background()
	clock := testfixtures.NewClock(time.Date(2026, 5, 14, 9, 0, 0, 0, time.UTC))
	store, err := sqlite.Open(path, sqlite.WithClock(func() time.Time { return clock.Advance(time.Millisecond) }))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}()

	// A generated history: lanes, turns, touches, resets and messages.
	err = testfixtures.LoadHistory(ctx, store, testfixtures.HistoryOptions{
		Events: 240, Lanes: 5, Seed: 1, Start: clock.Now(), CJKShare: 0.25,
	}, 1)
	if err != nil {
		t.Fatal(err)
	}

	// Commands, as the API runs them.
	n := 0
	entropy := func() string { n++; return fmt.Sprintf("%08x", n) }
	h := commands.NewHandler(store, commands.DefaultConfig(),
		commands.WithClock(func() time.Time { return clock.Advance(time.Second) }), commands.WithEntropy(entropy))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	src := domain.SessionSource{Platform: "discord", ChatID: "g1", ChatType: "group", UserID: "u7", UserName: "Ada"}
	res, err := h.ResolveSession(ctx, commands.ResolveSession{Source: src, CommandID: "cmd-resolve-1"})
	must(err)
	key, sid := res.Lane.SessionKey, res.Lane.SessionID
	_, err = h.Enqueue(ctx, commands.EnqueueMessage{Key: key, Kind: events.QueueKindFollowup, Text: "and then?", CommandID: "cmd-enqueue-1"})
	must(err)
	_, err = h.Enqueue(ctx, commands.EnqueueMessage{Key: key, Kind: events.QueueKindQueue, Text: "/queue summarise", CommandID: "cmd-enqueue-2"})
	must(err)
	_, _, err = h.StartTurn(ctx, commands.StartTurn{Key: key, TurnID: "turn-1", CommandID: "cmd-turn-1"})
	must(err)
	_, err = h.TakeQueued(ctx, commands.TakeQueued{Key: key, CommandID: "cmd-take-1"})
	must(err)
	_, err = h.CompleteTurn(ctx, commands.CompleteTurn{Key: key, Outcome: domain.TurnOutcome{TurnID: "turn-1", InputTokens: 120, OutputTokens: 40}, CommandID: "cmd-complete-1"})
	must(err)
	_, _, err = h.ClearQueue(ctx, commands.ClearQueue{Key: key, CommandID: "cmd-clear-queue-1"})
	must(err)
	_, err = h.SetActiveProcesses(ctx, commands.SetActiveProcesses{Key: key, Count: 2, CommandID: "cmd-procs-1"})
	must(err)
	_, err = h.RecordActivity(ctx, commands.RecordActivity{Key: key, SessionID: sid, CommandID: "cmd-activity-1"})
	must(err)
	_, _, err = h.MarkResumePending(ctx, commands.MarkResumePending{Key: key, Reason: events.ResumeRestartTimeout, CommandID: "cmd-resume-1"})
	must(err)
	_, _, err = h.ClearResumePending(ctx, commands.ClearResumePending{Key: key, CommandID: "cmd-resume-clear-1"})
	must(err)
	_, err = h.SuspendSession(ctx, commands.SuspendSession{Key: key, Reason: events.SuspendStopCommand, CommandID: "cmd-suspend-1"})
	must(err)
	_, err = h.ResolveSession(ctx, commands.ResolveSession{Source: src, CommandID: "cmd-resolve-2"})
	must(err)
	_, err = h.ResetSession(ctx, commands.ResetSession{Key: key, DisplayName: "Ada", CommandID: "cmd-reset-1"})
	must(err)
	_, err = h.AcknowledgeNotice(ctx, commands.AcknowledgeNotice{Key: key, CommandID: "cmd-notice-1"})
	must(err)
	_, err = h.SwitchSession(ctx, commands.SwitchSession{Key: key, SessionID: sid, CommandID: "cmd-switch-1"})
	must(err)
	_, err = h.RecordGateway(ctx, commands.RecordGateway{Event: events.GatewayStarted{PID: 4242, ProcessStartedAt: clock.Now(), At: clock.Now()}, CommandID: "cmd-gateway-1"})
	must(err)

	// Every event type, as its golden value, in a stream of its kind.
	goldens, err := filepath.Glob(filepath.Join("..", "..", "..", "events", "testdata", "*.golden"))
	if err != nil || len(goldens) == 0 {
		t.Fatalf("event goldens: %v, %d files", err, len(goldens))
	}
	for i, g := range goldens {
		typ := strings.TrimSuffix(filepath.Base(g), ".golden")
		data, err := os.ReadFile(g)
		must(err)
		e, err := events.Decode(typ, data)
		must(err)
		if e.EventType() != typ {
			continue // an old version, upcast on read: this build cannot write it
		}
		var version int
		if _, err := fmt.Sscanf(typ[strings.LastIndex(typ, ".v"):], ".v%d", &version); err != nil {
			t.Fatalf("version of %s: %v", typ, err)
		}
		var stream string
		switch {
		case strings.HasPrefix(typ, "gateway."):
			stream = events.GatewayStream
		case strings.HasPrefix(typ, "transcript."):
			stream = events.TranscriptStream("20260514_093015_a1b2c3d4")
		default:
			stream = events.LaneStream("agent:main:telegram:dm:99")
		}
		_, err = store.Append(ctx, stream, events.AnyVersion(), []events.Proposed{{
			ID:       fmt.Sprintf("golden-%02d", i),
			Event:    e,
			Metadata: events.Metadata{SchemaVersion: version, Command: "golden", CommandID: typ},
		}})
		must(err)
	}
}
