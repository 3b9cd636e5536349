package domain

import (
	"encoding/json"
	"errors"
	"fmt"
)

// LaneSchemaVersion is the version of a lane snapshot: of the shape of
// [Lane] (every field, nested ones included) and of the fold [Evolve].
// Bump it with any change to either: a snapshot written with another
// version is discarded and the lane folded from its first event, so a
// changed rule reaches every lane. TestLaneSchemaGolden fails when Lane's
// fields change while this stays the same.
const LaneSchemaVersion = 1

// ErrSnapshotSchema: a snapshot was written with another LaneSchemaVersion
// (or is not a lane snapshot at all) and cannot be read.
var ErrSnapshotSchema = errors.New("lane snapshot schema mismatch")

// snapshotLaneCodec is the first byte of a snapshot in the lane codec
// (lanecodec.go); the lane follows it.
const snapshotLaneCodec = 0x01

// jsonSnapshotSchema is the only schema whose snapshots may be JSON (a
// Lane as encoding/json writes it, first byte '{'): snapshots were
// written so until the lane codec. They keep loading while
// LaneSchemaVersion is 1; its next bump discards them, and this reader
// goes with it (TestJSONSnapshotStillLoads then fails, to say so).
const jsonSnapshotSchema = 1

// EncodeLaneSnapshot encodes l for a snapshot of schema LaneSchemaVersion,
// in the lane codec.
func EncodeLaneSnapshot(l Lane) []byte {
	return AppendLane(append(make([]byte, 0, 256), snapshotLaneCodec), l)
}

// DecodeLaneSnapshot decodes a snapshot written with schema: ErrSnapshotSchema
// when schema is not LaneSchemaVersion or data is not a lane of it.
func DecodeLaneSnapshot(schema int, data []byte) (Lane, error) {
	if schema != LaneSchemaVersion {
		return Lane{}, fmt.Errorf("%w: snapshot schema %d, this build folds with %d", ErrSnapshotSchema, schema, LaneSchemaVersion)
	}
	switch {
	case len(data) > 0 && data[0] == snapshotLaneCodec:
		l, err := DecodeLane(data[1:])
		if err != nil {
			return Lane{}, fmt.Errorf("%w: %w", ErrSnapshotSchema, err)
		}
		return l, nil
	case len(data) > 0 && data[0] == '{' && schema == jsonSnapshotSchema:
		return decodeJSONSnapshot(data)
	}
	return Lane{}, fmt.Errorf("%w: not a lane snapshot", ErrSnapshotSchema)
}

// decodeJSONSnapshot reads a snapshot written before the lane codec.
func decodeJSONSnapshot(data []byte) (Lane, error) {
	var l Lane
	if err := json.Unmarshal(data, &l); err != nil {
		return Lane{}, fmt.Errorf("%w: %w", ErrSnapshotSchema, err)
	}
	// A queued item without a message was encoded as null, which
	// json.RawMessage keeps as the four bytes; the fold holds nil.
	if l.Queue.Slot != nil && string(l.Queue.Slot.Message) == "null" {
		l.Queue.Slot.Message = nil
	}
	for i := range l.Queue.Overflow {
		if string(l.Queue.Overflow[i].Message) == "null" {
			l.Queue.Overflow[i].Message = nil
		}
	}
	return l, nil
}
