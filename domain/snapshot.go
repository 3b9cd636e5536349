package domain

import (
	"errors"
	"fmt"
)

// LaneSchemaVersion is the version of a lane snapshot: of the shape of
// [Lane] (every field, nested ones included) and of the fold [Evolve].
// Bump it with any change to either: a snapshot written with another
// version is discarded and the lane folded from its first event, so a
// changed rule reaches every lane. TestLaneSchemaGolden fails when Lane's
// fields change while this stays the same.
const LaneSchemaVersion = 3

// ErrSnapshotSchema: a snapshot was written with another LaneSchemaVersion
// (or is not a lane snapshot at all) and cannot be read.
var ErrSnapshotSchema = errors.New("lane snapshot schema mismatch")

// snapshotLaneCodec is the first byte of a snapshot in the lane codec
// (lanecodec.go); the lane follows it.
const snapshotLaneCodec = 0x01

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
	if len(data) == 0 || data[0] != snapshotLaneCodec {
		return Lane{}, fmt.Errorf("%w: not a lane snapshot", ErrSnapshotSchema)
	}
	l, err := DecodeLane(data[1:])
	if err != nil {
		return Lane{}, fmt.Errorf("%w: %w", ErrSnapshotSchema, err)
	}
	return l, nil
}
