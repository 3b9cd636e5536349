package commands_test

import (
	"context"
	"fmt"
	"iter"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hermes/commands"
	"hermes/domain"
	"hermes/events"
)

func importedLane(key, sid string) events.LaneImported {
	marked := t0.Add(-2 * 3600e9)
	return events.LaneImported{
		SessionKey: key, SessionID: sid, CreatedAt: t0.Add(-3600e9), UpdatedAt: t0,
		Origin: events.Source(alice), DisplayName: "Alice", Platform: "telegram", ChatType: "dm",
		InputTokens: 10, OutputTokens: 5, TotalTokens: 15, CostStatus: "estimated", EstimatedCostUSD: 0.5,
		ResumePending: true, ResumeReason: events.ResumeRestartTimeout, LastResumeMarkedAt: &marked,
		WasAutoReset: true, AutoResetReason: events.AutoResetIdle, HadActivity: true, RestartFailureCount: 2,
	}
}

func TestImportLane(t *testing.T) {
	f := newFixture(t, idleConfig())
	ctx := context.Background()
	lane := importedLane(aliceKey, "20260509_090000_aaaa0001")

	tests := []struct {
		name string
		lane events.LaneImported
		want commands.ImportOutcome
	}{
		{"first run", lane, commands.Imported},
		{"second run", lane, commands.AlreadyImported},
		{"changed source, same key", importedLane(aliceKey, "20260509_090000_aaaa0009"), commands.AlreadyImported},
	}
	for _, tt := range tests {
		got, _, err := f.handler.ImportLane(ctx, commands.ImportLane{Lane: tt.lane})
		if err != nil || got != tt.want {
			t.Errorf("%s: ImportLane = %v, %v, want %v", tt.name, got, err, tt.want)
		}
	}
	l, v, err := f.handler.Lane(ctx, aliceKey)
	if err != nil || v != 1 {
		t.Fatalf("Lane(%s) = version %d, %v, want 1", aliceKey, v, err)
	}
	want := domain.Replay([]events.Event{lane})
	if diff := cmp.Diff(want, l); diff != "" {
		t.Errorf("imported lane (-want +got):\n%s", diff)
	}
	if !l.ResumePending || l.LastResumeMarkedAt.IsZero() || !l.WasAutoReset || l.TotalTokens != 15 {
		t.Errorf("imported lane lost flags: %+v", l)
	}

	// A lane hermes created itself is left alone.
	bob := domain.SessionSource{Platform: "telegram", ChatID: "7", ChatType: "dm"}
	if _, err := f.handler.ResolveSession(ctx, commands.ResolveSession{Source: bob}); err != nil {
		t.Fatal(err)
	}
	got, _, err := f.handler.ImportLane(ctx, commands.ImportLane{Lane: importedLane("agent:main:telegram:dm:7", "20260509_090000_aaaa0002")})
	if err != nil || got != commands.ExistsNatively {
		t.Errorf("ImportLane over a native lane = %v, %v, want ExistsNatively", got, err)
	}
	for _, key := range []string{"", "agent:main:x:dm:a\x00b", "agent:main:x:dm:\xff"} {
		if _, _, err := f.handler.ImportLane(ctx, commands.ImportLane{Lane: importedLane(key, "20260509_090000_aaaa0003")}); err == nil {
			t.Errorf("ImportLane(%q) accepted a key an event cannot carry", key)
		}
	}
}

func messagesOf(n int) iter.Seq2[events.ImportedMessage, error] {
	return func(yield func(events.ImportedMessage, error) bool) {
		for i := range n {
			content := fmt.Sprintf("message %d %s", i, string(make([]byte, 200)))
			m := events.ImportedMessage{ID: int64(100 + i), Role: "user", Content: &content, Timestamp: 1778403600 + float64(i), Active: i%7 != 0}
			if !yield(m, nil) {
				return
			}
		}
	}
}

// TestImportTranscriptResumes: a run that stops half way (here: after a
// few events, as a SIGKILL would) is completed by the next run, and the
// stream ends up as one clean run writes it.
func TestImportTranscriptResumes(t *testing.T) {
	ctx := context.Background()
	session := events.SessionImported{SessionID: "20260509_090000_aaaa0001", Source: "telegram", StartedAt: 1778403600, MessageCount: 1200, At: t0}
	run := func(f *fixture, stopAfter int) (commands.TranscriptImport, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		steps := 0
		return f.handler.ImportTranscript(ctx, commands.ImportTranscript{
			Session: session, Messages: messagesOf(1200), MaxEventBytes: 64 << 10,
			Progress: func(int) {
				steps++
				if steps == stopAfter {
					cancel()
				}
			},
		})
	}
	clean := newFixture(t, idleConfig())
	res, err := run(clean, 0)
	if err != nil || res.Outcome != commands.Imported || res.Appended != 1200 {
		t.Fatalf("clean ImportTranscript = %+v, %v", res, err)
	}
	stream := events.TranscriptStream(session.SessionID)
	want, err := clean.store.ReadStream(ctx, stream, 1, 1000, events.Forwards)
	if err != nil || len(want) < 5 {
		t.Fatalf("clean import wrote %d events, %v; want several batches", len(want), err)
	}

	f := newFixture(t, idleConfig())
	if _, err := run(f, 3); err == nil {
		t.Fatal("interrupted ImportTranscript succeeded")
	}
	res, err = run(f, 0)
	if err != nil || res.Outcome != commands.Imported || res.Appended == 0 || res.Appended == 1200 {
		t.Fatalf("resumed ImportTranscript = %+v, %v, want the rest appended", res, err)
	}
	got, err := f.store.ReadStream(ctx, stream, 1, 1000, events.Forwards)
	if err != nil {
		t.Fatal(err)
	}
	strip := func(envs []events.Envelope) []string {
		var out []string
		for _, e := range envs {
			data, _ := events.Encode(e.Event)
			out = append(out, fmt.Sprintf("%d %s %s %s", e.Version, e.ID, e.Type, data))
		}
		return out
	}
	if diff := cmp.Diff(strip(want), strip(got)); diff != "" {
		t.Errorf("resumed stream differs from a clean import:\n%s", diff)
	}
	res, err = run(f, 0)
	if err != nil || res.Outcome != commands.AlreadyImported || res.Appended != 0 {
		t.Errorf("third ImportTranscript = %+v, %v, want AlreadyImported", res, err)
	}
}
