package commands

import (
	"encoding/binary"
	"errors"
	"math"
	"time"

	"hermes/domain"
)

// packedLane is a lane as the lane cache keeps it: its version and every
// field of its state in one byte slice (varints, length-prefixed strings,
// one bit per flag). A domain.Lane is 624 bytes plus a dozen strings of
// its own, most of them empty or repeated; packed, a typical lane takes
// about a fifth of that, which is most of what a lane costs resident.
// TestPackedLaneKeepsEveryField fills every field of Lane by reflection and
// fails when one does not come back.
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
	l := st.lane
	b = binary.AppendUvarint(b, st.version)
	for _, s := range []string{l.SessionKey, l.SessionID, l.Origin.Platform, l.Origin.ChatID,
		l.Origin.ChatName, l.Origin.ChatType, l.Origin.UserID, l.Origin.UserName, l.Origin.ThreadID,
		l.Origin.ChatTopic, l.Origin.UserIDAlt, l.Origin.ChatIDAlt, l.Origin.GuildID,
		l.Origin.ParentChatID, l.Origin.MessageID, l.DisplayName, l.Platform, l.ChatType, l.CostStatus,
		l.AutoResetReason, l.SuspendReason, l.ResumeReason, l.PreviousSessionID, l.OpenTurnID} {
		b = appendString(b, s)
	}
	for _, t := range []time.Time{l.CreatedAt, l.UpdatedAt, l.LastResumeMarkedAt, l.TurnStartedAt} {
		b = appendTime(b, t)
	}
	for _, n := range []int64{l.InputTokens, l.OutputTokens, l.CacheReadTokens, l.CacheWriteTokens,
		l.TotalTokens, l.LastPromptTokens, int64(l.ActiveProcesses)} {
		b = binary.AppendVarint(b, n)
	}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(l.EstimatedCostUSD))
	var flags uint64
	for i, on := range []bool{l.Origin.IsBot, l.Origin.RoleAuthorized, l.WasAutoReset, l.ResetHadActivity,
		l.IsFreshReset, l.ExpiryFinalized, l.Suspended, l.ResumePending, l.HadActivity, l.Pruned} {
		if on {
			flags |= 1 << i
		}
	}
	b = binary.AppendUvarint(b, flags)
	return appendQueue(b, l.Queue)
}

// unpack returns the lane state packed in p.
func (p packedLane) unpack() (laneState, error) {
	r := laneReader{b: p}
	var st laneState
	l := &st.lane
	st.version = r.uvarint()
	for _, s := range []*string{&l.SessionKey, &l.SessionID, &l.Origin.Platform, &l.Origin.ChatID,
		&l.Origin.ChatName, &l.Origin.ChatType, &l.Origin.UserID, &l.Origin.UserName, &l.Origin.ThreadID,
		&l.Origin.ChatTopic, &l.Origin.UserIDAlt, &l.Origin.ChatIDAlt, &l.Origin.GuildID,
		&l.Origin.ParentChatID, &l.Origin.MessageID, &l.DisplayName, &l.Platform, &l.ChatType, &l.CostStatus,
		&l.AutoResetReason, &l.SuspendReason, &l.ResumeReason, &l.PreviousSessionID, &l.OpenTurnID} {
		*s = r.string()
	}
	for _, t := range []*time.Time{&l.CreatedAt, &l.UpdatedAt, &l.LastResumeMarkedAt, &l.TurnStartedAt} {
		*t = r.time()
	}
	var processes int64
	for _, n := range []*int64{&l.InputTokens, &l.OutputTokens, &l.CacheReadTokens, &l.CacheWriteTokens,
		&l.TotalTokens, &l.LastPromptTokens, &processes} {
		*n = r.varint()
	}
	l.ActiveProcesses = int(processes)
	l.EstimatedCostUSD = math.Float64frombits(r.uint64())
	flags := r.uvarint()
	for i, field := range []*bool{&l.Origin.IsBot, &l.Origin.RoleAuthorized, &l.WasAutoReset, &l.ResetHadActivity,
		&l.IsFreshReset, &l.ExpiryFinalized, &l.Suspended, &l.ResumePending, &l.HadActivity, &l.Pruned} {
		*field = flags&(1<<i) != 0
	}
	l.Queue = r.queue()
	if r.err != nil {
		return laneState{}, r.err
	}
	return st, nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// appendBytes keeps nil apart from empty (a queued item without a
// message holds nil).
func appendBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, 0)
	}
	return append(binary.AppendUvarint(b, uint64(len(v))+1), v...)
}

