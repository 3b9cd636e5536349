package sqlite

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
