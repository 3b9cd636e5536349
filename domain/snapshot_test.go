package domain_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hermes/domain"
	"hermes/events"
)

// laneShape lists every field of Lane, nested struct fields included (time
// values as leaves), one "path type" a line.
func laneShape() []string {
	var out []string
	seen := map[reflect.Type]bool{}
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == reflect.TypeFor[time.Time]() || seen[t] {
			return
		}
		seen[t] = true
		defer delete(seen, t)
		for i := range t.NumField() {
			f := t.Field(i)
			path := prefix + "." + f.Name
			out = append(out, fmt.Sprintf("%s %s %q", path, f.Type, f.Tag))
			walk(path, f.Type)
		}
	}
	walk("Lane", reflect.TypeFor[domain.Lane]())
	return out
}

// TestLaneSchemaGolden pins the shape of Lane to LaneSchemaVersion: a field
// added, removed, renamed or retyped anywhere in Lane changes what a
// snapshot decodes to, so it must come with a new LaneSchemaVersion (old
// snapshots are then discarded). Update with
// go test ./domain -run TestLaneSchemaGolden -update, after the bump.
func TestLaneSchemaGolden(t *testing.T) {
	path := filepath.Join("testdata", "lane_schema.golden")
	got := strings.Join(laneShape(), "\n") + "\n"
	b, err := os.ReadFile(path)
	if err != nil && !(*updateGoldens && errors.Is(err, os.ErrNotExist)) {
		t.Fatalf("read golden: %v", err)
	}
	version, fields, _ := strings.Cut(string(b), "\n")
	pinned, _ := strconv.Atoi(strings.TrimPrefix(version, "schema "))
	switch {
	case fields != got && pinned == domain.LaneSchemaVersion:
		t.Fatalf("Lane's fields changed but LaneSchemaVersion is still %d: bump it, then update %s with -update\n%s",
			pinned, path, cmp.Diff(fields, got))
	case *updateGoldens:
		if err := os.WriteFile(path, fmt.Appendf(nil, "schema %d\n%s", domain.LaneSchemaVersion, got), 0o644); err != nil {
			t.Fatal(err)
		}
	case pinned != domain.LaneSchemaVersion:
		t.Fatalf("%s pins schema %d, LaneSchemaVersion is %d: update it with -update", path, pinned, domain.LaneSchemaVersion)
	}
}

// foldHistory is a history that touches every part of the fold.
func foldHistory() []events.Event {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	origin := events.Source{Platform: "telegram", ChatID: "42", ChatType: "dm", UserID: "u42", UserName: "Ada"}
	tokens := int64(1234)
	return []events.Event{
		events.SessionCreated{SessionKey: "agent:main:telegram:dm:42", SessionID: "s1", Origin: origin, DisplayName: "Ada", Platform: "telegram", ChatType: "dm", At: t0},
		events.TurnStarted{TurnID: "t1", SessionID: "s1", At: t0.Add(time.Second)},
		events.TurnCompleted{TurnID: "t1", SessionID: "s1", InputTokens: 10, OutputTokens: 20, EstimatedCostUSD: 0.25, CostStatus: "estimated", LastPromptTokens: &tokens, At: t0.Add(2 * time.Second)},
		events.QueueItemAdded{ItemID: "q1", Kind: events.QueueKindFollowup, Text: "one", Message: json.RawMessage(`{"m":"x"}`), Placement: events.QueuePlacementSlot, At: t0.Add(3 * time.Second)},
		events.QueueItemAdded{ItemID: "q2", Kind: events.QueueKindQueue, Text: "two", Placement: events.QueuePlacementOverflow, At: t0.Add(4 * time.Second)},
		events.SessionAutoReset{SessionKey: "agent:main:telegram:dm:42", SessionID: "s2", PreviousSessionID: "s1", Origin: origin, Reason: "idle", HadActivity: true, At: t0.Add(5 * time.Hour)},
		events.Suspended{Reason: events.SuspendStopCommand, At: t0.Add(6 * time.Hour)},
		events.ResumeMarked{Reason: "restart_timeout", At: t0.Add(7 * time.Hour)},
		events.ActiveProcessesChanged{Count: 2, At: t0.Add(8 * time.Hour)},
		events.TurnStarted{TurnID: "t2", SessionID: "s2", At: t0.Add(9 * time.Hour)},
	}
}

// TestLaneFoldGolden pins the lane folded from foldHistory, written as JSON
// to be read: a change of Evolve's rules changes it, and must come with a
// new LaneSchemaVersion (a snapshot folded by the old rules would otherwise
// be trusted). Update with -update, after the bump.
func TestLaneFoldGolden(t *testing.T) {
	data, err := json.Marshal(domain.Replay(foldHistory()))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("schema %d\n%s\n", domain.LaneSchemaVersion, data)
	path := filepath.Join("testdata", "lane_fold.golden")
	if *updateGoldens {
		if b, err := os.ReadFile(path); err == nil {
			version, fields, _ := strings.Cut(string(b), "\n")
			if version == fmt.Sprintf("schema %d", domain.LaneSchemaVersion) && fields != string(data)+"\n" {
				t.Fatalf("the fold changed but LaneSchemaVersion is still %d: bump it first", domain.LaneSchemaVersion)
			}
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden: %v (run with -update)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("the folded lane differs from %s: a change of the fold needs a new LaneSchemaVersion, then -update (-golden +now):\n%s", path, diff)
	}
}

// TestLaneSnapshotRoundTrip: a snapshot decodes to the lane it encoded,
// and one of another schema or not a lane is refused with ErrSnapshotSchema.
func TestLaneSnapshotRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	lane := domain.Replay([]events.Event{
		events.SessionCreated{SessionKey: "k", SessionID: "s1", Origin: events.Source{Platform: "telegram", ChatID: "1", ChatType: "dm"}, At: t0},
		events.QueueItemAdded{ItemID: "q1", Kind: events.QueueKindFollowup, Text: "no message", Placement: events.QueuePlacementSlot, At: t0},
		events.QueueItemAdded{ItemID: "q2", Kind: events.QueueKindQueue, Text: "with", Message: json.RawMessage(`{"a":1}`), Placement: events.QueuePlacementOverflow, At: t0},
	})
	data := domain.EncodeLaneSnapshot(lane)
	tests := []struct {
		name    string
		schema  int
		data    []byte
		wantErr error
	}{
		{"same schema", domain.LaneSchemaVersion, data, nil},
		{"older schema", domain.LaneSchemaVersion - 1, data, domain.ErrSnapshotSchema},
		{"newer schema", domain.LaneSchemaVersion + 1, data, domain.ErrSnapshotSchema},
		{"not a lane", domain.LaneSchemaVersion, []byte(`[1,2]`), domain.ErrSnapshotSchema},
		{"empty", domain.LaneSchemaVersion, nil, domain.ErrSnapshotSchema},
		{"JSON that is not a lane", domain.LaneSchemaVersion, []byte(`{"SessionID":`), domain.ErrSnapshotSchema},
		{"cut short", domain.LaneSchemaVersion, data[:len(data)-1], domain.ErrSnapshotSchema},
		{"a byte too many", domain.LaneSchemaVersion, append(slices.Clone(data), 0), domain.ErrSnapshotSchema},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := domain.DecodeLaneSnapshot(tt.schema, tt.data)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("DecodeLaneSnapshot(%d) error = %v, want %v", tt.schema, err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			if diff := cmp.Diff(lane, got); diff != "" {
				t.Errorf("DecodeLaneSnapshot(EncodeLaneSnapshot(l)) differs (-want +got):\n%s", diff)
			}
		})
	}
}
