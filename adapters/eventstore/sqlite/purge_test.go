package sqlite

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"hermes/events"
	"hermes/testfixtures/ondisk"
)

// TestPurge_LeavesNoCopyInFreeSpace: given a purged (started) log and short
// messages (or queued
// texts) of many transcripts (or lanes) interleaved in the log, those of
// the later half carrying a marker, when every one is erased (delete,
// clear, or a person's lane erasure with its queued texts) in a seeded
// order, earlier half first, and the log purged, then no byte of events.db
// or its WAL holds a marker. A redaction can make a row longer (the
// erasure's id goes into its metadata, more than a short text frees): the
// row overflows its page, and the rebalance leaves old copies of the cells
// it moves (the later half's) in the unused middle of pages, which
// secure_delete never zeroes when those are erased later. The control, a
// bare WAL checkpoint (the purge before the scrub), finds a copy in at
// least one history per kind. The second history of the delete reopens
// the store before the purge, as a start after a crash between an erasure and
// its purge does.
func TestPurge_LeavesNoCopyInFreeSpace(t *testing.T) {
	erasure := map[string]func(sid, id string) []events.Proposed{
		"delete": func(sid, id string) []events.Proposed {
			return []events.Proposed{
				{ID: id + "-d", Event: events.TranscriptDeleted{SessionID: sid, Reason: events.DeleteRequested, At: t0}},
				{ID: id, Event: events.TranscriptErased{SessionID: sid, Scope: events.EraseTranscript, Reason: events.ErasureOnRequest, At: t0}},
			}
		},
		"clear": func(sid, id string) []events.Proposed {
			return []events.Proposed{
				{ID: id + "-c", Event: events.TranscriptCleared{SessionID: sid, At: t0}},
				{ID: id, Event: events.TranscriptErased{SessionID: sid, Scope: events.EraseMessages, Reason: events.ErasureOnRequest, At: t0}},
			}
		},
		"person": func(_, id string) []events.Proposed {
			return []events.Proposed{{ID: id, Event: events.LaneErased{ErasureID: "er_" + id[len(id)-16:], QueueTexts: true, Reason: events.ErasureOnRequest, At: t0}}}
		},
	}
	// written is what the history appends to stream i: a message of a
	// transcript, or a queued text of a lane (erased with its person).
	written := func(kind string, i, n int, text string) (string, events.Proposed) {
		if kind == "person" {
			return fmt.Sprintf("lane-k%d", i), events.Proposed{ID: fmt.Sprintf("q%d", n),
				Event: events.QueueItemAdded{ItemID: fmt.Sprintf("i%d", n), Kind: "text", Text: text, Placement: "slot", At: t0}}
		}
		return fmt.Sprintf("transcript-s%d", i), events.Proposed{ID: fmt.Sprintf("m%d", n),
			Event: events.MessageAppended{SessionID: fmt.Sprintf("s%d", i), At: t0, Message: events.Message{Role: "user", Content: json.RawMessage(`"` + text + `"`)}}}
	}
	// Histories that leave a copy after a bare checkpoint (3 of the first
	// 20 for a transcript, 2 of the first 60 for a person); a second one
	// is reopened before its purge.
	seeds := map[string][]uint64{"delete": {0, 7}, "clear": {0}, "person": {22}}
	for _, kind := range []string{"delete", "clear", "person"} {
		t.Run(kind, func(t *testing.T) {
			copiesBeforePurge := 0
			for k, seed := range seeds[kind] {
				path := filepath.Join(t.TempDir(), "events.db")
				s, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				// The purge of a start, before the history: the erasures'
				// own flag must make the last purge scrub.
				if err := s.Purge(t.Context()); err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(seed, 1))
				const sessions, messages = 30, 2000
				marker := fmt.Sprintf("zq-free-space-%02d", seed)
				var batch []events.StreamAppend
				for n := range messages {
					i := rng.IntN(sessions)
					text := strings.Repeat("x", rng.IntN(3))
					if i >= sessions/2 && rng.IntN(2) == 0 {
						text = marker + " " + strings.Repeat("y", rng.IntN(300))
					}
					stream, e := written(kind, i, n, text)
					batch = append(batch, events.StreamAppend{Stream: stream, Expected: events.AnyVersion(), Proposed: []events.Proposed{e}})
					if len(batch) == 100 || n == messages-1 {
						if _, err := s.AppendBatch(t.Context(), slices.Values(batch)); err != nil {
							t.Fatal(err)
						}
						batch = batch[:0]
					}
				}
				order := append(rng.Perm(sessions/2), rng.Perm(sessions/2)...)
				for k, i := range order {
					if k >= sessions/2 {
						i += sessions / 2
					}
					sid := fmt.Sprintf("s%d", i)
					id := fmt.Sprintf("0196d1e4-7b1c-7e3a-9f00-%012d", rng.IntN(1e12)) // an erasure id's length
					stream, _ := written(kind, i, 0, "")
					mustAppend(t, s, stream, events.AnyVersion(), erasure[kind](sid, id))
				}
				ondisk.BareCheckpoint(t, path)
				if ondisk.Holds(t, path, []byte(marker)) {
					copiesBeforePurge++
				}
				if k == 1 {
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					if s, err = Open(path); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.Purge(t.Context()); err != nil {
					t.Fatal(err)
				}
				for _, f := range []string{path, path + "-wal"} {
					if ondisk.Holds(t, f, []byte(marker)) {
						t.Errorf("history %d: after Purge, %s still holds an erased marker", seed, filepath.Base(f))
					}
				}
			}
			if copiesBeforePurge == 0 {
				t.Fatal("control: no history left a copy of an erased message after a bare checkpoint; the check cannot fail")
			}
		})
	}
}
