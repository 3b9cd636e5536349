package commands

import (
	"context"
	"errors"
	"sync"
	"time"

	"hermes/domain"
	"hermes/events"
)

// DefaultSnapshotAfter is how many events a load may fold before it writes
// the lane's snapshot: one read page, so loading any lane reads its
// snapshot and about one page of events, however long its history.
const DefaultSnapshotAfter = readPage

// Bounds of the snapshot writes: how many may be in flight (a load that
// finds them all busy writes none; a later load will), and how long one
// may take.
const (
	maxSnapshotWrites  = 4
	snapshotWriteLimit = 30 * time.Second
)

// WithSnapshots keeps lane snapshots in store (the SQLite store; KurrentDB
// keeps none, and without this option every load folds the whole stream):
// a load that folds more than after events (0: DefaultSnapshotAfter) writes
// the lane's snapshot, asynchronously, and the next load of the lane reads
// it and folds only the events after it. A snapshot is checked against the
// log before it is used (see [events.Snapshot]), and time travel never
// reads one.
func WithSnapshots(store events.SnapshotStore, after int) Option {
	return func(h *Handler) {
		if after <= 0 {
			after = DefaultSnapshotAfter
		}
		h.snapshots = snapshots{store: store, after: after, slots: make(chan struct{}, maxSnapshotWrites)}
	}
}

// snapshots reads and writes lane snapshots; the zero value keeps none.
type snapshots struct {
	store events.SnapshotStore
	after int
	slots chan struct{}
	// writing counts the writes in flight ([Handler.WaitSnapshots]).
	writing sync.WaitGroup
}

// read returns the lane as its snapshot has it, and whether the stream had
// a snapshot at all. A snapshot this build cannot use (another schema,
// undecodable) or a failed read gives the zero state: the lane is then
// folded from its first event, which is always correct.
func (s *snapshots) read(ctx context.Context, stream string) (laneState, bool) {
	if s.store == nil {
		return laneState{}, false
	}
	snap, err := s.store.ReadSnapshot(ctx, stream)
	if err != nil {
		return laneState{}, !errors.Is(err, events.ErrSnapshotNotFound)
	}
	lane, err := domain.DecodeLaneSnapshot(snap.Schema, snap.Data)
	if err != nil || snap.Version == 0 || snap.EventID == "" {
		return laneState{}, true
	}
	return laneState{lane: lane, version: snap.Version, eventID: snap.EventID}, true
}

// write stores st as stream's snapshot off the caller's path. Failures are
// dropped: a snapshot only saves work, and the next load that folds past
// the threshold writes it again. The store refuses one that no longer
// matches the log (an erasure appended meanwhile).
func (s *snapshots) write(stream string, st laneState) {
	if s.store == nil || st.eventID == "" {
		return
	}
	select {
	case s.slots <- struct{}{}:
	default:
		return
	}
	s.writing.Add(1)
	go func() {
		defer s.writing.Done()
		defer func() { <-s.slots }()
		data := domain.EncodeLaneSnapshot(st.lane)
		ctx, cancel := context.WithTimeout(context.Background(), snapshotWriteLimit)
		defer cancel()
		_ = s.store.WriteSnapshot(ctx, events.Snapshot{
			Stream: stream, Schema: domain.LaneSchemaVersion, Version: st.version, EventID: st.eventID, Data: data,
		})
	}()
}

// WaitSnapshots waits for the snapshot writes in flight (a clean stop, and
// tests that read a snapshot a load wrote).
func (h *Handler) WaitSnapshots() { h.snapshots.writing.Wait() }
