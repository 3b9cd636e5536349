package events

import (
	"context"
	"time"
)

// Record is an event exactly as a store keeps it: the bytes of its data and
// metadata as written (not decoded, not upcast) and the time the store
// recorded. A copy of the log between stores (hermes store copy) moves
// records, so that the copy holds the same events, byte for byte, in the
// same global order.
type Record struct {
	// Position is the record's place in the source's global order; a
	// store writing records draws positions of its own.
	Position   uint64
	Stream     string
	Version    uint64
	ID         string
	Type       string
	Data       []byte
	Metadata   []byte
	RecordedAt time.Time
}

// RecordStore is the optional part of a [Store] that reads and writes
// records, for a copy between stores. The SQLite, PostgreSQL and KurrentDB
// stores implement it.
type RecordStore interface {
	// ReadRecords returns up to count records with a position greater
	// than after, in position order (as ReadAll).
	ReadRecords(ctx context.Context, after uint64, count int) ([]Record, error)

	// WriteRecords appends records at the end of the log, in the order
	// given, each at its own Version with its id, type, data, metadata
	// and recorded time (Position is ignored): the stream must be at
	// Version-1 when the record is written, or nothing is written and the
	// error is ErrWrongExpectedVersion. A store with multi-stream
	// transactions writes the whole call in one; KurrentDB writes each
	// run of records of one stream atomically, in order. An [Erasure]
	// among them erases earlier events of its stream as an Append of it
	// does (a store that implements [Eraser]). Nothing else is checked:
	// it is for records read from another hermes store.
	WriteRecords(ctx context.Context, records []Record) error
}