// The location of a packed time.
const (
	timeZero = iota
	timeUTC
	timeLocal
	timeFixed
)

// appendTime keeps the instant and the location (UTC, Local, or a fixed
// zone by name and offset, as times decoded from events are); the
// monotonic reading is not kept, as in any encoded time.
func appendTime(b []byte, t time.Time) []byte {
	switch {
	case t.IsZero() && t.Location() == time.UTC:
		return append(b, timeZero)
	case t.Location() == time.UTC:
		b = append(b, timeUTC)
	case t.Location() == time.Local:
		b = append(b, timeLocal)
	default:
		name, offset := t.Zone()
		b = appendString(binary.AppendVarint(append(b, timeFixed), int64(offset)), name)
	}
	return binary.AppendUvarint(binary.AppendVarint(b, t.Unix()), uint64(t.Nanosecond()))
}

func appendQueue(b []byte, q domain.Queue) []byte {
	if q.Slot == nil {
		b = append(b, 0)
	} else {
		b = appendQueueItem(append(b, 1), *q.Slot)
	}
	if q.Overflow == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(q.Overflow))+1)
	for _, it := range q.Overflow {
		b = appendQueueItem(b, it)
	}
	return b
}

func appendQueueItem(b []byte, it domain.QueueItem) []byte {
	b = appendString(appendString(appendString(b, it.ID), it.Kind), it.Text)
	b = appendBytes(b, it.Message)
	b = appendTime(appendTime(b, it.QueuedAt), it.UpdatedAt)
	if it.MergedIDs == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(it.MergedIDs))+1)
	for _, id := range it.MergedIDs {
		b = appendString(b, id)
	}
	return b
}

// laneReader reads a packed lane; the first short read sets err and every
// later read returns zero values.
type laneReader struct {
	b   []byte
	err error
}

func (r *laneReader) fail() { r.err, r.b = errPackedLane, nil }

func (r *laneReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *laneReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *laneReader) uint64() uint64 {
	if len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *laneReader) byte() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *laneReader) take(n uint64) []byte {
	if uint64(len(r.b)) < n {
		r.fail()
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *laneReader) string() string { return string(r.take(r.uvarint())) }

func (r *laneReader) bytes() []byte {
	n := r.uvarint()
	if n == 0 {
		return nil
	}
	return append([]byte{}, r.take(n-1)...)
}

func (r *laneReader) time() time.Time {
	var loc *time.Location
	switch r.byte() {
	case timeZero:
		return time.Time{}
	case timeUTC:
		loc = time.UTC
	case timeLocal:
		loc = time.Local
	case timeFixed:
		offset := r.varint()
		loc = time.FixedZone(r.string(), int(offset))
	default:
		r.fail()
		return time.Time{}
	}
	sec := r.varint()
	return time.Unix(sec, int64(r.uvarint())).In(loc)
}

func (r *laneReader) queue() domain.Queue {
	var q domain.Queue
	if r.byte() == 1 {
		it := r.queueItem()
		q.Slot = &it
	}
	if n := r.uvarint(); n > 0 && r.err == nil {
		q.Overflow = make([]domain.QueueItem, 0, min(n-1, uint64(len(r.b))))
		for range n - 1 {
			q.Overflow = append(q.Overflow, r.queueItem())
			if r.err != nil {
				break
			}
		}
	}
	return q
}

func (r *laneReader) queueItem() domain.QueueItem {
	it := domain.QueueItem{ID: r.string(), Kind: r.string(), Text: r.string()}
	it.Message = r.bytes()
	it.QueuedAt, it.UpdatedAt = r.time(), r.time()
	if n := r.uvarint(); n > 0 && r.err == nil {
		it.MergedIDs = make([]string, 0, min(n-1, uint64(len(r.b))))
		for range n - 1 {
			it.MergedIDs = append(it.MergedIDs, r.string())
		}
	}
	return it
}
