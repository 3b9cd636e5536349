package kurrentdb_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"hermes/testfixtures/kurrentdb"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
)

// setMetadata writes raw metadata JSON to the stream's metastream, as
// SetStreamMetadata does with what it serialises.
func setMetadata(t *testing.T, c *esdb.Client, stream, json string) {
	t.Helper()
	_, err := c.AppendToStream(t.Context(), "$$"+stream, esdb.AppendToStreamOptions{},
		esdb.EventData{EventType: "$metadata", ContentType: esdb.ContentTypeJson, Data: []byte(json)})
	if err != nil {
		t.Fatalf("set metadata of %s: %v", stream, err)
	}
}

func TestMetadataAppliedOnRead(t *testing.T) {
	for _, tc := range []struct {
		name     string
		metadata string // given 5 events (revisions 0-4), one minute apart, then this metadata
		forward  []uint64
		backward []uint64
		from2    []uint64 // forwards from revision 2
	}{
		{"no metadata", ``, []uint64{0, 1, 2, 3, 4}, []uint64{4, 3, 2, 1, 0}, []uint64{2, 3, 4}},
		{"$tb hides the events before it", `{"$tb":3}`, []uint64{3, 4}, []uint64{4, 3}, []uint64{3, 4}},
		{"$maxCount keeps the latest", `{"$maxCount":2}`, []uint64{3, 4}, []uint64{4, 3}, []uint64{3, 4}},
		{"$maxAge hides older events", `{"$maxAge":150}`, []uint64{3, 4}, []uint64{4, 3}, []uint64{3, 4}},
		{"$maxAge can hide them all", `{"$maxAge":1}`, nil, nil, nil},
		{"the strictest rule wins", `{"$tb":1,"$maxCount":3}`, []uint64{2, 3, 4}, []uint64{4, 3, 2}, []uint64{2, 3, 4}},
		{"custom properties do nothing", `{"owner":"x","$tb":1}`, []uint64{1, 2, 3, 4}, []uint64{4, 3, 2, 1}, []uint64{2, 3, 4}},
		{"a string $maxCount empties the metadata", `{"$maxCount":"2","$tb":3}`, []uint64{0, 1, 2, 3, 4}, []uint64{4, 3, 2, 1, 0}, []uint64{2, 3, 4}},
		{"an $acl string empties the metadata", `{"$acl":"$userStreamAcl","$tb":3}`, []uint64{0, 1, 2, 3, 4}, []uint64{4, 3, 2, 1, 0}, []uint64{2, 3, 4}},
		{"an $acl object is accepted", `{"$acl":{"$r":"admin","$w":["a","b"]},"$tb":3}`, []uint64{3, 4}, []uint64{4, 3}, []uint64{3, 4}},
		{"a fraction is not an integer", `{"$tb":3.0}`, []uint64{0, 1, 2, 3, 4}, []uint64{4, 3, 2, 1, 0}, []uint64{2, 3, 4}},
		{"malformed JSON is ignored", `{"$tb":3`, []uint64{0, 1, 2, 3, 4}, []uint64{4, 3, 2, 1, 0}, []uint64{2, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newManualClock()
			_, c := client(t, kurrentdb.WithClock(clock.Now))
			for range 5 {
				appendN(t, c, "s", esdb.Any{}, 1, "e")
				clock.Advance(time.Minute)
			}
			if tc.metadata != "" {
				setMetadata(t, c, "s", tc.metadata)
			}
			for _, read := range []struct {
				name string
				opts esdb.ReadStreamOptions
				want []uint64
			}{
				{"forwards", esdb.ReadStreamOptions{}, tc.forward},
				{"backwards", esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}, tc.backward},
				{"forwards from 2", esdb.ReadStreamOptions{From: esdb.Revision(2)}, tc.from2},
			} {
				got, err := readStream(t, c, "s", read.opts)
				if err != nil || !equalRevisions(revisions(got), read.want) {
					t.Errorf("read %s = %v, %v; want %v", read.name, revisions(got), err, read.want)
				}
			}
			// $all is the raw log: metadata hides nothing there.
			n := 0
			for _, e := range readLog(t, c) {
				if e.StreamID == "s" {
					n++
				}
			}
			if n != 5 {
				t.Errorf("$all holds %d events of s, want all 5", n)
			}
		})
	}
}

