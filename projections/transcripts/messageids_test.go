package transcripts

import (
	"context"
	"path/filepath"
	"testing"

	"hermes/events"
)

// idHistory is a log whose message ids are known: two appends, a rewrite
// of three, an import keeping Hermes' id 100 and moving 2 (taken), an
// append, a rewrite of none, an append.
func idHistory() *history {
	h := newHistory()
	h.lane("k1", created("k1", "s1", at(0)))
	h.tr("s1", appended("s1", text("user", "one"), at(1)), appended("s1", text("assistant", "two"), at(2)))
	h.tr("s1", events.TranscriptRewritten{SessionID: "s1", Messages: []events.Message{text("user", "a"), text("user", "b"), text("user", "c")}, At: at(3)})
	h.tr("s2", events.MessagesImported{SessionID: "s2", Messages: []events.ImportedMessage{
		{ID: 100, Role: "user", Content: ptr("kept"), Timestamp: 4, Active: true},
		{ID: 3, Role: "user", Content: ptr("moved"), Timestamp: 4, Active: true},
	}, At: at(4)})
	h.tr("s1", appended("s1", text("user", "after import"), at(5)))
	h.tr("s1", events.TranscriptRewritten{SessionID: "s1", Messages: []events.Message{}, At: at(6)})
	h.tr("s1", appended("s1", text("user", "last"), at(7)))
	return h
}

// fileIDs reads what each message event inserted, by position.
func fileIDs(t *testing.T, r *Reader, all []events.Envelope) map[uint64]MessageRange {
	t.Helper()
	out := map[uint64]MessageRange{}
	for _, env := range all {
		m, err := r.MessageIDs(context.Background(), env.Position)
		if err == nil {
			out[env.Position] = m
		}
	}
	return out
}

// TestMessageIDsAreAFunctionOfTheLog: the ids an append is answered with
// (numbered on receipt, before its batch is applied) are the ids its row
// gets, whether the batch is applied at once, after a restart that lost
// the numbering, or by a rebuild of the file from the log; the numbering
// stops at an import (its ids depend on the rows in the file) and at a
// gap, and Apply numbers on from there.
func TestMessageIDsAreAFunctionOfTheLog(t *testing.T) {
	h := idHistory()
	all := h.all
	importAt := all[4].Position // the messages_imported
	want := map[uint64]MessageRange{
		all[1].Position: {SessionID: "s1", FirstID: 1, Count: 1},
		all[2].Position: {SessionID: "s1", FirstID: 2, Count: 1},
		all[3].Position: {SessionID: "s1", FirstID: 3, Count: 3},
		all[5].Position: {SessionID: "s1", FirstID: 102, Count: 1}, // after 100 kept and 101 (moved)
		all[6].Position: {SessionID: "s1"},                         // a rewrite to nothing inserts no row
		all[7].Position: {SessionID: "s1", FirstID: 103, Count: 1},
	}

	t.Run("numbered on receipt, then applied", func(t *testing.T) {
		// Given a file and the whole log received
		p := openTemp(t)
		p.Assign(0, all)

		// Then everything before the import is numbered, nothing after
		for pos, w := range want {
			got, ok := p.AssignedMessages(pos)
			if pos < importAt && (!ok || got != w) {
				t.Errorf("AssignedMessages(%d) = %+v, %v; want %+v", pos, got, ok, w)
			}
			if pos > importAt && ok {
				t.Errorf("AssignedMessages(%d) = %+v after the import, want not numbered", pos, got)
			}
		}
		// When the log is applied
		mustApply(t, p, all)
		// Then the rows have those ids, the others numbered on, and the
		// numbering is forgotten once committed
		if got := fileIDs(t, p.Reader, all); !sameRanges(got, want) {
			t.Fatalf("ids in the file = %+v, want %+v", got, want)
		}
		if got, ok := p.AssignedMessages(all[1].Position); ok {
			t.Fatalf("AssignedMessages after the commit = %+v, want false (the file answers)", got)
		}
	})

	t.Run("a restart before the batch", func(t *testing.T) {
		// Given the first events applied and the rest numbered, then a
		// restart that loses the numbering
		path := filepath.Join(t.TempDir(), "state.db")
		p := openAt(t, path)
		mustApply(t, p, all[:2])
		p.Assign(all[1].Position, all[2:4])
		numbered, _ := p.AssignedMessages(all[3].Position)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		// When it is opened again and the rest applied
		p = openAt(t, path)
		mustApply(t, p, all[2:])
		// Then the rows have the ids numbered before the restart
		got := fileIDs(t, p.Reader, all)
		if got[all[3].Position] != numbered || !sameRanges(got, want) {
			t.Fatalf("ids after a restart = %+v (numbered before: %+v), want %+v", got, numbered, want)
		}
	})

	t.Run("a gap", func(t *testing.T) {
		// Given a file that has applied the first events
		p := openTemp(t)
		mustApply(t, p, all[:2])
		// When events are received after one it never saw
		p.Assign(all[2].Position, all[3:4])
		// Then they are not numbered, and applying numbers them in order
		if got, ok := p.AssignedMessages(all[3].Position); ok {
			t.Fatalf("AssignedMessages after a gap = %+v, want not numbered", got)
		}
		mustApply(t, p, all[2:])
		if got := fileIDs(t, p.Reader, all); !sameRanges(got, want) {
			t.Fatalf("ids = %+v, want %+v", got, want)
		}
	})

	t.Run("batch by batch, and a rebuild", func(t *testing.T) {
		p := openTemp(t)
		for i := range all {
			p.Assign(all[max(i-1, 0)].Position*uint64(min(i, 1)), all[i:i+1])
			mustApply(t, p, all[i:i+1])
		}
		if got := fileIDs(t, p.Reader, all); !sameRanges(got, want) {
			t.Fatalf("ids applied one event at a time = %+v, want %+v", got, want)
		}
	})
}

