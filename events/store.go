package events

import (
	"context"
	"errors"
	"fmt"
)

// Errors returned by every [Store].
var (
	// ErrWrongExpectedVersion: the stream's current version is not the one the
	// append expected. Nothing was appended; reload, decide again, retry.
	ErrWrongExpectedVersion = errors.New("wrong expected version")
	// ErrStreamNotFound: the stream has no events.
	ErrStreamNotFound = errors.New("stream not found")
	// ErrInvalidAppend: the append itself is malformed (no events, an empty
	// id, an id repeated within the append, an empty stream name).
	ErrInvalidAppend = errors.New("invalid append")
	// ErrStorageFull: the write could not be made durable because the disk
	// is full or refuses writes (SQLite's FULL or IOERR, the OS's ENOSPC or
	// EDQUOT). Nothing was appended; the same write succeeds once space
	// returns. Read models answer it too when they cannot record a batch.
	ErrStorageFull = errors.New("insufficient storage")
	// ErrLogDamaged: a read or a write of the log met damage (corrupt
	// pages, an event that does not decode, a hole in the positions), or a
	// check of the whole log found it. The store refuses every write from
	// then on, so nothing is acknowledged that the damaged file may not
	// keep; the way out is a restore or a salvage.
	ErrLogDamaged = errors.New("event log is damaged")
)

// ExpectedVersion is the optimistic-concurrency condition of an append.
type ExpectedVersion struct {
	kind    expectedKind
	version uint64
}

type expectedKind uint8

const (
	expectAny expectedKind = iota
	expectNoStream
	expectExact
)

// AnyVersion appends whatever the stream's version is.
func AnyVersion() ExpectedVersion { return ExpectedVersion{kind: expectAny} }

// NoStream appends only if the stream has no events yet.
func NoStream() ExpectedVersion { return ExpectedVersion{kind: expectNoStream} }

// ExactVersion appends only if the stream's last event has version v.
// ExactVersion(0) is the same as [NoStream].
func ExactVersion(v uint64) ExpectedVersion {
	if v == 0 {
		return NoStream()
	}
	return ExpectedVersion{kind: expectExact, version: v}
}

// Matches reports whether a stream whose last version is current satisfies
// the condition (current 0 means the stream does not exist).
func (x ExpectedVersion) Matches(current uint64) bool {
	switch x.kind {
	case expectNoStream:
		return current == 0
	case expectExact:
		return current == x.version
	default:
		return true
	}
}

// IsAny reports whether the condition accepts any version.
func (x ExpectedVersion) IsAny() bool { return x.kind == expectAny }

// Exact returns the version an [ExactVersion] condition names, and false for
// [AnyVersion] and [NoStream]. A store that forwards the condition to a
// server (KurrentDB's expected revision) needs it.
func (x ExpectedVersion) Exact() (uint64, bool) { return x.version, x.kind == expectExact }

func (x ExpectedVersion) String() string {
	switch x.kind {
	case expectNoStream:
		return "no stream"
	case expectExact:
		return fmt.Sprintf("version %d", x.version)
	default:
		return "any version"
	}
}

// WrongVersionError gives the detail of an [ErrWrongExpectedVersion].
type WrongVersionError struct {
	Stream   string
	Expected ExpectedVersion
	Actual   uint64
}

func (e *WrongVersionError) Error() string {
	return fmt.Sprintf("append %s: expected %s, stream is at version %d", e.Stream, e.Expected, e.Actual)
}

// Unwrap makes errors.Is(err, ErrWrongExpectedVersion) true.
func (e *WrongVersionError) Unwrap() error { return ErrWrongExpectedVersion }

// AppendResult says where appended events landed.
type AppendResult struct {
	// Versions and Positions hold one entry per proposed event, in order.
	Versions  []uint64
	Positions []uint64
	// Duplicate is true when every proposed id was already stored in the
	// stream: nothing was appended and the original places are returned.
	Duplicate bool
}

// LastVersion is the stream version after the append.
func (r AppendResult) LastVersion() uint64 {
	if len(r.Versions) == 0 {
		return 0
	}
	return r.Versions[len(r.Versions)-1]
}

// LastPosition is the global position of the last appended event.
func (r AppendResult) LastPosition() uint64 {
	if len(r.Positions) == 0 {
		return 0
	}
	return r.Positions[len(r.Positions)-1]
}

// Direction of a stream read.
type Direction uint8

const (
	Forwards Direction = iota
	Backwards
)

// Store is the event-store port: an append-only log of streams with a global
// order. The embedded SQLite store (adapters/eventstore/sqlite) and the
// KurrentDB store (adapters/eventstore/kurrentdb) implement it and pass the
// contract suite in testfixtures/storetest.
type Store interface {
	// Append writes events to the end of stream, atomically, if the stream's
	// version satisfies expected. It returns only after the events are
	// durable. If every proposed id is already stored in the stream (a
	// retried command), it appends nothing and returns the original versions
	// and positions with Duplicate set, whatever expected says. Errors:
	// ErrWrongExpectedVersion (as *WrongVersionError), ErrInvalidAppend.
	Append(ctx context.Context, stream string, expected ExpectedVersion, proposed []Proposed) (AppendResult, error)

	// ReadStream returns up to count events of stream starting at version
	// from (inclusive), in the given direction. Reading backwards from
	// version 0 starts at the last event. ErrStreamNotFound when the stream
	// has no events.
	ReadStream(ctx context.Context, stream string, from uint64, count int, dir Direction) ([]Envelope, error)

	// ReadAll returns up to count events with a global position greater
	// than after, in position order.
	ReadAll(ctx context.Context, after uint64, count int) ([]Envelope, error)

	// Head returns the global position of the last committed event (0 when
	// the log is empty).
	Head(ctx context.Context) (uint64, error)

	// Subscribe delivers every event with a position greater than after, in
	// order and without gaps or duplicates: first the history (catch-up), then
	// events as they are committed (live). Delivery never blocks appends: a
	// slow subscriber only falls behind. The subscription ends when ctx is
	// done or Close is called.
	Subscribe(ctx context.Context, after uint64) (Subscription, error)

	// Close releases the store.
	Close() error
}

// Subscription is a running catch-up subscription.
type Subscription interface {
	// Events yields the events in position order; it is closed when the
	// subscription ends.
	Events() <-chan Envelope
	// Err says why the subscription ended (nil after Close or a cancelled
	// context).
	Err() error
	// Close ends the subscription.
	Close()
}
