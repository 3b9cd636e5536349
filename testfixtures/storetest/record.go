package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"hermes/events"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// testRecords: a store that writes records (events.RecordStore) keeps
// each exactly (stream, version, id, type, the bytes of data and
// metadata, the time to the nanosecond) in the order written, reads them
// back so, serves them as events, refuses a record that is not its
// stream's next version, and appends after them.
func testRecords(t *testing.T, s events.Store) {
	rs, ok := s.(events.RecordStore)
	if !ok {
		t.Skip("the store does not write records")
	}
	ctx := t.Context()
	rec := func(stream string, v uint64, i int) events.Record {
		tokens := int64(i)
		data, err := events.Encode(events.Touched{LastPromptTokens: &tokens, At: t0})
		if err != nil {
			t.Fatal(err)
		}
		return events.Record{
			Stream: stream, Version: v, ID: id(fmt.Sprintf("record/%s/%d/%d", stream, v, i)), Type: events.TypeTouched,
			Data: data,
			// Not as encoding/json would write it: the bytes are kept.
			Metadata:   []byte(fmt.Sprintf(`{"schema_version":1, "command":"copied %d"}`, i)),
			RecordedAt: time.Date(2025, 7, 1, 12, 0, 0, 123456789, time.UTC).Add(time.Duration(i) * time.Hour),
		}
	}
	a, b := lane(901), lane(902)
	want := []events.Record{rec(a, 1, 0), rec(b, 1, 1), rec(a, 2, 2), rec(a, 3, 3), rec(b, 2, 4)}
	if err := rs.WriteRecords(ctx, want[:3]); err != nil {
		t.Fatalf("WriteRecords() error = %v", err)
	}
	if err := rs.WriteRecords(ctx, want[3:]); err != nil {
		t.Fatalf("WriteRecords() error = %v", err)
	}
	// A record that skips a version, or takes one already written (another
	// event), writes nothing.
	for _, bad := range []events.Record{rec(a, 5, 5), rec(b, 2, 6), rec(lane(903), 2, 7)} {
		if err := rs.WriteRecords(ctx, []events.Record{bad}); !errors.Is(err, events.ErrWrongExpectedVersion) {
			t.Errorf("WriteRecords(%s@%d) error = %v, want ErrWrongExpectedVersion", bad.Stream, bad.Version, err)
		}
	}
	got, err := rs.ReadRecords(ctx, 0, 100)
	if err != nil {
		t.Fatalf("ReadRecords() error = %v", err)
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(events.Record{}, "Position")); diff != "" {
		t.Fatalf("ReadRecords() mismatch (-want +got):\n%s", diff)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Position <= got[i-1].Position {
			t.Fatalf("ReadRecords() positions %d then %d, want increasing", got[i-1].Position, got[i].Position)
		}
	}
	if after, err := rs.ReadRecords(ctx, got[1].Position, 2); err != nil || len(after) != 2 || after[0].ID != want[2].ID {
		t.Errorf("ReadRecords(after the second, 2) = %d records, %v; want the third and fourth", len(after), err)
	}
	envs, err := s.ReadAll(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(envs) != len(want) {
		t.Fatalf("ReadAll() = %d events, want %d", len(envs), len(want))
	}
	for i, e := range envs {
		if e.ID != want[i].ID || e.Version != want[i].Version || !e.RecordedAt.Equal(want[i].RecordedAt) || e.Metadata.Command != fmt.Sprintf("copied %d", i) {
			t.Errorf("ReadAll()[%d] = %s@%d %s at %v (%q), want %s@%d %s at %v", i, e.Stream, e.Version, e.ID, e.RecordedAt, e.Metadata.Command,
				want[i].Stream, want[i].Version, want[i].ID, want[i].RecordedAt)
		}
	}
	res := mustAppend(t, s, a, events.ExactVersion(3), touched(a, "after the copy"))
	if res.LastVersion() != 4 || res.LastPosition() <= got[len(got)-1].Position {
		t.Errorf("Append after the records = version %d at %d, want version 4 after position %d", res.LastVersion(), res.LastPosition(), got[len(got)-1].Position)
	}
}
