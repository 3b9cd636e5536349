package api_test

import (
	"net/http"
	"testing"
	"time"

	"hermes/commands"
	"hermes/domain"
	"hermes/events"
)

// TestTimeTravelIgnoresSnapshots: time travel folds the lane's full
// history, never its snapshot. The lane gets a snapshot at its last
// version that holds another state (a snapshot matching the log's event is
// trusted by loads: a fresh handler sees the snapshot's state, which shows
// it is there and read), and every time-travel read still answers the
// history's state.
func TestTimeTravelIgnoresSnapshots(t *testing.T) {
	h := newHarness(t)
	key := laneHistory(h)
	ctx := t.Context()
	stream := events.LaneStream(key)
	last, err := h.raw.ReadStream(ctx, stream, 0, 1, events.Backwards)
	if err != nil || len(last) != 1 || last[0].Version != 3 {
		t.Fatalf("last event of %s = %+v, %v; want version 3", key, last, err)
	}
	truth, _, err := commands.NewHandler(h.raw, commands.DefaultConfig()).Lane(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	other := truth
	other.Suspended, other.LastPromptTokens = false, 77
	data := domain.EncodeLaneSnapshot(other)
	if err := h.raw.WriteSnapshot(ctx, events.Snapshot{Stream: stream, Schema: domain.LaneSchemaVersion,
		Version: 3, EventID: last[0].ID, Data: data}); err != nil {
		t.Fatal(err)
	}
	loaded, _, err := commands.NewHandler(h.raw, commands.DefaultConfig(), commands.WithSnapshots(h.raw, 0)).Lane(ctx, key)
	if err != nil || loaded.LastPromptTokens != 77 {
		t.Fatalf("a load with snapshots = prompt %d, %v; want 77 (the snapshot is read)", loaded.LastPromptTokens, err)
	}

	for _, q := range []string{"?at_version=3", "?at_time=" + start.Add(5*time.Hour).Format(time.RFC3339)} {
		var got entry
		h.call("GET", lane(key, "/state"+q), nil, http.StatusOK, &got)
		if got.Version != 3 || !got.Suspended || got.LastPromptTokens != 9 {
			t.Errorf("GET state%s = version %d, suspended %v, prompt %d; want 3, true, 9 (the history, not the snapshot)",
				q, got.Version, got.Suspended, got.LastPromptTokens)
		}
	}
	var before entry
	h.call("GET", lane(key, "/state?at_version=2"), nil, http.StatusOK, &before)
	if before.Version != 2 || before.Suspended || before.LastPromptTokens != 9 {
		t.Errorf("GET state?at_version=2 = version %d, suspended %v, prompt %d; want 2, false, 9", before.Version, before.Suspended, before.LastPromptTokens)
	}
}
