package sqlite

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hermes/events"
)

func tailRows(positions ...int64) []tailRow {
	rows := make([]tailRow, len(positions))
	for i, p := range positions {
		rows[i] = tailRow{position: p, version: 1, stream: "s", id: fmt.Sprint(p), typ: "t", data: "{}", meta: "{}"}
	}
	return rows
}

func positionsOf(rows []eventRow) []int64 {
	out := []int64{}
	for _, r := range rows {
		out = append(out, r.position)
	}
	return out
}

// Given rows pushed by commits, when a reader asks for what follows a
// position, then it gets the run of consecutive positions from the next
// one, nothing when the tail does not hold it, and whether more follows.
func TestCommittedTailAfter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pushed   [][]int64
		after    uint64
		limit    int
		want     []int64
		wantMore bool
	}{
		{"caught up", [][]int64{{1, 2, 3}}, 3, 10, []int64{}, false},
		{"from the middle", [][]int64{{1, 2}, {3, 4}}, 1, 10, []int64{2, 3, 4}, false},
		{"behind the tail", [][]int64{{5, 6}}, 2, 10, []int64{}, false},
		{"stops at a gap", [][]int64{{1, 2, 3}, {5, 6}}, 0, 10, []int64{1, 2, 3}, true},
		{"after the gap", [][]int64{{1, 2, 3}, {5, 6}}, 4, 10, []int64{5, 6}, false},
		{"in the gap", [][]int64{{1, 2, 3}, {5, 6}}, 3, 10, []int64{}, false},
		{"limit", [][]int64{{1, 2, 3, 4}}, 0, 2, []int64{1, 2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tail committedTail
			for _, p := range tc.pushed {
				tail.push(tailRows(p...))
			}
			rows, more := tail.after(tc.after, tc.limit)
			if got := positionsOf(rows); !cmp.Equal(got, tc.want) || more != tc.wantMore {
				t.Errorf("after(%d) = %v, more %v; want %v, more %v", tc.after, got, more, tc.want, tc.wantMore)
			}
		})
	}
}

// Given more rows than the tail keeps, the oldest go, by count and by
// bytes, and clear forgets everything.
func TestCommittedTailBounds(t *testing.T) {
	var tail committedTail
	for p := int64(1); p <= tailMaxRows+10; p++ {
		tail.push(tailRows(p))
	}
	if rows, _ := tail.after(9, 1); len(rows) != 0 {
		t.Errorf("position 10 kept past %d rows", tailMaxRows)
	}
	if rows, _ := tail.after(10, 1); len(rows) != 1 {
		t.Errorf("position 11 dropped: the tail keeps the last %d rows", tailMaxRows)
	}
	big := tailRows(tailMaxRows + 11)
	big[0].data = string(make([]byte, tailMaxBytes))
	tail.push(big)
	if rows, _ := tail.after(tailMaxRows+9, 1); len(rows) != 0 || tail.bytes > tailMaxBytes {
		t.Errorf("older rows kept past %d bytes (%d bytes held)", tailMaxBytes, tail.bytes)
	}
	tail.clear()
	if len(tail.rows) != 0 || tail.bytes != 0 {
		t.Errorf("clear left %d rows, %d bytes", len(tail.rows), tail.bytes)
	}
}

// Given commits long past the bounds, the tail holds exactly the last
// tailMaxRows rows after each, its array stays within twice that, and the
// slots of dropped rows hold nothing (their content is unreachable).
func TestCommittedTailDropsWithoutKeepingContent(t *testing.T) {
	var tail committedTail
	for p := int64(1); p <= 5*tailMaxRows; p++ {
		tail.push(tailRows(p))
		held := int64(min(p, tailMaxRows))
		rows, more := tail.after(uint64(p-held), tailMaxRows+1)
		if int64(len(rows)) != held || more || rows[len(rows)-1].position != p {
			t.Fatalf("after push %d: tail gives %d rows ending at %d, want the last %d", p, len(rows), rows[len(rows)-1].position, held)
		}
		if len(tail.rows) > 2*tailMaxRows {
			t.Fatalf("after push %d: %d slots for %d rows", p, len(tail.rows), held)
		}
		for i, r := range tail.rows[:tail.head] {
			if r != (tailRow{}) {
				t.Fatalf("after push %d: dropped slot %d still holds position %d", p, i, r.position)
			}
		}
	}
}

