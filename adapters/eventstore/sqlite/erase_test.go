package sqlite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"hermes/events"
)

// TestEraseRewritesEarlierEventsAndPurgeLeavesNoTrace: an erasure appended
// to a stream rewrites that stream's earlier events in the same commit
// (same versions, positions and ids, the erasure's id in the metadata),
// leaves other streams alone, and after Purge no byte of the database, its
// WAL or its shm file holds the erased text.
func TestEraseRewritesEarlierEventsAndPurgeLeavesNoTrace(t *testing.T) {
	const marker = "zq7-erase-marker-31c9"
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	s := openAt(t, path)
	ctx := t.Context()
	msg := func(sid string) events.Proposed {
		text := strings.Repeat(marker+" ", 2000) // spills into overflow pages
		return events.Proposed{ID: "m-" + sid, Event: events.MessageAppended{SessionID: sid, At: t0,
			Message: events.Message{Role: "user", Content: json.RawMessage(`"` + text + `"`), ToolCalls: json.RawMessage(`[{"id":"` + marker + `"}]`)}}}
	}
	before := mustAppend(t, s, "transcript-a", events.NoStream(), []events.Proposed{msg("a")})
	mustAppend(t, s, "transcript-b", events.NoStream(), []events.Proposed{{ID: "m-b", Event: events.MessageAppended{SessionID: "b", At: t0,
		Message: events.Message{Role: "user", Content: json.RawMessage(`"kept"`)}}}})
	mustAppend(t, s, "transcript-a", events.AnyVersion(), []events.Proposed{
		{ID: "del-a", Event: events.TranscriptDeleted{SessionID: "a", Reason: events.DeleteRequested, At: t0}},
		{ID: "erase-a", Event: events.TranscriptErased{SessionID: "a", Scope: events.EraseTranscript, Reason: events.ErasureOnRequest, At: t0}},
	})

	envs, err := s.ReadStream(ctx, "transcript-a", 1, 10, events.Forwards)
	if err != nil {
		t.Fatal(err)
	}
	got := envs[0]
	if got.Position != before.Positions[0] || got.ID != "m-a" || got.Version != 1 {
		t.Errorf("erased event moved: %+v", got)
	}
	if got.Metadata.Redacted != "erase-a" {
		t.Errorf("Metadata.Redacted = %q, want erase-a", got.Metadata.Redacted)
	}
	m := got.Event.(events.MessageAppended).Message
	if len(m.Content) != 0 || len(m.ToolCalls) != 0 || m.Role != "user" {
		t.Errorf("erased message = %+v, want role only", m)
	}
	other, err := s.ReadStream(ctx, "transcript-b", 1, 1, events.Forwards)
	if err != nil || other[0].Metadata.Redacted != "" {
		t.Fatalf("other stream touched: %+v %v", other, err)
	}
	// Appending the same erasure again (a retried command) changes nothing.
	if _, err := s.Append(ctx, "transcript-a", events.AnyVersion(), []events.Proposed{
		{ID: "del-a", Event: events.TranscriptDeleted{SessionID: "a", Reason: events.DeleteRequested, At: t0}},
		{ID: "erase-a", Event: events.TranscriptErased{SessionID: "a", Scope: events.EraseTranscript, Reason: events.ErasureOnRequest, At: t0}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx); err != nil {
		t.Fatalf("Purge() error = %v", err)
	}
	for _, name := range []string{"events.db", "events.db-wal", "events.db-shm"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(marker)) {
			t.Errorf("%s still holds the erased marker", name)
		}
	}
}

// TestWithoutEraseMarkerStays is the control: the check above can fail.
func TestWithoutEraseMarkerStays(t *testing.T) {
	const marker = "zq7-control-marker-77aa"
	dir := t.TempDir()
	s := openAt(t, filepath.Join(dir, "events.db"))
	mustAppend(t, s, "transcript-a", events.NoStream(), []events.Proposed{{ID: "m", Event: events.MessageAppended{SessionID: "a", At: t0,
		Message: events.Message{Role: "user", Content: json.RawMessage(`"` + marker + `"`)}}}})
	if err := s.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(marker)) {
		t.Error("control: marker not found without an erasure")
	}
}

// TestEraseThroughput (run with HERMES_ERASE_BENCH=N, N transcripts of 100
// messages of about 1 KB each, plus as many other events) measures erasure
// on a large log: the transcripts erased per second and the megabytes of
// payload rewritten per second, including the final purge.
func TestEraseThroughput(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("HERMES_ERASE_BENCH"))
	if n == 0 {
		t.Skip("set HERMES_ERASE_BENCH to the number of transcripts")
	}
	const perTranscript = 100
	s := openTemp(t)
	ctx := t.Context()
	text := strings.Repeat("lorem ipsum dolor sit amet ", 38) // ~1 KB
	for i := range n {
		sid := fmt.Sprintf("s%07d", i)
		ps := make([]events.Proposed, perTranscript)
		for j := range ps {
			ps[j] = events.Proposed{ID: fmt.Sprintf("%s-%d", sid, j), Event: events.MessageAppended{SessionID: sid, At: t0,
				Message: events.Message{Role: "user", Content: json.RawMessage(`"` + text + `"`)}}}
		}
		mustAppend(t, s, "transcript-"+sid, events.NoStream(), ps)
		mustAppend(t, s, fmt.Sprintf("lane-x%07d", i), events.NoStream(), touch(slices.Collect(func(yield func(string) bool) {
			for j := range perTranscript {
				if !yield(fmt.Sprintf("l%07d-%d", i, j)) {
					return
				}
			}
		})...))
	}
	head, _ := s.Head(ctx)
	start := time.Now()
	for i := range n {
		sid := fmt.Sprintf("s%07d", i)
		mustAppend(t, s, "transcript-"+sid, events.AnyVersion(), []events.Proposed{
			{ID: "del-" + sid, Event: events.TranscriptDeleted{SessionID: sid, Reason: events.DeleteRequested, At: t0}},
			{ID: "era-" + sid, Event: events.TranscriptErased{SessionID: sid, Scope: events.EraseTranscript, Reason: events.ErasureOnRequest, At: t0}},
		})
	}
	erased := time.Since(start)
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	mb := float64(n*perTranscript*len(text)) / 1e6
	t.Logf("log of %d events: erased %d transcripts (%d messages, %.0f MB of text) in %v (%.0f transcripts/s, %.1f MB/s); with the purge %v",
		head, n, n*perTranscript, mb, erased.Round(time.Millisecond), float64(n)/erased.Seconds(), mb/erased.Seconds(), took.Round(time.Millisecond))
}
