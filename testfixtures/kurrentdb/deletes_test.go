package kurrentdb_test

import (
	"bytes"
	"errors"
	"io"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
)

// appendN appends n events to stream under x; each carries marker in its
// data. It answers their ids.
func appendN(t *testing.T, c *esdb.Client, stream string, x esdb.ExpectedRevision, n int, marker string) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	var evs []esdb.EventData
	for i := range n {
		id := uuid.New()
		ids = append(ids, id)
		evs = append(evs, esdb.EventData{EventID: id, EventType: "T", ContentType: esdb.ContentTypeJson,
			Data: []byte(`{"m":"` + marker + `","i":` + string(rune('0'+i)) + `}`)})
	}
	if _, err := c.AppendToStream(t.Context(), stream, esdb.AppendToStreamOptions{ExpectedRevision: x}, evs...); err != nil {
		t.Fatalf("AppendToStream(%s) error = %v", stream, err)
	}
	return ids
}

// readStream reads a whole stream forwards (or backwards), answering its
// events and the error that ended the read (nil at its end).
func readStream(t *testing.T, c *esdb.Client, stream string, opts esdb.ReadStreamOptions) ([]*esdb.RecordedEvent, error) {
	t.Helper()
	rs, err := c.ReadStream(t.Context(), stream, opts, 1000)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []*esdb.RecordedEvent
	for {
		e, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, e.OriginalEvent())
	}
}

func revisions(evs []*esdb.RecordedEvent) []uint64 {
	var out []uint64
	for _, e := range evs {
		out = append(out, e.EventNumber)
	}
	return out
}

// readLog reads $all from the start.
func readLog(t *testing.T, c *esdb.Client) []*esdb.RecordedEvent {
	t.Helper()
	rs, err := c.ReadAll(t.Context(), esdb.ReadAllOptions{}, 100000)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []*esdb.RecordedEvent
	for {
		e, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("ReadAll: %v", err)
		}
		out = append(out, e.OriginalEvent())
	}
}

func containsMarker(evs []*esdb.RecordedEvent, marker string) bool {
	for _, e := range evs {
		if bytes.Contains(e.Data, []byte(marker)) {
			return true
		}
	}
	return false
}

func equalRevisions(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSoftDelete(t *testing.T) {
	for _, tc := range []struct {
		name string
		// given two events (revisions 0 and 1) and a soft delete at revision 1,
		// when appending three events under recreate
		recreate esdb.ExpectedRevision
		// then the append's result, the revisions read, the metadata's $tb
		wantErr esdb.ErrorCode
		wantRev []uint64
	}{
		{"no_stream recreates after the last revision", esdb.NoStream{}, -1, []uint64{2, 3, 4}},
		{"any recreates", esdb.Any{}, -1, []uint64{2, 3, 4}},
		{"the last revision recreates", esdb.Revision(1), -1, []uint64{2, 3, 4}},
		{"stream_exists is refused", esdb.StreamExists{}, esdb.ErrorCodeWrongExpectedVersion, nil},
		{"a wrong revision is refused", esdb.Revision(0), esdb.ErrorCodeWrongExpectedVersion, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c := client(t)
			ctx := t.Context()
			appendN(t, c, "s", esdb.NoStream{}, 2, "old")
			dr, err := c.DeleteStream(ctx, "s", esdb.DeleteStreamOptions{ExpectedRevision: esdb.Revision(1)})
			if err != nil || dr.Position.Commit == 0 {
				t.Fatalf("DeleteStream() = %+v, %v; want a position", dr, err)
			}
			if _, err := readStream(t, c, "s", esdb.ReadStreamOptions{}); code(err) != esdb.ErrorCodeResourceNotFound {
				t.Fatalf("read after delete error = %v, want ResourceNotFound", err)
			}
			// (The client reads $tb through a float64, so check the JSON itself.)
			metaEvents, err := readStream(t, c, "$$s", esdb.ReadStreamOptions{})
			if err != nil || len(metaEvents) != 1 || string(metaEvents[0].Data) != `{"$tb":9223372036854775807}` {
				t.Fatalf("metadata after delete = %v, %v; want $tb at %d only", metaEvents, err, int64(math.MaxInt64))
			}

			_, err = c.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{ExpectedRevision: tc.recreate},
				ev(uuid.New(), "T"), ev(uuid.New(), "T"), ev(uuid.New(), "T"))
			if tc.wantErr >= 0 {
				if code(err) != tc.wantErr {
					t.Fatalf("recreating append error = %v, want code %d", err, tc.wantErr)
				}
				if _, err := readStream(t, c, "s", esdb.ReadStreamOptions{}); code(err) != esdb.ErrorCodeResourceNotFound {
					t.Errorf("read after the refused append error = %v, want ResourceNotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("recreating append error = %v", err)
			}
			got, err := readStream(t, c, "s", esdb.ReadStreamOptions{})
			if err != nil || !equalRevisions(revisions(got), tc.wantRev) {
				t.Errorf("read after recreating = %v, %v; want revisions %v", revisions(got), err, tc.wantRev)
			}
			meta, err := c.GetStreamMetadata(ctx, "s", esdb.ReadStreamOptions{})
			if err != nil || meta.TruncateBefore() == nil || *meta.TruncateBefore() != 2 {
				t.Errorf("metadata after recreating = %+v, %v; want $tb 2", meta, err)
			}
			metaEvents, _ = readStream(t, c, "$$s", esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}})
			if len(metaEvents) != 1 || metaEvents[0].EventNumber != 1 {
				t.Errorf("metastream = revisions %v, want the latest only, at revision 1", revisions(metaEvents))
			}
			// Recreating is for the first write only.
			_, err = c.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, ev(uuid.New(), "T"))
			if code(err) != esdb.ErrorCodeWrongExpectedVersion {
				t.Errorf("second no_stream append error = %v, want WrongExpectedVersion", err)
			}
		})
	}
}