// receive reads n events from sub, failing after a minute.
func receive(t *testing.T, sub events.Subscription, n int) []events.Envelope {
	t.Helper()
	var got []events.Envelope
	timeout := time.After(time.Minute)
	for len(got) < n {
		select {
		case e, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription ended after %d of %d events: %v", len(got), n, sub.Err())
			}
			got = append(got, e)
		case <-timeout:
			t.Fatalf("subscription gave %d of %d events in a minute", len(got), n)
		}
	}
	return got
}

// Given appends of every kind (single, several events, a retried
// duplicate, a refused one, a batch, another store's append between two of
// this store's), when subscriptions follow the log live, then each
// delivers exactly what reading the file gives, in order, without waiting
// for a poll.
func TestSubscriptionsFromTheTailMatchTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, WithPollInterval(time.Hour))
	other := openAt(t, path, WithPollInterval(time.Hour))
	ctx := t.Context()
	live, err := s.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	msg := func(id, text string) events.Proposed {
		return events.Proposed{ID: id, Event: events.MessageAppended{SessionID: "a", At: t0,
			Message: events.Message{Role: "user", Content: json.RawMessage(`"` + text + `"`)}}}
	}
	mustAppend(t, s, "lane-a", events.NoStream(), touch("1"))
	mustAppend(t, s, "transcript-a", events.NoStream(), []events.Proposed{msg("2", "hello"), msg("3", "<b>& \u00e9")})
	mustAppend(t, s, "transcript-a", events.AnyVersion(), []events.Proposed{msg("2", "hello")}) // a retry: no row
	if _, err := s.Append(ctx, "lane-a", events.NoStream(), touch("4")); err == nil {
		t.Fatal("Append(no stream) on an existing stream succeeded")
	}
	mustAppend(t, other, "lane-b", events.NoStream(), touch("5"))
	mustAppend(t, s, "lane-a", events.ExactVersion(1), touch("6"))
	if _, err := s.AppendBatch(ctx, slices.Values([]events.StreamAppend{
		{Stream: "lane-c", Expected: events.NoStream(), Proposed: touch("7")},
		{Stream: "lane-d", Expected: events.NoStream(), Proposed: touch("8")},
	})); err != nil {
		t.Fatal(err)
	}
	const n = 7
	got := receive(t, live, n)
	want, err := s.ReadAll(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); len(want) != n || diff != "" {
		t.Fatalf("live subscription differs from the file (-file +live):\n%s", diff)
	}
	// A subscription started now, with every row in the tail but the other
	// store's, delivers the same.
	late, err := s.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	if diff := cmp.Diff(want, receive(t, late, n)); diff != "" {
		t.Fatalf("late subscription differs from the file (-file +late):\n%s", diff)
	}
}

// Given a message in the tail, when its transcript is erased, then a
// subscription from before it reads the erased row, not the tail's copy.
func TestErasureClearsTheTail(t *testing.T) {
	s := openTemp(t, WithPollInterval(time.Hour))
	ctx := t.Context()
	mustAppend(t, s, "transcript-a", events.NoStream(), []events.Proposed{{ID: "m", Event: events.MessageAppended{SessionID: "a", At: t0,
		Message: events.Message{Role: "user", Content: json.RawMessage(`"secret"`)}}}})
	mustAppend(t, s, "transcript-a", events.AnyVersion(), []events.Proposed{
		{ID: "erase", Event: events.TranscriptErased{SessionID: "a", Scope: events.EraseTranscript, Reason: events.ErasureOnRequest, At: t0}},
	})
	sub, err := s.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	got := receive(t, sub, 2)
	if m := got[0].Event.(events.MessageAppended).Message; len(m.Content) != 0 || got[0].Metadata.Redacted != "erase" {
		t.Fatalf("subscription after the erasure gave %+v (%q), want the erased row", m, got[0].Metadata.Redacted)
	}
}
