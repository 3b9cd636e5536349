package transcripts

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"hermes/events"
	"hermes/testfixtures/ondisk"
)

// TestPurge_LeavesNoCopyInFreeSpace: given a purged (started) state.db and
// sessions whose messages, titles and system prompts carry a marker of
// their own, applied in seeded batches, when every session is erased (deleted, or cleared) in a seeded
// order and state.db purged, then no byte of state.db or its WAL holds a
// marker. secure_delete and FTS5's secure-delete zero what they delete, but
// a rebalance of messages_fts_data (FTS5 rewrites index blocks as it
// merges and deletes) leaves old copies of blocks in the unused middle of
// pages; the control, a bare WAL checkpoint (the purge before the scrub),
// finds one in each history, so the check can fail. The clear's history
// reopens the file before the purge, as a start after a crash between an
// erasure and its purge does: the first purge of a process scrubs.
func TestPurge_LeavesNoCopyInFreeSpace(t *testing.T) {
	erase := map[string]func(sid string) []events.Event{
		"delete": func(sid string) []events.Event {
			return []events.Event{events.TranscriptDeleted{SessionID: sid, Reason: events.DeleteRequested, At: at(9999)},
				events.TranscriptErased{SessionID: sid, Scope: events.EraseTranscript, Reason: events.ErasureOnRequest, At: at(9999)}}
		},
		"clear": func(sid string) []events.Event {
			return []events.Event{events.TranscriptCleared{SessionID: sid, At: at(9999)},
				events.TranscriptErased{SessionID: sid, Scope: events.EraseMessages, Reason: events.ErasureOnRequest, At: at(9999)}}
		},
	}
	// Seeds 9 and 114 are two of the seven of the first 200 histories that
	// leave a copy (9, 114, 121, 154, 160, 167 and 200 with both kinds;
	// since a batch's messages are inserted by one statement, merges free
	// fewer pages); the clear's history reopens the file before the purge.
	for kind, seed := range map[string]uint64{"delete": 9, "clear": 114} {
		t.Run(kind, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			p, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			// The purge of a start, before the history: the erasures' own
			// flag must make the last purge scrub.
			if err := p.Purge(t.Context()); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(seed, 2))
			h := newHistory()
			const sessions = 20
			marker := func(i int) string { return fmt.Sprintf("qzmk%02dx%02d", seed, i) }
			about := func(i int) string { return fmt.Sprintf("Title-%02d-%02d", seed, i) }
			for i := range sessions {
				key := fmt.Sprintf("k%d", i)
				h.lane(key, created(key, fmt.Sprintf("s%d", i), at(i)))
			}
			applied := 0
			flush := func() {
				for applied < len(h.all) {
					n := min(len(h.all)-applied, 1+rng.IntN(20))
					mustApply(t, p, h.all[applied:applied+n])
					applied += n
				}
			}
			for j := range 400 {
				i := rng.IntN(sessions)
				sid := fmt.Sprintf("s%d", i)
				switch rng.IntN(5) {
				case 0:
					h.tr(sid, events.TitleSet{SessionID: sid, Title: about(i) + strings.Repeat("t", rng.IntN(40)), At: at(j)})
				case 1:
					prompt := about(i) + strings.Repeat(" p", rng.IntN(100))
					h.tr(sid, events.SessionMetadataUpdated{SessionID: sid, SystemPrompt: &prompt, InputTokens: int64(j * 1000), At: at(j)})
				default:
					h.tr(sid, appended(sid, text("user", marker(i)+" "+strings.Repeat("w ", rng.IntN(30))), at(j)))
				}
				if rng.IntN(10) == 0 {
					flush()
				}
			}
			flush()
			for _, i := range rng.Perm(sessions) {
				h.tr(fmt.Sprintf("s%d", i), erase[kind](fmt.Sprintf("s%d", i))...)
				flush()
			}

			// The FTS index stores terms prefix-compressed: look for
			// the part of a marker after its first two letters.
			needles := make([][]byte, 0, 2*sessions)
			for i := range sessions {
				needles = append(needles, []byte(marker(i)[2:]))
				if kind == "delete" { // a clear keeps the title and prompt
					needles = append(needles, []byte(about(i)))
				}
			}
			holds := func(f string) bool {
				t.Helper()
				return ondisk.Holds(t, f, needles...)
			}
			ondisk.BareCheckpoint(t, path)
			if !holds(path) {
				t.Fatal("control: the history left no copy of an erased message after a bare checkpoint; the check cannot fail")
			}
			if kind == "clear" {
				// A crash between the erasure and its purge: the first
				// purge of the next process scrubs.
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
				if p, err = Open(path); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Purge(t.Context()); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{path, path + "-wal"} {
				if holds(f) {
					t.Errorf("history %d: after Purge, %s still holds an erased marker", seed, filepath.Base(f))
				}
			}
		})
	}
}

