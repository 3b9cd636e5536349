package storetest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hermes/events"
)

// testSnapshots checks the optional events.SnapshotStore part of a store:
// a snapshot is kept only while it describes the log, an older one never
// replaces a newer one, and an erasure appended to the stream takes its
// snapshot with it. A store without snapshots (KurrentDB) skips it.
func testSnapshots(t *testing.T, s events.Store) {
	ss, ok := s.(events.SnapshotStore)
	if !ok {
		t.Skip("the store keeps no snapshots (every load folds the whole stream)")
	}
	ctx := t.Context()
	stream := lane(1)
	ps := append([]events.Proposed{created(stream, "snap", "Ada Marker")}, numbered(stream, "snap", 4)...)
	res := mustAppend(t, s, stream, events.NoStream(), ps)
	at := func(v uint64, schema int, data string) events.Snapshot {
		return events.Snapshot{Stream: stream, Schema: schema, Version: v, EventID: ps[v-1].ID, Data: []byte(data)}
	}
	read := func(t *testing.T) (events.Snapshot, error) {
		t.Helper()
		return ss.ReadSnapshot(ctx, stream)
	}

	if _, err := read(t); !errors.Is(err, events.ErrSnapshotNotFound) {
		t.Fatalf("ReadSnapshot(no snapshot) error = %v, want ErrSnapshotNotFound", err)
	}
	steps := []struct {
		name    string
		write   events.Snapshot
		wantErr error
		// want is the stored snapshot after the step.
		want events.Snapshot
	}{
		{"first snapshot", at(3, 1, "three"), nil, at(3, 1, "three")},
		{"a later one replaces it", at(4, 1, "four"), nil, at(4, 1, "four")},
		{"an earlier one of the same schema is ignored", at(2, 1, "two"), nil, at(4, 1, "four")},
		{"the same one again is harmless", at(4, 1, "four"), nil, at(4, 1, "four")},
		{"another schema replaces it, even earlier", at(2, 2, "two v2"), nil, at(2, 2, "two v2")},
		{"a wrong event id is refused",
			events.Snapshot{Stream: stream, Schema: 2, Version: 5, EventID: ps[0].ID, Data: []byte("x")},
			events.ErrSnapshotStale, at(2, 2, "two v2")},
		{"a version past the stream's end is refused",
			events.Snapshot{Stream: stream, Schema: 2, Version: 9, EventID: ps[4].ID, Data: []byte("x")},
			events.ErrSnapshotStale, at(2, 2, "two v2")},
		{"a stream with no events is refused",
			events.Snapshot{Stream: lane(2), Schema: 2, Version: 1, EventID: ps[0].ID, Data: []byte("x")},
			events.ErrSnapshotStale, at(2, 2, "two v2")},
	}
	for _, st := range steps {
		err := ss.WriteSnapshot(ctx, st.write)
		if !errors.Is(err, st.wantErr) {
			t.Fatalf("%s: WriteSnapshot(version %d) error = %v, want %v", st.name, st.write.Version, err, st.wantErr)
		}
		got, err := read(t)
		if err != nil {
			t.Fatalf("%s: ReadSnapshot error = %v", st.name, err)
		}
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Fatalf("%s: ReadSnapshot (-want +got):\n%s", st.name, diff)
		}
	}
	if _, err := ss.ReadSnapshot(ctx, lane(2)); !errors.Is(err, events.ErrSnapshotNotFound) {
		t.Errorf("ReadSnapshot(other stream) error = %v, want ErrSnapshotNotFound", err)
	}

	for range 2 {
		if err := ss.DeleteSnapshot(ctx, stream); err != nil {
			t.Fatalf("DeleteSnapshot error = %v", err)
		}
		if _, err := read(t); !errors.Is(err, events.ErrSnapshotNotFound) {
			t.Fatalf("ReadSnapshot(after delete) error = %v, want ErrSnapshotNotFound", err)
		}
	}

	if _, ok := s.(events.Eraser); !ok {
		return
	}
	// An erasure appended to the stream deletes its snapshot in the same
	// append, and a snapshot folded before it (a load racing the erasure)
	// is refused afterwards.
	if err := ss.WriteSnapshot(ctx, at(5, 1, "Ada Marker")); err != nil {
		t.Fatal(err)
	}
	erasure := events.Proposed{ID: id(stream + "/erasure"), Event: events.LaneErased{ErasureID: "er-1", QueueTexts: true, Reason: events.ErasurePerson, At: t0},
		Metadata: events.Metadata{SchemaVersion: events.SchemaVersionOf(events.TypeLaneErased), Command: "erase_person"}}
	mustAppend(t, s, stream, events.ExactVersion(res.LastVersion()), []events.Proposed{erasure})
	if got, err := read(t); !errors.Is(err, events.ErrSnapshotNotFound) {
		t.Fatalf("ReadSnapshot(after an erasure) = %q, %v; want ErrSnapshotNotFound", got.Data, err)
	}
	if err := ss.WriteSnapshot(ctx, at(5, 1, "Ada Marker")); !errors.Is(err, events.ErrSnapshotStale) {
		t.Fatalf("WriteSnapshot(folded before the erasure) error = %v, want ErrSnapshotStale", err)
	}
	after := events.Snapshot{Stream: stream, Schema: 1, Version: 6, EventID: erasure.ID, Data: []byte("erased")}
	if err := ss.WriteSnapshot(ctx, after); err != nil {
		t.Fatalf("WriteSnapshot(covering the erasure) error = %v", err)
	}
	if got, err := read(t); err != nil || !bytes.Equal(got.Data, after.Data) {
		t.Fatalf("ReadSnapshot = %q, %v; want the one covering the erasure", got.Data, err)
	}
}