func TestMetadataLatestWins(t *testing.T) {
	_, c := client(t)
	ctx := t.Context()
	appendN(t, c, "s", esdb.NoStream{}, 4, "e")
	// The metastream has revisions of its own, and the expected revision of
	// a metadata write is checked against them.
	for i, tb := range []uint64{1, 3} {
		var m esdb.StreamMetadata
		m.SetTruncateBefore(tb)
		m.AddCustomProperty("tb", tb)
		x := esdb.ExpectedRevision(esdb.NoStream{})
		if i > 0 {
			x = esdb.Revision(uint64(i - 1))
		}
		wr, err := c.SetStreamMetadata(ctx, "s", esdb.AppendToStreamOptions{ExpectedRevision: x}, m)
		if err != nil || wr.NextExpectedVersion != uint64(i) {
			t.Fatalf("SetStreamMetadata #%d = %+v, %v; want metastream revision %d", i, wr, err, i)
		}
	}
	var stale esdb.StreamMetadata
	stale.SetTruncateBefore(0)
	if _, err := c.SetStreamMetadata(ctx, "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.Revision(0)}, stale); code(err) != esdb.ErrorCodeWrongExpectedVersion {
		t.Errorf("SetStreamMetadata(expected 0) with the metastream at 1 error = %v, want WrongExpectedVersion", err)
	}
	got, err := c.GetStreamMetadata(ctx, "s", esdb.ReadStreamOptions{})
	if err != nil || got.TruncateBefore() == nil || *got.TruncateBefore() != 3 {
		t.Fatalf("GetStreamMetadata() = %+v, %v; want the latest ($tb 3)", got, err)
	}
	// The metastream reads like a stream with $maxCount 1.
	meta, err := readStream(t, c, "$$s", esdb.ReadStreamOptions{})
	if err != nil || !equalRevisions(revisions(meta), []uint64{1}) {
		t.Errorf("read $$s = %v, %v; want only revision 1", revisions(meta), err)
	}
	evs, err := readStream(t, c, "s", esdb.ReadStreamOptions{})
	if err != nil || !equalRevisions(revisions(evs), []uint64{3}) {
		t.Errorf("read s = %v, %v; want [3]", revisions(evs), err)
	}
}

// collect receives from sub until stop says so, the subscription drops, or
// ctx ends.
func collect(ctx context.Context, t *testing.T, sub *esdb.Subscription, stop func(got []*esdb.RecordedEvent, caughtUp bool) bool) (got []*esdb.RecordedEvent, dropped error) {
	t.Helper()
	caughtUp := false
	for !stop(got, caughtUp) {
		if ctx.Err() != nil {
			t.Fatalf("subscription: %v after %d events", ctx.Err(), len(got))
		}
		e := sub.Recv()
		switch {
		case e.EventAppeared != nil:
			got = append(got, e.EventAppeared.OriginalEvent())
		case e.CaughtUp != nil:
			caughtUp = true
		case e.SubscriptionDropped != nil:
			return got, e.SubscriptionDropped.Error
		}
	}
	return got, nil
}

