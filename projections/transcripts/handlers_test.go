package transcripts

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"hermes/events"
	"hermes/projections/transcripts/fts5"
)

// TestStateEventsHandleTheirOwnType: every entry of stateEvents is keyed by
// the type its handler expects, so Apply of the stored golden event of that
// type runs its handler without a failed type assertion or an error.
func TestStateEventsHandleTheirOwnType(t *testing.T) {
	for typ := range stateEvents {
		t.Run(typ, func(t *testing.T) {
			// Given the golden event of typ, as events stores it.
			data, err := os.ReadFile(filepath.Join("..", "..", "events", "testdata", typ+".golden"))
			if err != nil {
				t.Fatalf("read golden of %s: %v", typ, err)
			}
			e, err := events.Decode(typ, data)
			if err != nil {
				t.Fatalf("Decode(%s) error = %v", typ, err)
			}
			if got := e.EventType(); got != typ {
				t.Fatalf("Decode(%s).EventType() = %q, want %q", typ, got, typ)
			}
			p := openTemp(t)
			env := events.Envelope{Stream: "test", Version: 1, Position: 1, Type: typ, Event: e}

			// When it is applied.
			err = p.Apply(context.Background(), []events.Envelope{env})

			// Then its handler ran without failing.
			if err != nil {
				t.Fatalf("Apply(%s) error = %v", typ, err)
			}
		})
	}
}

// TestStateHandlerOfSkipsOtherEvents: events outside stateEvents (and no
// event at all) leave state.db as it is.
func TestStateHandlerOfSkipsOtherEvents(t *testing.T) {
	for _, e := range []events.Event{
		nil,
		events.Touched{},
		events.TurnStarted{},
		events.QueueItemAdded{},
		events.NoticeDelivered{},
		events.GatewayStarted{},
	} {
		if _, ok := stateHandlerOf(e); ok {
			t.Errorf("stateHandlerOf(%T) = true, want false", e)
		}
	}
}

// TestMessageBatchWritesOneSegmentPerIndex: the messages of a batch are
// inserted by one statement (padded to a cached size), so FTS5 writes one
// new segment of each index for the batch, whatever its size, and every
// message is stored once, in order, with its content.
func TestMessageBatchWritesOneSegmentPerIndex(t *testing.T) {
	for _, n := range []int{1, 3, 147, 1025, 2048} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			// Given a session with one message already applied.
			ctx := context.Background()
			p := openTemp(t)
			h := newHistory()
			const key, sid = "agent:main:telegram:dm:1", "20260301_090000_aaaaaa"
			first := append(h.lane(key, created(key, sid, at(0))), h.tr(sid, appended(sid, text("user", "warm up"), at(1)))...)
			if err := p.Apply(ctx, first); err != nil {
				t.Fatalf("Apply(first) error = %v", err)
			}
			before := ftsSegmentCounts(t, p)

			// When a batch of n messages is applied.
			var batch []events.Envelope
			for i := range n {
				batch = append(batch, h.tr(sid, appended(sid, text("user", fmt.Sprintf("message number %d 第%d", i, i)), at(2+i)))...)
			}
			if err := p.Apply(ctx, batch); err != nil {
				t.Fatalf("Apply(%d messages) error = %v", n, err)
			}

			// Then each index has one more segment, and the messages are
			// all there, in order.
			after := ftsSegmentCounts(t, p)
			for table, c := range after {
				if c != before[table]+1 {
					t.Errorf("%s: %d segments after the batch, want %d + 1", table, c, before[table])
				}
			}
			msgs, err := p.Messages(ctx, sid, true)
			if err != nil {
				t.Fatalf("Messages() error = %v", err)
			}
			if len(msgs) != n+1 {
				t.Fatalf("Messages() = %d rows, want %d", len(msgs), n+1)
			}
			for i, m := range msgs[1:] {
				if want := jsonString(fmt.Sprintf("message number %d 第%d", i, i)); !bytes.Equal(m.Content, want) {
					t.Fatalf("message %d content = %s, want %s", i, m.Content, want)
				}
				if m.ID != msgs[0].ID+int64(i)+1 {
					t.Fatalf("message %d id = %d, want %d", i, m.ID, msgs[0].ID+int64(i)+1)
				}
			}
		})
	}
}

// ftsSegmentCounts returns the segments of each FTS5 index of p, from their
// structure records.
func ftsSegmentCounts(t *testing.T, p *Projection) map[string]int {
	t.Helper()
	tx, err := p.db.BeginTx(context.Background(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatalf("begin read: %v", err)
	}
	defer func() { _ = tx.Rollback() }()
	counts := map[string]int{}
	for _, table := range []string{"messages_fts", "messages_fts_trigram"} {
		segs, err := fts5.Segments(context.Background(), tx, table)
		if err != nil {
			t.Fatalf("structure of %s: %v", table, err)
		}
		counts[table] = len(segs)
	}
	return counts
}

// TestBatchOverSessionsCountsEachAndGuardsRedelivery: one batch appending
// to several sessions adds each session's own messages and tool calls to
// its counters, and the stream versions it writes make a redelivery of the
// batch's events at later positions, after a reopen (no versions held in
// memory), change nothing.
func TestBatchOverSessionsCountsEachAndGuardsRedelivery(t *testing.T) {
	// Given three sessions and a batch interleaving their messages.
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	p := openAt(t, path)
	h := newHistory()
	sids := []string{"20260301_090000_aaaaaa", "20260301_090000_bbbbbb", "20260301_090000_cccccc"}
	var setup []events.Envelope
	for i, sid := range sids {
		key := fmt.Sprintf("agent:main:telegram:dm:%d", i)
		setup = append(setup, h.lane(key, created(key, sid, at(i)))...)
	}
	if err := p.Apply(ctx, setup); err != nil {
		t.Fatalf("Apply(setup) error = %v", err)
	}
	var batch []events.Envelope
	wantMessages, wantTools := map[string]int64{}, map[string]int64{}
	for i := range 40 {
		sid := sids[i%len(sids)]
		m := text("assistant", fmt.Sprintf("reply %d", i))
		if i%4 == 0 {
			m.ToolCalls = raw(`[{"id":"a"},{"id":"b"}]`)
			wantTools[sid] += 2
		}
		wantMessages[sid]++
		batch = append(batch, h.tr(sid, appended(sid, m, at(10+i)))...)
	}

	// When it is applied, then delivered again to the reopened file.
	if err := p.Apply(ctx, batch); err != nil {
		t.Fatalf("Apply(batch) error = %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p = openAt(t, path)
	again := slices.Clone(batch)
	for i := range again {
		again[i].Position += 1000 // past the checkpoint: only the stream versions stop them
	}
	if err := p.Apply(ctx, again); err != nil {
		t.Fatalf("Apply(batch again) error = %v", err)
	}

	// Then each session counts its own, once.
	for _, sid := range sids {
		s := mustSession(t, p.Reader, sid)
		if s.MessageCount != wantMessages[sid] || s.ToolCallCount != wantTools[sid] {
			t.Errorf("%s counts = %d messages, %d tool calls, want %d, %d", sid, s.MessageCount, s.ToolCallCount, wantMessages[sid], wantTools[sid])
		}
		msgs, err := p.Messages(ctx, sid, true)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(msgs)) != wantMessages[sid] {
			t.Errorf("%s has %d messages, want %d", sid, len(msgs), wantMessages[sid])
		}
	}
}
