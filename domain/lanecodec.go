package domain

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The lane codec is the one encoding of a [Lane] as bytes: the lane cache
// of package commands keeps lanes in it, and lane snapshots are written in
// it (EncodeLaneSnapshot). Every field of Lane, nested ones included, is
// written in a fixed order: strings length-prefixed, integers as varints,
// the cost as its 8 bytes, the flags one bit each, times with their
// location (UTC, Local, or a fixed zone by name and offset, as times
// decoded from events are; the monotonic reading is not kept), nil slices
// and the absent queue slot apart from empty ones. A typical lane takes
// about 130 bytes, a fifth of the struct and its strings, which is most of
// what a lane costs in the cache.
//
// A field added to Lane must be added to AppendLane and DecodeLane in the
// same place (and LaneSchemaVersion bumped): TestLaneCodecKeepsEveryField
// fills every field of Lane by reflection and fails until it comes back.

// ErrLaneEncoding: bytes that are not one lane of the lane codec (cut
// short, with bytes left over, or with an unknown time location).
var ErrLaneEncoding = errors.New("not a lane of the lane codec")

// AppendLane appends l, in the lane codec, to b.
func AppendLane(b []byte, l Lane) []byte {
	for _, s := range [...]string{l.SessionKey, l.SessionID, l.Origin.Platform, l.Origin.ChatID,
		l.Origin.ChatName, l.Origin.ChatType, l.Origin.UserID, l.Origin.UserName, l.Origin.ThreadID,
		l.Origin.ChatTopic, l.Origin.UserIDAlt, l.Origin.ChatIDAlt, l.Origin.GuildID,
		l.Origin.ParentChatID, l.Origin.MessageID, l.DisplayName, l.Platform, l.ChatType, l.CostStatus,
		l.AutoResetReason, l.SuspendReason, l.ResumeReason, l.PreviousSessionID, l.OpenTurnID, l.Origin.Profile, l.Origin.AutoThreadInitialName,
		l.Origin.ProspectiveThreadID} {
		b = appendString(b, s)
	}
	for _, t := range [...]time.Time{l.CreatedAt, l.UpdatedAt, l.LastResumeMarkedAt, l.TurnStartedAt} {
		b = appendTime(b, t)
	}
	for _, n := range [...]int64{l.InputTokens, l.OutputTokens, l.CacheReadTokens, l.CacheWriteTokens,
		l.TotalTokens, l.LastPromptTokens, int64(l.ActiveProcesses)} {
		b = binary.AppendVarint(b, n)
	}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(l.EstimatedCostUSD))
	var flags uint64
	for i, on := range [...]bool{l.Origin.IsBot, l.Origin.RoleAuthorized, l.WasAutoReset, l.ResetHadActivity,
		l.IsFreshReset, l.ExpiryFinalized, l.Suspended, l.ResumePending, l.HadActivity, l.Pruned,
		l.Origin.AutoThreadCreated} {
		if on {
			flags |= 1 << i
		}
	}
	b = binary.AppendUvarint(b, flags)
	b = appendQueue(b, l.Queue)
	if l.ModelOverride == nil {
		b = append(b, 0)
	} else {
		b = appendString(appendString(appendString(append(b, 1), l.ModelOverride.Model), l.ModelOverride.Provider), l.ModelOverride.BaseURL)
	}
	if l.Metadata == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(l.Metadata))+1)
	for _, it := range l.Metadata {
		b = appendBytes(appendString(b, it.Key), it.Value)
	}
	return b
}

