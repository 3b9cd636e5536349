package kurrentdb

import (
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// record is one event in the log.
type record struct {
	stream      string
	revision    uint64 // 0-based, per stream; deletedStream for a tombstone
	id          uuid.UUID
	eventType   string
	contentType string
	data        []byte
	metadata    []byte
	created     time.Time
	position    uint64 // commit = prepare
	// meta is the parsed data of a metadata event (a JSON event of a
	// metastream); nil otherwise.
	meta *streamMetadata
}

// recordOverhead stands for the header bytes of a prepare record in a real
// chunk file; it only makes positions look like byte offsets.
const recordOverhead = 86

func (r *record) size() uint64 {
	return uint64(recordOverhead + len(r.stream) + len(r.eventType) + len(r.data) + len(r.metadata))
}

func (r *record) tombstone() bool { return r.revision == deletedStream }

// stream is one stream's index: the events it still holds and its last
// event number, which a scavenge never lowers.
type stream struct {
	recs []*record // ascending revision; a scavenge may leave gaps
	last int64     // -1: no events yet; deletedStream once tombstoned
}

// at is the record with revision rev, if the stream still holds it.
func (st *stream) at(rev uint64) *record {
	i, ok := slices.BinarySearchFunc(st.recs, rev, func(r *record, rev uint64) int {
		switch {
		case r.revision < rev:
			return -1
		case r.revision > rev:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return st.recs[i]
}

// firstAfter is the index in recs of the first record after revision rev
// (rev -1: the first record).
func firstAfter(recs []*record, rev int64) int {
	i, _ := slices.BinarySearchFunc(recs, rev, func(r *record, rev int64) int {
		if rev < 0 || r.revision > uint64(rev) {
			return 1
		}
		return -1
	})
	return i
}

// eventLog is the whole database: the $all log and an index per stream.
// Readers get slices of it without copying: records are only ever appended
// to the slices they hold, and a scavenge builds new slices.
type eventLog struct {
	mu      sync.Mutex
	all     []*record
	streams map[string]*stream
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
		streams:     make(map[string]*stream),
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

// writeSystem adds one JSON system event; l.mu is held.
func (l *eventLog) writeSystem(stream, eventType, data string) *record {
	r := &record{stream: stream, id: uuid.New(), eventType: eventType, contentType: contentTypeJSON, data: []byte(data)}
	l.add([]*record{r})
	return r
}

// add places recs at the end of their stream and of $all, numbering them
// after the stream's last event (a record already numbered deletedStream
// is a tombstone); l.mu is held.
func (l *eventLog) add(recs []*record) {
	now := l.now().UTC()
	for _, r := range recs {
		st := l.streams[r.stream]
		if st == nil {
			st = &stream{last: -1}
			l.streams[r.stream] = st
		}
		if r.revision != deletedStream {
			r.revision = uint64(st.last + 1)
		}
		st.last = int64(r.revision)
		r.position = l.next
		r.created = now
		if isMetastream(r.stream) && r.contentType == contentTypeJSON && len(r.data) > 0 {
			m := parseMetadata(r.data)
			r.meta = &m
		}
		l.next += r.size()
		st.recs = append(st.recs, r)
		l.all = append(l.all, r)
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// lastLocked is a stream's last event number as the server reports it: a
// metastream of a tombstoned stream is deleted too; l.mu is held.
func (l *eventLog) lastLocked(name string) int64 {
	if isMetastream(name) && l.lastLocked(originalOf(name)) == deletedStream {
		return deletedStream
	}
	if st := l.streams[name]; st != nil {
		return st.last
	}
	return -1
}

// metadataLocked is the metadata the server applies to a stream: the
// latest event of its metastream, or the fixed metastream metadata for a
// $$ stream; l.mu is held.
func (l *eventLog) metadataLocked(name string) streamMetadata {
	if isMetastream(name) {
		return metastreamMetadata
	}
	ms := l.streams[metastreamOf(name)]
	if ms == nil || len(ms.recs) == 0 {
		return emptyMetadata
	}
	r := ms.recs[len(ms.recs)-1]
	if r.meta == nil || int64(r.revision) != ms.last {
		return emptyMetadata
	}
	return *r.meta
}

// softDeletedLocked: the stream's metadata truncates before deletedStream;
// l.mu is held.
func (l *eventLog) softDeletedLocked(name string) bool {
	return !isMetastream(name) && l.metadataLocked(name).softDeleted()
}

// rawMetadataLocked is the data of the stream's latest metadata event;
// l.mu is held.
func (l *eventLog) rawMetadataLocked(name string) []byte {
	ms := l.streams[metastreamOf(name)]
	if ms == nil || len(ms.recs) == 0 {
		return nil
	}
	return ms.recs[len(ms.recs)-1].data
}

// expectation is an append's (or delete's) expected-revision option.
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

// decision is the server's commit check of a write (IndexWriter.CheckCommit).
type decision int

const (
	commitOK decision = iota
	commitIdempotent
	commitWrongVersion
	commitDeleted
)

// checkCommit decides a write of events with ids to name under x, with
// the server's rules for idempotency, soft-deleted and tombstoned streams;
// l.mu is held. idemLast is the revision of the last event an idempotent
// write found already written.
func (l *eventLog) checkCommit(name string, x expectation, ids []uuid.UUID) (d decision, cur int64, idemLast uint64) {
	cur = l.lastLocked(name)
	if cur == deletedStream {
		if len(ids) > 0 || (x.kind != expectAny && x.kind != expectNoStream) {
			return commitDeleted, cur, 0
		}
		return commitOK, cur, 0
	}
	st := l.streams[name]
	if st == nil {
		st = &stream{last: -1}
	}
	softDeleted := l.softDeletedLocked(name)
	if x.kind == expectStreamExists {
		if softDeleted {
			return commitWrongVersion, cur, 0
		}
		if cur < 0 && l.lastLocked(metastreamOf(name)) < 0 {
			return commitWrongVersion, cur, 0
		}
	}
	if x.kind == expectAny || x.kind == expectStreamExists {
		// The server looks the ids up in its cache of committed events.
		if len(ids) == 0 {
			return commitOK, cur, 0
		}
		var first *record
		for i := len(st.recs) - 1; i >= 0; i-- {
			if st.recs[i].id == ids[0] {
				first = st.recs[i]
				break
			}
		}
		if first == nil {
			return commitOK, cur, 0
		}
		for i, id := range ids {
			r := st.at(first.revision + uint64(i))
			if r == nil || r.id != id {
				return commitWrongVersion, cur, 0 // corrupted idempotency
			}
		}
		return commitIdempotent, cur, first.revision + uint64(len(ids)) - 1
	}
	expected := int64(-1)
	if x.kind == expectRevision {
		expected = int64(x.revision)
	}
	switch {
	case expected < cur:
		for i, id := range ids {
			r := st.at(uint64(expected + 1 + int64(i)))
			if r != nil && r.id == id {
				continue
			}
			if i == 0 && x.kind == expectNoStream && softDeleted {
				return commitOK, cur, 0 // recreating a soft-deleted stream
			}
			return commitWrongVersion, cur, 0
		}
		if len(ids) == 0 {
			if x.kind == expectNoStream && softDeleted {
				return commitOK, cur, 0
			}
			return commitWrongVersion, cur, 0
		}
		return commitIdempotent, cur, uint64(expected + int64(len(ids)))
	case expected > cur:
		return commitWrongVersion, cur, 0
	}
	return commitOK, cur, 0
}

// appendOutcome is what an append did.
type appendOutcome struct {
	wrongVersion bool
	deleted      bool // the stream (or, for a metastream, its stream) is tombstoned
	// current is the last revision of the stream afterwards (or, on a wrong
	// version, now); exists is false when the stream has no events.
	current uint64
	exists  bool
	// idempotent: nothing written, the events were already there.
	idempotent bool
	position   uint64 // of the last event written
}

// appendEvents applies KurrentDB's write rules to one append: the commit
// check, then, when the write lands on a soft-deleted stream (or on the
// metastream of one), the metadata event that undeletes it.
func (l *eventLog) appendEvents(name string, x expectation, recs []*record) appendOutcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		ids[i] = r.id
	}
	d, cur, idemLast := l.checkCommit(name, x, ids)
	state := appendOutcome{current: uint64(max(cur, 0)), exists: cur >= 0}
	switch d {
	case commitDeleted:
		return appendOutcome{deleted: true}
	case commitWrongVersion:
		state.wrongVersion = true
		return state
	case commitIdempotent:
		return appendOutcome{idempotent: true, current: idemLast, exists: true}
	}
	softDeleted := l.softDeletedLocked(name)
	softDeletedOriginal := isMetastream(name) && l.softDeletedLocked(originalOf(name))
	if len(recs) > 0 {
		l.add(recs)
		l.systemTick()
	}
	if softDeleted {
		l.undelete(name, cur+1)
	}
	if softDeletedOriginal {
		orig := originalOf(name)
		l.undelete(orig, l.lastLocked(orig)+1)
	}
	if len(recs) == 0 {
		return state
	}
	last := recs[len(recs)-1]
	return appendOutcome{current: last.revision, exists: true, position: last.position}
}

// undelete writes the stream's latest metadata again with $tb at from, as
// the server does after a write to a soft-deleted stream (nothing when that
// metadata is not a JSON object); l.mu is held.
func (l *eventLog) undelete(name string, from int64) {
	data, ok := withTruncateBefore(l.rawMetadataLocked(name), from)
	if !ok {
		return
	}
	l.add([]*record{{stream: metastreamOf(name), id: uuid.New(), eventType: metadataEventType, contentType: contentTypeJSON, data: data}})
}

// deleteOutcome is what a delete or a tombstone did.
type deleteOutcome struct {
	wrongVersion bool
	deleted      bool // already tombstoned
	current      int64
	position     uint64
}

// deleteStream soft-deletes (a metadata event with $tb at deletedStream:
// reads answer stream-not-found, the next write recreates the stream after
// its last revision) or, hard, tombstones the stream (a $streamDeleted
// event numbered deletedStream: the stream can never be written again).
func (l *eventLog) deleteStream(name string, x expectation, hard bool) deleteOutcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, cur, _ := l.checkCommit(name, x, []uuid.UUID{uuid.New()})
	switch d {
	case commitDeleted:
		return deleteOutcome{deleted: true}
	case commitWrongVersion, commitIdempotent:
		return deleteOutcome{wrongVersion: true, current: cur}
	}
	var r *record
	if hard {
		r = &record{stream: name, revision: deletedStream, id: uuid.New(), eventType: tombstoneEventType, contentType: contentTypeBinary}
	} else {
		if cur < 0 && l.lastLocked(metastreamOf(name)) < 0 {
			return deleteOutcome{wrongVersion: true, current: cur}
		}
		r = &record{stream: metastreamOf(name), id: uuid.New(), eventType: metadataEventType, contentType: contentTypeJSON, data: softDeleteMetadata}
	}
	l.add([]*record{r})
	return deleteOutcome{position: r.position}
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

// readStatus is how a stream read ends.
type readStatus int

const (
	readOK readStatus = iota
	readNotFound
	readDeleted
)

// streamView is a stream as a reader sees it at one moment.
type streamView struct {
	recs    []*record
	last    int64
	meta    streamMetadata
	now     time.Time
	next    uint64 // the position the next record will have
	changed <-chan struct{}
}

func (l *eventLog) view(name string) streamView {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := streamView{last: l.lastLocked(name), meta: l.metadataLocked(name), now: l.now(), next: l.next, changed: l.changed}
	if st := l.streams[name]; st != nil {
		v.recs = st.recs
	}
	return v
}

// status applies the server's read rules to the whole stream (IndexReader):
// a tombstone answers stream-deleted; no events, or a soft delete, answer
// stream-not-found.
func (v streamView) status() readStatus {
	switch {
	case v.last == deletedStream:
		return readDeleted
	case v.last < 0 || v.meta.softDeleted():
		return readNotFound
	}
	return readOK
}

// first is the lowest revision a read may return: $tb and $maxCount hide
// the events before it.
func (v streamView) first() uint64 {
	first := int64(0)
	if v.meta.maxCount > 0 {
		first = max(first, v.last-v.meta.maxCount+1)
	}
	if v.meta.truncateBefore >= 0 {
		first = max(first, v.meta.truncateBefore)
	}
	return uint64(first)
}

// visible: r is not hidden by $tb, $maxCount or $maxAge.
func (v streamView) visible(r *record) bool {
	if r.revision < v.first() {
		return false
	}
	return v.meta.maxAge <= 0 || !r.created.Before(v.now.Add(-v.meta.maxAge))
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