func subscribe(t *testing.T, c *esdb.Client, stream string) (*esdb.Subscription, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	sub, err := c.SubscribeToStream(ctx, stream, esdb.SubscribeToStreamOptions{From: esdb.Start{}})
	if err != nil {
		t.Fatalf("SubscribeToStream(%s): %v", stream, err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub, ctx
}

func TestSubscriptionsAndDeletes(t *testing.T) {
	t.Run("catch-up starts at $tb", func(t *testing.T) {
		_, c := client(t)
		appendN(t, c, "s", esdb.NoStream{}, 5, "e")
		setMetadata(t, c, "s", `{"$tb":3}`)
		sub, ctx := subscribe(t, c, "s")
		got, err := collect(ctx, t, sub, func(_ []*esdb.RecordedEvent, caughtUp bool) bool { return caughtUp })
		if err != nil || !equalRevisions(revisions(got), []uint64{3, 4}) {
			t.Errorf("caught up with %v, %v; want [3 4]", revisions(got), err)
		}
	})
	t.Run("a tombstoned stream drops the subscription", func(t *testing.T) {
		_, c := client(t)
		appendN(t, c, "s", esdb.NoStream{}, 2, "e")
		if _, err := c.TombstoneStream(t.Context(), "s", esdb.TombstoneStreamOptions{}); err != nil {
			t.Fatal(err)
		}
		sub, ctx := subscribe(t, c, "s")
		got, err := collect(ctx, t, sub, func([]*esdb.RecordedEvent, bool) bool { return false })
		if len(got) != 0 || err == nil || !strings.Contains(err.Error(), "is deleted") {
			t.Errorf("subscription = %d events, dropped %v; want none and stream deleted", len(got), err)
		}
	})
	t.Run("a live tombstone is delivered, then drops the subscription", func(t *testing.T) {
		_, c := client(t)
		appendN(t, c, "s", esdb.NoStream{}, 1, "e")
		sub, ctx := subscribe(t, c, "s")
		if _, err := collect(ctx, t, sub, func(_ []*esdb.RecordedEvent, caughtUp bool) bool { return caughtUp }); err != nil {
			t.Fatal(err)
		}
		if _, err := c.TombstoneStream(t.Context(), "s", esdb.TombstoneStreamOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := collect(ctx, t, sub, func([]*esdb.RecordedEvent, bool) bool { return false })
		if len(got) != 1 || got[0].EventType != "$streamDeleted" || err == nil || !strings.Contains(err.Error(), "is deleted") {
			t.Errorf("after the tombstone: %d events (%v), dropped %v; want the $streamDeleted event then stream deleted", len(got), got, err)
		}
	})
	t.Run("a soft-deleted stream has nothing until recreated", func(t *testing.T) {
		_, c := client(t)
		appendN(t, c, "s", esdb.NoStream{}, 2, "old")
		if _, err := c.DeleteStream(t.Context(), "s", esdb.DeleteStreamOptions{}); err != nil {
			t.Fatal(err)
		}
		sub, ctx := subscribe(t, c, "s")
		got, err := collect(ctx, t, sub, func(_ []*esdb.RecordedEvent, caughtUp bool) bool { return caughtUp })
		if err != nil || len(got) != 0 {
			t.Fatalf("caught up with %v, %v; want nothing", revisions(got), err)
		}
		id := uuid.New()
		if _, err := c.AppendToStream(t.Context(), "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, ev(id, "T")); err != nil {
			t.Fatal(err)
		}
		got, err = collect(ctx, t, sub, func(got []*esdb.RecordedEvent, _ bool) bool { return len(got) == 1 })
		if err != nil || got[0].EventID != id || got[0].EventNumber != 2 {
			t.Errorf("live after recreating = %v, %v; want the new event at revision 2", revisions(got), err)
		}
	})
}

func TestReadFromBeyondTheEnd(t *testing.T) {
	_, c := client(t)
	appendN(t, c, "s", esdb.NoStream{}, 3, "e")
	huge := esdb.Revision(1<<63 + 5)
	if got, err := readStream(t, c, "s", esdb.ReadStreamOptions{From: huge}); err != nil || len(got) != 0 {
		t.Errorf("read forwards from %d = %v, %v; want nothing", huge.Value, revisions(got), err)
	}
	got, err := readStream(t, c, "s", esdb.ReadStreamOptions{From: huge, Direction: esdb.Backwards})
	if err != nil || !equalRevisions(revisions(got), []uint64{2, 1, 0}) {
		t.Errorf("read backwards from %d = %v, %v; want [2 1 0]", huge.Value, revisions(got), err)
	}
}
