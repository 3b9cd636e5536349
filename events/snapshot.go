package events

import (
	"context"
	"errors"
)

// ErrSnapshotNotFound: the stream has no snapshot.
var ErrSnapshotNotFound = errors.New("snapshot not found")

// ErrSnapshotStale: a snapshot was refused because it does not describe the
// log as it is: no event with its id at its version, or an erasure appended
// after the version it covers (its state would hold erased content).
var ErrSnapshotStale = errors.New("snapshot does not match the log")

// Snapshot is a stream's state folded up to one of its events, kept so that
// loading the stream reads the snapshot and only the events after it. It is
// a cache of the log, never trusted over it: the reader checks that the log
// still holds EventID at Version, and that Schema is the one it folds with,
// before using Data.
type Snapshot struct {
	Stream string
	// Schema is the version of the fold and the encoding of Data (the
	// domain's lane schema version): any other value is unreadable.
	Schema int
	// Version is the stream version of the last event folded into Data,
	// and EventID that event's id.
	Version uint64
	EventID string
	// Data is the encoded state.
	Data []byte
}

// SnapshotStore is the optional part of a [Store] that keeps one snapshot
// per stream next to the log (the SQLite store, in the log's own file).
// Snapshots hold what their stream's events hold, personal content included,
// so an [Eraser] removes a stream's snapshot in the transaction of any
// erasure appended to it.
type SnapshotStore interface {
	// ReadSnapshot returns stream's snapshot, or ErrSnapshotNotFound.
	ReadSnapshot(ctx context.Context, stream string) (Snapshot, error)

	// WriteSnapshot replaces stream's snapshot with s, durably, unless the
	// stored one covers a later version (then it keeps that one and returns
	// nil). It refuses with ErrSnapshotStale, changing nothing, when the
	// log has no event s.EventID at s.Version of s.Stream, or holds an
	// erasure of the stream after s.Version. Writing the same snapshot
	// twice is harmless.
	WriteSnapshot(ctx context.Context, s Snapshot) error

	// DeleteSnapshot removes stream's snapshot, if any (then its bytes are
	// gone from the store's files after the next Purge). Idempotent.
	DeleteSnapshot(ctx context.Context, stream string) error
}