func sameRanges(a, b map[uint64]MessageRange) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestNextIDAfterARolledBackImport: a batch holding an import rolls back
// after a later event was numbered on receipt; the retried batch stores
// the next id after its own events, not after the later one (else a
// restart before the later event's batch would number it again, higher
// than the id its append was answered with).
func TestNextIDAfterARolledBackImport(t *testing.T) {
	// Given an import at 1 (the file's next id is 5 once its rows are in)
	// and an append at 2, applied, and an append at 3 numbered on receipt
	h := newHistory()
	imp := h.tr("s1", events.MessagesImported{SessionID: "s1", Messages: []events.ImportedMessage{{ID: 4, Role: "user"}}, At: at(0)})[0]
	m1 := h.tr("s1", appended("s1", text("user", "one"), at(1)))[0]
	m2 := h.tr("s1", appended("s1", text("user", "two"), at(2)))[0]
	var ids messageIDs
	ids.next, ids.appliedNext, ids.committedNext, ids.ranges = 1, 1, 1, map[uint64]MessageRange{}
	apply := func() {
		ids.applying(imp)
		ids.imported(imp.Position, 5)
		ids.applying(m1)
	}
	apply()
	ids.assign(m1.Position, []events.Envelope{m2})
	if r, ok := ids.lookup(m2.Position); !ok || r.FirstID != 6 {
		t.Fatalf("append at 3 numbered %+v, %v; want id 6", r, ok)
	}
	// When the batch rolls back and is applied again
	ids.rolledBack()
	apply()
	// Then its transaction stores 6: the id after its own append (5)
	if got := ids.nextToStore(); got != 6 {
		t.Fatalf("next id stored with the retried batch = %d, want 6", got)
	}
}

// TestNumberingResumesAfterAGap: events received across a gap are held
// and numbered as soon as Apply closes it, so that the events received
// after them are numbered on receipt again, with the ids Apply gives.
func TestNumberingResumesAfterAGap(t *testing.T) {
	all := idHistory().all
	// Given a file that applied the lane's creation only
	p := openTemp(t)
	mustApply(t, p, all[:1])
	// When the two appends' successors arrive before the first append is
	// applied (a gap), then the first append is applied
	p.Assign(all[1].Position, all[2:4])
	if _, ok := p.AssignedMessages(all[2].Position); ok {
		t.Fatal("numbered across a gap")
	}
	mustApply(t, p, all[1:2])
	// Then the held events are numbered, and the next one received is too
	for _, c := range []struct {
		pos  uint64
		want MessageRange
	}{
		{all[2].Position, MessageRange{SessionID: "s1", FirstID: 2, Count: 1}},
		{all[3].Position, MessageRange{SessionID: "s1", FirstID: 3, Count: 3}},
	} {
		if got, ok := p.AssignedMessages(c.pos); !ok || got != c.want {
			t.Fatalf("AssignedMessages(%d) = %+v, %v after the gap closed; want %+v", c.pos, got, ok, c.want)
		}
	}
	mustApply(t, p, all[2:])
	if got := fileIDs(t, p.Reader, all); got[all[2].Position].FirstID != 2 || got[all[3].Position].FirstID != 3 {
		t.Fatalf("ids in the file = %+v", got)
	}
}
