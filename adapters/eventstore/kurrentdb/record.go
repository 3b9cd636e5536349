package kurrentdb

import (
	"bytes"
	"regexp"
	"strconv"
	"time"
)

// KurrentDB sets an event's created time itself, when it writes it. An
// event copied from another store keeps the time of the store it came from
// as one more member of its metadata, "hermes_recorded_at" (Unix
// nanoseconds), the last one, taken out again when the event is read:
// Envelope.RecordedAt is that time. This store does not take part in
// hermes store copy (it implements no events.RecordStore): a copy writes
// events as stored, and on KurrentDB an event with personal content must
// be sealed as an append seals it (seal.go), or no erasure could remove it
// from the server.
const recordedAtKey = `"hermes_recorded_at":`

var recordedAtSuffix = regexp.MustCompile(`(,?)"hermes_recorded_at":(-?[0-9]+)}\s*$`)

// splitRecordedAt takes the recorded time out of a copied event's metadata:
// the metadata as it was given and the time, or the metadata unchanged and
// false.
func splitRecordedAt(meta []byte) ([]byte, time.Time, bool) {
	if !bytes.Contains(meta, []byte(recordedAtKey)) {
		return meta, time.Time{}, false
	}
	m := recordedAtSuffix.FindSubmatchIndex(meta)
	if m == nil {
		return meta, time.Time{}, false
	}
	ns, err := strconv.ParseInt(string(meta[m[4]:m[5]]), 10, 64)
	if err != nil {
		return meta, time.Time{}, false
	}
	out := make([]byte, 0, m[0]+1)
	out = append(out, meta[:m[0]]...)
	out = append(out, '}')
	return out, time.Unix(0, ns).UTC(), true
}
