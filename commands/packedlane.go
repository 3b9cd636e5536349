package commands

import (
	"encoding/binary"
	"errors"

	"hermes/domain"
)

// packedLane is a lane as the lane cache keeps it: its version, then its
// state in the lane codec of package domain (domain.AppendLane: varints,
// length-prefixed strings, one bit per flag), the one encoding of a lane
// that snapshots use too. A domain.Lane is 624 bytes plus a dozen strings
// of its own, most of them empty or repeated; packed, a typical lane takes
// about a fifth of that, which is most of what a lane costs resident.
type packedLane []byte

// errPackedLane: a packed lane ended early (a bug: the cache drops it and
// the lane is read from the store).
var errPackedLane = errors.New("packed lane is truncated")

// packLane packs st (its eventID is not kept).
func packLane(st laneState) packedLane {
	return appendPackedLane(make([]byte, 0, 160+len(st.lane.SessionKey)+len(st.lane.SessionID)), st)
}

// appendPackedLane appends st packed to b.
func appendPackedLane(b []byte, st laneState) packedLane {
	return domain.AppendLane(binary.AppendUvarint(b, st.version), st.lane)
}

// unpack returns the lane state packed in p.
func (p packedLane) unpack() (laneState, error) {
	version, n := binary.Uvarint(p)
	if n <= 0 {
		return laneState{}, errPackedLane
	}
	lane, err := domain.DecodeLane(p[n:])
	if err != nil {
		return laneState{}, errors.Join(errPackedLane, err)
	}
	return laneState{lane: lane, version: version}, nil
}

// cutUvarint reads a uvarint from the front of b; false when b does not
// start with one.
func cutUvarint(b []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, false
	}
	return v, b[n:], true
}

// cutBytes cuts a uvarint length and that many bytes from the front of b.
func cutBytes(b []byte) (v, rest []byte, ok bool) {
	n, rest, ok := cutUvarint(b)
	if !ok || n > uint64(len(rest)) {
		return nil, nil, false
	}
	return rest[:n:n], rest[n:], true
}
