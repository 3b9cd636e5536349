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

// EncodeLaneSnapshot encodes l for a snapshot of schema LaneSchemaVersion.
func EncodeLaneSnapshot(l Lane) ([]byte, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return nil, fmt.Errorf("encode lane snapshot: %w", err)
	}
	return b, nil
}

// DecodeLaneSnapshot decodes a snapshot written with schema: ErrSnapshotSchema
// when schema is not LaneSchemaVersion or data is not a lane of it.
func DecodeLaneSnapshot(schema int, data []byte) (Lane, error) {
	if schema != LaneSchemaVersion {
		return Lane{}, fmt.Errorf("%w: snapshot schema %d, this build folds with %d", ErrSnapshotSchema, schema, LaneSchemaVersion)
	}
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