// DecodeLane decodes the lane AppendLane wrote as the whole of data. It
// copies what it keeps: data may change afterwards.
func DecodeLane(data []byte) (Lane, error) {
	r := laneReader{b: data}
	var l Lane
	for _, s := range [...]*string{&l.SessionKey, &l.SessionID, &l.Origin.Platform, &l.Origin.ChatID,
		&l.Origin.ChatName, &l.Origin.ChatType, &l.Origin.UserID, &l.Origin.UserName, &l.Origin.ThreadID,
		&l.Origin.ChatTopic, &l.Origin.UserIDAlt, &l.Origin.ChatIDAlt, &l.Origin.GuildID,
		&l.Origin.ParentChatID, &l.Origin.MessageID, &l.DisplayName, &l.Platform, &l.ChatType, &l.CostStatus,
		&l.AutoResetReason, &l.SuspendReason, &l.ResumeReason, &l.PreviousSessionID, &l.OpenTurnID, &l.Origin.Profile, &l.Origin.AutoThreadInitialName,
		&l.Origin.ProspectiveThreadID} {
		*s = r.string()
	}
	for _, t := range [...]*time.Time{&l.CreatedAt, &l.UpdatedAt, &l.LastResumeMarkedAt, &l.TurnStartedAt} {
		*t = r.time()
	}
	var processes int64
	for _, n := range [...]*int64{&l.InputTokens, &l.OutputTokens, &l.CacheReadTokens, &l.CacheWriteTokens,
		&l.TotalTokens, &l.LastPromptTokens, &processes} {
		*n = r.varint()
	}
	l.ActiveProcesses = int(processes)
	l.EstimatedCostUSD = math.Float64frombits(r.uint64())
	flags := r.uvarint()
	for i, field := range [...]*bool{&l.Origin.IsBot, &l.Origin.RoleAuthorized, &l.WasAutoReset, &l.ResetHadActivity,
		&l.IsFreshReset, &l.ExpiryFinalized, &l.Suspended, &l.ResumePending, &l.HadActivity, &l.Pruned,
		&l.Origin.AutoThreadCreated} {
		*field = flags&(1<<i) != 0
	}
	l.Queue = r.queue()
	switch r.byte() {
	case 0:
	case 1:
		l.ModelOverride = &ModelOverride{Model: r.string(), Provider: r.string(), BaseURL: r.string()}
	default:
		r.fail("bad model override")
	}
	if n := r.uvarint(); n > 0 && r.err == nil {
		l.Metadata = make([]MetadataItem, 0, min(n-1, uint64(len(r.b))))
		for range n - 1 {
			if r.err != nil {
				break
			}
			key := r.string()
			l.Metadata = append(l.Metadata, MetadataItem{Key: key, Value: r.bytes()})
		}
	}
	switch {
	case r.err != nil:
		return Lane{}, r.err
	case len(r.b) > 0:
		return Lane{}, fmt.Errorf("%w: %d bytes left over", ErrLaneEncoding, len(r.b))
	}
	return l, nil
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

// The location of an encoded time.
const (
	timeZero = iota
	timeUTC
	timeLocal
	timeFixed
)

// appendTime keeps the instant and the location (UTC, Local, or a fixed
// zone by name and offset); the monotonic reading is not kept, as in any
// encoded time.
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

func appendQueue(b []byte, q Queue) []byte {
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

func appendQueueItem(b []byte, it QueueItem) []byte {
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

// laneReader reads an encoded lane; the first short read sets err and
// every later read returns zero values.
type laneReader struct {
	b   []byte
	err error
}

func (r *laneReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrLaneEncoding, what)
	}
	r.b = nil
}

func (r *laneReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("cut short")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *laneReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("cut short")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *laneReader) uint64() uint64 {
	if len(r.b) < 8 {
		r.fail("cut short")
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *laneReader) byte() byte {
	if len(r.b) < 1 {
		r.fail("cut short")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *laneReader) take(n uint64) []byte {
	if uint64(len(r.b)) < n {
		r.fail("cut short")
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
		r.fail("unknown time location")
		return time.Time{}
	}
	sec := r.varint()
	return time.Unix(sec, int64(r.uvarint())).In(loc)
}

func (r *laneReader) queue() Queue {
	var q Queue
	switch r.byte() {
	case 0:
	case 1:
		it := r.queueItem()
		q.Slot = &it
	default:
		r.fail("bad queue slot")
	}
	if n := r.uvarint(); n > 0 && r.err == nil {
		q.Overflow = make([]QueueItem, 0, min(n-1, uint64(len(r.b))))
		for range n - 1 {
			q.Overflow = append(q.Overflow, r.queueItem())
			if r.err != nil {
				break
			}
		}
	}
	return q
}

func (r *laneReader) queueItem() QueueItem {
	it := QueueItem{ID: r.string(), Kind: r.string(), Text: r.string()}
	it.Message = r.bytes()
	it.QueuedAt, it.UpdatedAt = r.time(), r.time()
	if n := r.uvarint(); n > 0 && r.err == nil {
		it.MergedIDs = make([]string, 0, min(n-1, uint64(len(r.b))))
		for range n - 1 {
			it.MergedIDs = append(it.MergedIDs, r.string())
			if r.err != nil {
				break
			}
		}
	}
	return it
}