func TestSoftDeleteKeepsCustomMetadataOnRecreate(t *testing.T) {
	_, c := client(t)
	ctx := t.Context()
	appendN(t, c, "s", esdb.NoStream{}, 2, "old")
	var meta esdb.StreamMetadata
	meta.SetMaxCount(100)
	meta.SetTruncateBefore(math.MaxInt64) // what a soft delete writes
	meta.AddCustomProperty("owner", "lane-7")
	if _, err := c.SetStreamMetadata(ctx, "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, meta); err != nil {
		t.Fatal(err)
	}
	appendN(t, c, "s", esdb.Revision(1), 3, "new")
	got, err := c.GetStreamMetadata(ctx, "s", esdb.ReadStreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tb := got.TruncateBefore(); tb == nil || *tb != 2 {
		t.Errorf("$tb = %v, want 2", tb)
	}
	if mc := got.MaxCount(); mc == nil || *mc != 100 {
		t.Errorf("$maxCount = %v, want 100 kept", mc)
	}
	if got.CustomProperty("owner") != "lane-7" {
		t.Errorf("custom property owner = %v, want lane-7 kept", got.CustomProperty("owner"))
	}
}

func TestSoftDeleteRefusals(t *testing.T) {
	_, c := client(t)
	ctx := t.Context()
	if _, err := c.DeleteStream(ctx, "never-written", esdb.DeleteStreamOptions{}); err == nil {
		t.Error("deleting a stream that never existed succeeded, want wrong expected version")
	}
	appendN(t, c, "s", esdb.NoStream{}, 2, "kept")
	if _, err := c.DeleteStream(ctx, "s", esdb.DeleteStreamOptions{ExpectedRevision: esdb.Revision(0)}); err == nil {
		t.Error("DeleteStream(expected 0) of a stream at 1 succeeded, want wrong expected version")
	}
	if got, err := readStream(t, c, "s", esdb.ReadStreamOptions{}); err != nil || len(got) != 2 {
		t.Errorf("stream after the refused delete = %v, %v; want both events", revisions(got), err)
	}
}

// A deleted stream's events stay in $all until a scavenge removes them.
func TestDeletedEventsStayInAllUntilScavenged(t *testing.T) {
	_, c := client(t)
	ctx := t.Context()
	appendN(t, c, "soft", esdb.NoStream{}, 2, "soft-marker")
	appendN(t, c, "hard", esdb.NoStream{}, 2, "hard-marker")
	if _, err := c.DeleteStream(ctx, "soft", esdb.DeleteStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TombstoneStream(ctx, "hard", esdb.TombstoneStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	log := readLog(t, c)
	for _, m := range []string{"soft-marker", "hard-marker"} {
		if !containsMarker(log, m) {
			t.Errorf("$all lacks %s before a scavenge, want it still there", m)
		}
	}
	var tomb *esdb.RecordedEvent
	for _, e := range log {
		if e.StreamID == "hard" && e.EventType == "$streamDeleted" {
			tomb = e
		}
	}
	if tomb == nil || tomb.EventNumber != math.MaxInt64 {
		t.Errorf("$all tombstone = %+v, want a $streamDeleted event of hard at revision %d", tomb, int64(math.MaxInt64))
	}
}

func TestTombstone(t *testing.T) {
	_, c := client(t)
	ctx := t.Context()
	appendN(t, c, "s", esdb.NoStream{}, 2, "gone")
	tr, err := c.TombstoneStream(ctx, "s", esdb.TombstoneStreamOptions{ExpectedRevision: esdb.Revision(1)})
	if err != nil || tr.Position.Commit == 0 {
		t.Fatalf("TombstoneStream() = %+v, %v; want a position", tr, err)
	}
	var meta esdb.StreamMetadata
	meta.SetMaxCount(3)
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"read", func() error { _, err := readStream(t, c, "s", esdb.ReadStreamOptions{}); return err }},
		{"read backwards", func() error {
			_, err := readStream(t, c, "s", esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}})
			return err
		}},
		{"append with any", func() error {
			_, err := c.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{}, ev(uuid.New(), "T"))
			return err
		}},
		{"append with no_stream", func() error {
			_, err := c.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, ev(uuid.New(), "T"))
			return err
		}},
		{"read the metadata", func() error { _, err := c.GetStreamMetadata(ctx, "s", esdb.ReadStreamOptions{}); return err }},
		{"set the metadata", func() error {
			_, err := c.SetStreamMetadata(ctx, "s", esdb.AppendToStreamOptions{}, meta)
			return err
		}},
		{"delete", func() error { _, err := c.DeleteStream(ctx, "s", esdb.DeleteStreamOptions{}); return err }},
		{"tombstone again", func() error { _, err := c.TombstoneStream(ctx, "s", esdb.TombstoneStreamOptions{}); return err }},
	} {
		if err := tc.do(); code(err) != esdb.ErrorCodeStreamDeleted {
			t.Errorf("%s on a tombstoned stream error = %v, want StreamDeleted", tc.name, err)
		}
	}
	// A stream that never existed can be tombstoned (no_stream matches).
	if _, err := c.TombstoneStream(ctx, "never", esdb.TombstoneStreamOptions{ExpectedRevision: esdb.NoStream{}}); err != nil {
		t.Errorf("TombstoneStream(never, no_stream) error = %v", err)
	}
	if _, err := readStream(t, c, "never", esdb.ReadStreamOptions{}); code(err) != esdb.ErrorCodeStreamDeleted {
		t.Errorf("read of a tombstoned new stream error = %v, want StreamDeleted", err)
	}
}

// manualClock is a clock that moves only when told.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
