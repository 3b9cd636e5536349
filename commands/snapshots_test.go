package commands_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hermes/adapters/eventstore/sqlite"
	"hermes/commands"
	"hermes/domain"
	"hermes/events"
)

// longLaneKey is the lane the snapshot tests and benchmarks fill.
const longLaneKey = "agent:main:telegram:dm:4242"

// longLaneEvent is the i-th event (0-based) of a long lane: a session
// created, then turns opened and completed, each completion adding one
// input token, so a lane folded with an event missing or counted twice
// has another total.
func longLaneEvent(key string, i int, at time.Time) events.Event {
	if i == 0 {
		return events.SessionCreated{SessionKey: key, SessionID: "20260509_100000_aaaaaaaa",
			Origin:   events.Source{Platform: "telegram", ChatID: "4242", ChatType: "dm", UserName: "Ada"},
			Platform: "telegram", ChatType: "dm", At: at}
	}
	turn := fmt.Sprintf("t%d", (i+1)/2)
	if i%2 == 1 {
		return events.TurnStarted{TurnID: turn, SessionID: "20260509_100000_aaaaaaaa", At: at}
	}
	return events.TurnCompleted{TurnID: turn, SessionID: "20260509_100000_aaaaaaaa", InputTokens: 1, At: at}
}

// longLaneID is the id of the i-th event of the long lane key.
func longLaneID(key string, i int) string { return fmt.Sprintf("%s/%d", key, i) }

// appendLongLane appends the events from..to-1 of the long lane, in appends
// of up to 1,000 events, and returns them.
func appendLongLane(tb testing.TB, store events.Store, from, to int) []events.Event {
	return appendLane(tb, store, longLaneKey, from, to)
}

// appendLane appends the events from..to-1 of a long lane with key.
func appendLane(tb testing.TB, store events.Store, key string, from, to int) []events.Event {
	tb.Helper()
	at := time.Date(2026, 5, 9, 10, 0, 0, 0, time.UTC)
	var all []events.Event
	for start := from; start < to; start += 1000 {
		end := min(start+1000, to)
		ps := make([]events.Proposed, 0, end-start)
		for i := start; i < end; i++ {
			e := longLaneEvent(key, i, at.Add(time.Duration(i)*time.Millisecond))
			ps = append(ps, events.Proposed{ID: longLaneID(key, i), Event: e,
				Metadata: events.Metadata{SchemaVersion: events.SchemaVersionOf(e.EventType())}})
			all = append(all, e)
		}
		if _, err := store.Append(context.Background(), events.LaneStream(key), events.ExactVersion(uint64(start)), ps); err != nil {
			tb.Fatalf("append lane %s %d..%d: %v", key, start, end, err)
		}
	}
	return all
}

// readCountingLog counts the events a handler reads from the log.
type readCountingLog struct {
	commands.EventLog
	read atomic.Int64
}

func (c *readCountingLog) ReadStream(ctx context.Context, stream string, from uint64, count int, dir events.Direction) ([]events.Envelope, error) {
	envs, err := c.EventLog.ReadStream(ctx, stream, from, count, dir)
	c.read.Add(int64(len(envs)))
	return envs, err
}

func openStore(tb testing.TB) *sqlite.Store {
	tb.Helper()
	store, err := sqlite.Open(filepath.Join(tb.TempDir(), "events.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	return store
}

// TestSnapshotLoadFoldsTheTail: a load that folds a long lane writes its
// snapshot; a handler with an empty cache then reads the snapshot and only
// the events appended after it, and folds the same lane as the whole
// history does.
func TestSnapshotLoadFoldsTheTail(t *testing.T) {
	ctx := t.Context()
	store := openStore(t)
	history := appendLongLane(t, store, 0, 1500)

	first := commands.NewHandler(store, commands.DefaultConfig(), commands.WithSnapshots(store, 100))
	if _, _, err := first.Lane(ctx, longLaneKey); err != nil {
		t.Fatal(err)
	}
	first.WaitSnapshots()
	snap, err := store.ReadSnapshot(ctx, events.LaneStream(longLaneKey))
	if err != nil || snap.Version != 1500 || snap.Schema != domain.LaneSchemaVersion {
		t.Fatalf("ReadSnapshot after a load of 1,500 events = version %d schema %d, %v; want 1500, %d",
			snap.Version, snap.Schema, err, domain.LaneSchemaVersion)
	}
	history = append(history, appendLongLane(t, store, 1500, 1510)...)

	tests := []struct {
		name     string
		opts     func(*sqlite.Store) []commands.Option
		wantRead int64
	}{
		{"with snapshots: the snapshot's event and the 10 after it", func(s *sqlite.Store) []commands.Option {
			return []commands.Option{commands.WithSnapshots(s, 100)}
		}, 11},
		{"without snapshots: the whole stream", func(*sqlite.Store) []commands.Option { return nil }, 1510},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &readCountingLog{EventLog: store}
			h := commands.NewHandler(log, commands.DefaultConfig(), tt.opts(store)...)
			lane, version, err := h.Lane(ctx, longLaneKey)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(domain.Replay(history), lane); version != 1510 || diff != "" {
				t.Errorf("Lane() = version %d, want 1510; lane differs from the full fold (-want +got):\n%s", version, diff)
			}
			if got := log.read.Load(); got != tt.wantRead {
				t.Errorf("Lane() read %d events, want %d", got, tt.wantRead)
			}
			h.WaitSnapshots()
		})
	}
}

