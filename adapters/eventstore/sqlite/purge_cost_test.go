package sqlite

import (
	"os"
	"syscall"
	"testing"
	"time"

	"hermes/events"
	"hermes/projections/storage"
)

// TestPurgeCost measures Purge on a copy of a real log
// (HERMES_PURGE_COST=/path/to/copy/events.db; the copy is modified): the
// first purge of the process (scrubs every page), then the erasure of one
// transcript and its purge, with the share spent finding dirty pages on a
// reader (the rest holds the writer). CPU seconds from rusage.
func TestPurgeCost(t *testing.T) {
	path := os.Getenv("HERMES_PURGE_COST")
	if path == "" {
		t.Skip("HERMES_PURGE_COST not set")
	}
	ctx := t.Context()
	s := openAt(t, path)
	measure := func(what string, f func() error) {
		var r0, r1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
		start := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		wall := time.Since(start)
		syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
		t.Logf("%s: wall %v cpu %v", what, wall.Round(time.Millisecond), cpu.Round(time.Millisecond))
	}
	measure("first purge", func() error { return s.Purge(ctx) })
	var stream string
	if err := s.readers.QueryRowContext(ctx, "SELECT stream FROM events WHERE stream LIKE 'transcript-%' ORDER BY position LIMIT 1 OFFSET 1000").Scan(&stream); err != nil {
		t.Fatal(err)
	}
	sid := stream[len("transcript-"):]
	measure("erase "+stream, func() error {
		_, err := s.Append(ctx, stream, events.AnyVersion(), []events.Proposed{
			{ID: "cost-d", Event: events.TranscriptDeleted{SessionID: sid, Reason: events.DeleteRequested, At: t0}},
			{ID: "0196d1e4-7b1c-7e3a-9f00-000000000001", Event: events.TranscriptErased{SessionID: sid, Scope: events.EraseTranscript, Reason: events.ErasureOnRequest, At: t0}},
		})
		return err
	})
	measure("find dirty pages (reader)", func() error {
		pages, dirty, err := storage.FindDirtyPages(ctx, s.readers)
		t.Logf("pages %d dirty %d", pages, len(dirty))
		return err
	})
	measure("purge after the erasure", func() error { return s.Purge(ctx) })
	measure("purge without an erasure", func() error { return s.Purge(ctx) })
}
