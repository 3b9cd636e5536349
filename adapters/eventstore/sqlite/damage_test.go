package sqlite

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"hermes/events"
	"hermes/testfixtures/ondisk"
)

// damagedLog writes a log of n one-event lanes at path, closes it, and
// damages the middle leaf page of the b-tree named tree (the events table
// or one of its indexes), where neither Open's checks nor an INSERT notice.
func damagedLog(t *testing.T, path string, n int, tree string) {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		mustAppend(t, s, fmt.Sprintf("lane-%04d", i), events.NoStream(), touch(fmt.Sprintf("e%d", i)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ondisk.DamageLeaf(t, path, tree)
}

// TestVerifyFindsDamageAndStopsWrites: 32 bytes flipped in a leaf page of
// the (stream, version) index in the middle of the log pass Open's checks
// (the tail reads and decodes), and an INSERT would not notice them; a
// write there was acknowledged and never kept. Verify finds them, and from
// then on every write (append, batch, snapshot) is refused with
// ErrLogDamaged naming the way out, and the log does not grow.
func TestVerifyFindsDamageAndStopsWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	damagedLog(t, path, 1500, "sqlite_autoindex_events_1")
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open of a log damaged outside its tail = %v, want it open (Verify finds it)", err)
	}
	t.Cleanup(func() { s.Close() })
	if s.Damaged() != nil {
		t.Fatalf("Damaged() = %v before any check", s.Damaged())
	}
	head, err := s.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Verify(t.Context())
	if !errors.Is(err, events.ErrLogDamaged) || rep.OK() {
		t.Fatalf("Verify = %v, report OK %t, want ErrLogDamaged", err, rep.OK())
	}
	for _, want := range []string{"hermes check", "hermes restore", "--salvage", "integrity check"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Verify's error %q does not say %q", err, want)
		}
	}
	_, err = s.Append(t.Context(), "lane-new", events.NoStream(), touch("after"))
	if !errors.Is(err, events.ErrLogDamaged) {
		t.Fatalf("Append after Verify found damage = %v, want ErrLogDamaged", err)
	}
	_, err = s.AppendBatch(t.Context(), slices.Values([]events.StreamAppend{{Stream: "lane-b", Expected: events.NoStream(), Proposed: touch("batch")}}))
	if !errors.Is(err, events.ErrLogDamaged) {
		t.Fatalf("AppendBatch after Verify found damage = %v, want ErrLogDamaged", err)
	}
	if err := s.WriteSnapshot(t.Context(), events.Snapshot{Stream: "lane-0000", Schema: 1, Version: 1, EventID: "e0", Data: []byte(`{}`)}); !errors.Is(err, events.ErrLogDamaged) {
		t.Fatalf("WriteSnapshot after Verify found damage = %v, want ErrLogDamaged", err)
	}
	if after, err := s.Head(t.Context()); err != nil || after != head {
		t.Fatalf("head = %d, %v after the refused writes, want %d", after, err, head)
	}
}

// TestVerifyOfASoundLog: Verify of a log without damage finds nothing and
// writes go on.
func TestVerifyOfASoundLog(t *testing.T) {
	s := openTemp(t)
	for i := range 50 {
		mustAppend(t, s, fmt.Sprintf("lane-%d", i), events.NoStream(), touch(fmt.Sprintf("e%d", i)))
	}
	if rep, err := s.Verify(t.Context()); err != nil || !rep.OK() {
		t.Fatalf("Verify = %v, %+v, want a sound log", err, rep)
	}
	mustAppend(t, s, "lane-after", events.NoStream(), touch("after"))
}

// TestReadMeetingDamageStopsWrites: a read that meets a damaged page of
// the events table (a subscription catching up, a replay) latches the
// damage: the next append is refused.
func TestReadMeetingDamageStopsWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	damagedLog(t, path, 4000, "events") // the middle is outside the tail Open reads
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open = %v, want it open (the tail is sound)", err)
	}
	t.Cleanup(func() { s.Close() })
	var readErr error
	for after := uint64(0); readErr == nil && after < 4000; after += 100 {
		_, readErr = s.ReadAll(t.Context(), after, 100)
	}
	if !IsDamaged(readErr) {
		t.Fatalf("reading the log across the damaged page = %v, want damage", readErr)
	}
	if _, err := s.Append(t.Context(), "lane-new", events.NoStream(), touch("after")); !errors.Is(err, events.ErrLogDamaged) {
		t.Fatalf("Append after a read met damage = %v, want ErrLogDamaged", err)
	}
}