// lyingSnapshots serves a fixed snapshot and records the writes it is
// handed, which it passes on to the store.
type lyingSnapshots struct {
	events.SnapshotStore
	serve events.Snapshot

	mu     sync.Mutex
	writes []events.Snapshot
}

func (l *lyingSnapshots) ReadSnapshot(context.Context, string) (events.Snapshot, error) {
	return l.serve, nil
}

func (l *lyingSnapshots) WriteSnapshot(ctx context.Context, s events.Snapshot) error {
	l.mu.Lock()
	l.writes = append(l.writes, s)
	l.mu.Unlock()
	return l.SnapshotStore.WriteSnapshot(ctx, s)
}

// TestSnapshotNeverTrustedOverTheLog: a snapshot is used only when its
// schema is this build's and the log holds its event at its version; for
// every other reason it is discarded, the lane is folded from its first
// event, and the snapshot is rewritten from that fold. The control, a
// snapshot that matches the log, is used as it is (it claims another
// session id), so the check can fail.
func TestSnapshotNeverTrustedOverTheLog(t *testing.T) {
	ctx := t.Context()
	store := openStore(t)
	history := appendLongLane(t, store, 0, 40)
	truth := domain.Replay(history)
	bogus := truth
	bogus.SessionID, bogus.InputTokens = "from-the-snapshot", 999_999
	data := domain.EncodeLaneSnapshot(bogus)
	stream := events.LaneStream(longLaneKey)
	snap := func(schema int, version uint64, id string, data []byte) events.Snapshot {
		return events.Snapshot{Stream: stream, Schema: schema, Version: version, EventID: id, Data: data}
	}
	tests := []struct {
		name string
		snap events.Snapshot
		// used: the snapshot is trusted (the control).
		used bool
	}{
		{"control: it matches the log", snap(domain.LaneSchemaVersion, 40, longLaneID(longLaneKey, 39), data), true},
		{"another schema", snap(domain.LaneSchemaVersion+1, 40, longLaneID(longLaneKey, 39), data), false},
		{"an older schema", snap(domain.LaneSchemaVersion-1, 40, longLaneID(longLaneKey, 39), data), false},
		{"undecodable", snap(domain.LaneSchemaVersion, 40, longLaneID(longLaneKey, 39), []byte(`{"SessionID":`)), false},
		{"another event at its version", snap(domain.LaneSchemaVersion, 40, longLaneID(longLaneKey, 38), data), false},
		{"a version past the log's end", snap(domain.LaneSchemaVersion, 45, longLaneID(longLaneKey, 44), data), false},
		{"an event id the log does not have", snap(domain.LaneSchemaVersion, 20, "not-in-the-log", data), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := store.DeleteSnapshot(ctx, stream); err != nil {
				t.Fatal(err)
			}
			lying := &lyingSnapshots{SnapshotStore: store, serve: tt.snap}
			h := commands.NewHandler(store, commands.DefaultConfig(), commands.WithSnapshots(lying, 100))
			lane, version, err := h.Lane(ctx, longLaneKey)
			if err != nil {
				t.Fatal(err)
			}
			h.WaitSnapshots()
			want := truth
			if tt.used {
				want = bogus
			}
			if diff := cmp.Diff(want, lane); version != 40 || diff != "" {
				t.Fatalf("Lane() = version %d, want 40; lane (-want +got):\n%s", version, diff)
			}
			if tt.used {
				if len(lying.writes) != 0 {
					t.Errorf("a matching snapshot folded with nothing after it was rewritten: %d writes", len(lying.writes))
				}
				return
			}
			stored, err := store.ReadSnapshot(ctx, stream)
			if err != nil || len(lying.writes) != 1 || stored.Version != 40 || stored.EventID != longLaneID(longLaneKey, 39) || stored.Schema != domain.LaneSchemaVersion {
				t.Fatalf("after discarding: %d writes, stored %+v, %v; want one rewrite at version 40", len(lying.writes), stored, err)
			}
			rewritten, err := domain.DecodeLaneSnapshot(stored.Schema, stored.Data)
			if diff := cmp.Diff(truth, rewritten); err != nil || diff != "" {
				t.Errorf("the rewritten snapshot (%v) differs from the full fold (-want +got):\n%s", err, diff)
			}
		})
	}
}

// TestSnapshotUnreadableStoreFoldsEverything: a snapshot store that fails
// to read costs the load its shortcut, never its answer.
func TestSnapshotUnreadableStoreFoldsEverything(t *testing.T) {
	store := openStore(t)
	history := appendLongLane(t, store, 0, 30)
	h := commands.NewHandler(store, commands.DefaultConfig(), commands.WithSnapshots(failingSnapshots{store}, 10))
	lane, _, err := h.Lane(t.Context(), longLaneKey)
	if err != nil {
		t.Fatal(err)
	}
	h.WaitSnapshots()
	if diff := cmp.Diff(domain.Replay(history), lane); diff != "" {
		t.Errorf("Lane() with a failing snapshot store (-want +got):\n%s", diff)
	}
}

type failingSnapshots struct{ events.SnapshotStore }

func (failingSnapshots) ReadSnapshot(context.Context, string) (events.Snapshot, error) {
	return events.Snapshot{}, errors.New("disk on fire")
}
