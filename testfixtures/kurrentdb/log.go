package kurrentdb

import (
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// record is one event in the log.
type record struct {
	stream      string
	revision    uint64 // 0-based, per stream
	id          uuid.UUID
	eventType   string
	contentType string
	data        []byte
	metadata    []byte
	created     time.Time
	position    uint64 // commit = prepare
}

// recordOverhead stands for the header bytes of a prepare record in a real
// chunk file; it only makes positions look like byte offsets.
const recordOverhead = 86

func (r *record) size() uint64 {
	return uint64(recordOverhead + len(r.stream) + len(r.eventType) + len(r.data) + len(r.metadata))
}

// eventLog is the whole database: the $all log and an index per stream.
type eventLog struct {
	mu      sync.Mutex
	all     []*record
	streams map[string][]*record
	next    uint64 // position of the next record
	appends int    // user appends since the last system event
	// changed is closed and replaced whenever records are added.
	changed chan struct{}
	now     func() time.Time
	// systemEvery writes a system event after that many user appends (0: never).
	systemEvery int
}

func newEventLog(now func() time.Time, systemEvery int) *eventLog {
	l := &eventLog{
		streams:     make(map[string][]*record),
		next:        128,
		changed:     make(chan struct{}),
		now:         now,
		systemEvery: systemEvery,
	}
	// A fresh KurrentDB node writes its default users and settings first.
	l.mu.Lock()
	l.writeSystem("$users", "$UserCreated", `{"LoginName":"admin"}`)
	l.writeSystem("$user-admin", "$user", `{"loginName":"admin","fullName":"KurrentDB Administrator","groups":["$admins"]}`)
	l.writeSystem("$settings", "update-default-acl", `{"$userStreamAcl":{"$r":"$all"}}`)
	l.mu.Unlock()
	return l
}

// writeSystem adds one system event; l.mu is held.
func (l *eventLog) writeSystem(stream, eventType, data string) {
	l.add([]*record{{stream: stream, id: uuid.New(), eventType: eventType, contentType: "application/json", data: []byte(data)}})
}

// add places recs at the end of their stream and of $all; l.mu is held.
func (l *eventLog) add(recs []*record) {
	now := l.now().UTC()
	for _, r := range recs {
		r.revision = uint64(len(l.streams[r.stream]))
		r.position = l.next
		r.created = now
		l.next += r.size()
		l.streams[r.stream] = append(l.streams[r.stream], r)
		l.all = append(l.all, r)
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// expectation is an append's expected-revision option.
type expectation struct {
	kind     expectKind
	revision uint64
}

type expectKind int

const (
	expectAny expectKind = iota
	expectNoStream
	expectStreamExists
	expectRevision
)

// appendOutcome is what an append did.
type appendOutcome struct {
	wrongVersion bool
	// current is the last revision of the stream afterwards (or, on a wrong
	// version, now); exists is false when the stream has no events.
	current uint64
	exists  bool
	// idempotent: nothing written, the events were already there.
	idempotent bool
	position   uint64 // of the last event written
}

// appendEvents applies KurrentDB's write rules to one append.
func (l *eventLog) appendEvents(stream string, x expectation, recs []*record) appendOutcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	existing := l.streams[stream]
	cur := int64(len(existing)) - 1 // -1: no stream
	state := func(wrong bool) appendOutcome {
		return appendOutcome{wrongVersion: wrong, current: uint64(max(cur, 0)), exists: cur >= 0}
	}

	var expected int64 // the revision after which the events go
	switch x.kind {
	case expectNoStream:
		expected = -1
	case expectRevision:
		expected = int64(x.revision)
	case expectStreamExists:
		if cur < 0 {
			return state(true)
		}
		fallthrough
	case expectAny:
		// Best-effort de-duplication: the first id already in the stream.
		if len(recs) > 0 {
			for i, r := range existing {
				if r.id == recs[0].id {
					return l.idempotency(existing, int64(i)-1, recs, cur)
				}
			}
		}
		l.add(recs)
		l.systemTick()
		return appendOutcome{current: recs[len(recs)-1].revision, exists: true, position: recs[len(recs)-1].position}
	}
	switch {
	case expected == cur:
		if len(recs) == 0 {
			return state(false)
		}
		l.add(recs)
		l.systemTick()
		return appendOutcome{current: recs[len(recs)-1].revision, exists: true, position: recs[len(recs)-1].position}
	case expected < cur:
		return l.idempotency(existing, expected, recs, cur)
	default:
		return state(true)
	}
}

// idempotency decides a write whose events would go after revision
// expected, behind the stream's end: a success that writes nothing when the
// events that follow expected carry the proposed ids in order, a wrong
// expected version otherwise (including a partial match, which the server
// calls corrupted idempotency).
func (l *eventLog) idempotency(existing []*record, expected int64, recs []*record, cur int64) appendOutcome {
	start := expected + 1
	if start+int64(len(recs)) > int64(len(existing)) || len(recs) == 0 {
		return appendOutcome{wrongVersion: true, current: uint64(max(cur, 0)), exists: cur >= 0}
	}
	for i, r := range recs {
		if existing[start+int64(i)].id != r.id {
			return appendOutcome{wrongVersion: true, current: uint64(max(cur, 0)), exists: cur >= 0}
		}
	}
	last := existing[start+int64(len(recs))-1]
	return appendOutcome{idempotent: true, current: last.revision, exists: true}
}

// systemTick writes a statistics event every systemEvery user appends, the
// way a node writes to its $stats stream; l.mu is held.
func (l *eventLog) systemTick() {
	if l.systemEvery <= 0 {
		return
	}
	l.appends++
	if l.appends%l.systemEvery == 0 {
		l.writeSystem("$stats-127.0.0.1:2113", "$statsCollected", `{"proc-cpu":0.5}`)
	}
}

// allRecords returns $all as it is now, and the channel closed at the next
// change.
func (l *eventLog) allRecords() ([]*record, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all, l.changed
}

// streamRecords returns a stream as it is now, and the change channel.
func (l *eventLog) streamRecords(name string) ([]*record, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.streams[name], l.changed
}

// firstAtOrAfter is the index in all of the first record at or after pos.
func firstAtOrAfter(all []*record, pos uint64) int {
	lo, hi := 0, len(all)
	for lo < hi {
		m := (lo + hi) / 2
		if all[m].position < pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// filter is a server-side subscription or read filter.
type filter struct {
	onStream bool // else on event type
	prefixes []string
	re       *regexp.Regexp
}

func (f *filter) match(r *record) bool {
	if f == nil {
		return true
	}
	s := r.eventType
	if f.onStream {
		s = r.stream
	}
	if f.re != nil {
		return f.re.MatchString(s)
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