// TestPurge_LeavesNoErasedTermInTheFTSIndex: given two people with 800
// messages each, every message with a word of its own, when one person's
// sessions are erased and state.db purged, then neither FTS5 index holds a
// term of theirs: not in messages_fts_idx or messages_fts_trigram_idx (the
// first term of each leaf page, a live row that secure-delete and the
// free-space scrub never touch), not in any byte of the file or its WAL;
// the other person's words are all still found. The control: after the
// deletes alone (a bare checkpoint), an _idx keeps one of the erased words.
func TestPurge_LeavesNoErasedTermInTheFTSIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	p, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	h := newHistory()
	word := func(person string, i int) string { return fmt.Sprintf("%s%04d", person, i) }
	const perPerson, perSession = 800, 100
	for _, person := range []string{"erzq", "kpvb"} {
		for s := range perPerson / perSession {
			sid := fmt.Sprintf("%s-s%d", person, s)
			key := "k-" + sid
			h.lane(key, created(key, sid, at(s)))
			for i := s * perSession; i < (s+1)*perSession; i++ {
				h.tr(sid, appended(sid, text("user", "hello "+word(person, i)+" there"), at(i)))
			}
		}
	}
	mustApply(t, p, h.all)
	applied := len(h.all)
	for s := range perPerson / perSession {
		sid := fmt.Sprintf("erzq-s%d", s)
		h.tr(sid, events.TranscriptDeleted{SessionID: sid, Reason: events.DeleteRequested, At: at(9999)},
			events.TranscriptErased{SessionID: sid, Scope: events.EraseTranscript, Reason: events.ErasureOnRequest, At: at(9999)})
	}
	mustApply(t, p, h.all[applied:])

	idxTerms := func() []string {
		t.Helper()
		var terms []string
		for _, table := range []string{"messages_fts_idx", "messages_fts_trigram_idx"} {
			rows, err := p.Reader.db.QueryContext(t.Context(), "SELECT term FROM "+table)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var term []byte
				if err := rows.Scan(&term); err != nil {
					t.Fatal(err)
				}
				terms = append(terms, string(term))
			}
			rows.Close()
		}
		return terms
	}
	erasedIn := func(terms []string) []string {
		var found []string
		for _, term := range terms {
			// The key's first byte says which index (0: the terms); the
			// rest is the shortest prefix that sorts after the previous
			// page: "erzq0" already names the person's words.
			if len(term) > 5 && strings.HasPrefix(term[1:], "erzq") {
				found = append(found, term[1:])
			}
		}
		return found
	}
	needles := make([][]byte, 0, perPerson)
	for i := range perPerson {
		needles = append(needles, []byte(word("erzq", i)))
	}
	ondisk.BareCheckpoint(t, path)
	if len(erasedIn(idxTerms())) == 0 || !ondisk.Holds(t, path, needles...) {
		t.Fatal("control: the deletes left no erased word in an FTS _idx; the check cannot fail")
	}
	if err := p.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	if found := erasedIn(idxTerms()); len(found) > 0 {
		t.Errorf("after Purge the FTS _idx tables hold erased words: %q", found)
	}
	for _, f := range []string{path, path + "-wal"} {
		if ondisk.Holds(t, f, needles...) {
			t.Errorf("after Purge %s holds an erased word", filepath.Base(f))
		}
	}
	for i := range perPerson {
		var n int
		if err := p.Reader.db.QueryRowContext(t.Context(), "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", word("kpvb", i)).Scan(&n); err != nil || n != 1 {
			t.Fatalf("search for %s after the purge = %d, %v, want 1", word("kpvb", i), n, err)
		}
	}
}

// TestPurge_DropsErasedTermsWhateverTheSegmentLevels: FTS5 drops a
// deleted row's entries from a merge only when the merge writes the last
// level of the index, and it keeps the levels an earlier merge left empty.
// Given an index grown over many small batches and merged whole by the
// purge of a first erasure (so its levels reach past 2 while no segment is
// left), and a second person's messages written since in a few batches
// (every segment on level 0), when the second person is erased and state.db
// purged, then no term of theirs is left in messages_fts_idx: a merge of
// level 0 into level 1 (what 'optimize' does when every segment is on one
// level) would keep them as delete markers under their terms.
func TestPurge_DropsErasedTermsWhateverTheSegmentLevels(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	p, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	h := newHistory()
	h.lane("k-a", created("k-a", "first", at(0)))
	h.lane("k-b", created("k-b", "second", at(0)))
	mustApply(t, p, h.all)
	applied := len(h.all)
	step := func() {
		t.Helper()
		mustApply(t, p, h.all[applied:])
		applied = len(h.all)
	}
	erase := func(sid string) {
		t.Helper()
		h.tr(sid, events.TranscriptDeleted{SessionID: sid, Reason: events.DeleteRequested, At: at(9999)},
			events.TranscriptErased{SessionID: sid, Scope: events.EraseTranscript, Reason: events.ErasureOnRequest, At: at(9999)})
		step()
		if err := p.Purge(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 400 { // one batch a message: many segments, merged up the levels
		h.tr("first", appended("first", text("user", fmt.Sprintf("old%04d words", i)), at(i)))
		step()
	}
	erase("first")
	for b := range 3 {
		for i := range 200 {
			h.tr("second", appended("second", text("user", fmt.Sprintf("hello vxkq%04d there", b*200+i)), at(i)))
		}
		step()
	}
	erase("second")
	var n int
	if err := p.Reader.db.QueryRowContext(t.Context(), "SELECT count(*) FROM messages_fts_idx WHERE instr(term, 'vxkq') > 0").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		t.Errorf("after the second erasure's purge messages_fts_idx holds %d terms of the erased words", n)
	}
}
