package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"hermes/events"
)

// The per-lane message queue (Hermes' pending-message slot plus the /queue
// overflow, seed 000 §8 and catalogue §5), kept as lane events so nothing
// queued is lost in a crash.
//
// Rules:
//   - A follow-up goes to the slot when the slot is free. When the slot holds
//     a follow-up, busy_input_mode decides: "queue" merges the new one into
//     it (see [MergeQueued]), every other mode replaces it (burst collapse).
//     A follow-up never merges into or replaces a /queue item: when the slot
//     holds one, the follow-up is appended to the overflow (Hermes would
//     overwrite the /queue item and lose a turn).
//   - A /queue item goes to the slot when the slot is free and nothing waits
//     in the overflow, else it is appended to the overflow. (Hermes checks
//     the slot only; after the empty-slot edge case below that lets a new
//     item run before older ones. Checking the overflow too keeps /queue
//     FIFO.)
//   - Taking: the slot item runs and the overflow head is staged into the
//     slot (promotion). When the slot is empty the overflow head runs and the
//     item after it is not staged (catalogue §5 edge case).
//   - Depth is len(overflow) + 1 when the slot is occupied.
//   - /new and /reset (and resolve with force_new) discard the overflow and
//     keep the slot; DELETE …/queue (/queue clear) empties both.
//   - At most MaxItems items are queued: an arrival that would add one more
//     is refused with ErrQueueFull. A merge or a replacement adds none.
//   - An item whose last arrival is older than the TTL is stale: it is
//     dropped (QueueItemsExpired) before the next change of the queue is
//     decided, and views leave it out.

// Errors of the queue.
var (
	// ErrQueueFull: the lane already holds MaxItems queued items, or a
	// merge would make the slot item larger than an item may be.
	ErrQueueFull = errors.New("queue full")
)

// Limits of one queued item.
const (
	// MaxQueueTextBytes bounds an item's text (also after merging).
	MaxQueueTextBytes = 64 << 10
	// MaxQueueMessageBytes bounds an item's message object (also after
	// merging).
	MaxQueueMessageBytes = 256 << 10
	// MaxQueueItemIDBytes bounds an item id.
	MaxQueueItemIDBytes = 200
)

// Busy input modes (Hermes' busy_input_mode). Only BusyInputQueue merges
// follow-ups; every other mode replaces the pending one.
const (
	BusyInputInterrupt = "interrupt"
	BusyInputQueue     = "queue"
	BusyInputSteer     = "steer"
)

// QueueRules are the queue's settings.
type QueueRules struct {
	// BusyInputMode is busy_input_mode: "queue" merges busy follow-ups,
	// anything else ("interrupt", the default, "steer") replaces them.
	BusyInputMode string
	// MaxItems is the cap on queued items per lane (Hermes: 32).
	MaxItems int
	// TTL is how long an item may wait (Hermes: 24 h).
	TTL time.Duration
}

// DefaultQueueRules are Hermes' defaults.
func DefaultQueueRules() QueueRules {
	return QueueRules{BusyInputMode: BusyInputInterrupt, MaxItems: 32, TTL: 24 * time.Hour}
}

func (r QueueRules) validate() error {
	if r.MaxItems < 1 {
		return fmt.Errorf("%w: queue cap %d is not positive", ErrInvalidArgument, r.MaxItems)
	}
	if r.TTL <= 0 {
		return fmt.Errorf("%w: queue ttl %v is not positive", ErrInvalidArgument, r.TTL)
	}
	return nil
}

// QueueItem is a message waiting for a turn of its own.
type QueueItem struct {
	ID   string
	Kind string
	Text string
	// Message is the client's JSON object (nil when none was sent).
	Message json.RawMessage
	// QueuedAt is the first arrival; UpdatedAt the last one merged in. The
	// TTL runs from UpdatedAt.
	QueuedAt  time.Time
	UpdatedAt time.Time
	// MergedIDs are the ids of the follow-ups merged into this item.
	MergedIDs []string
}

// stale reports whether the item waited longer than ttl at now.
func (it QueueItem) stale(ttl time.Duration, now time.Time) bool {
	return now.Sub(it.UpdatedAt) > ttl
}

// Queue is a lane's message queue. It is a value: Evolve never writes into
// the slices or the item of an earlier Queue.
type Queue struct {
	// Slot is the next-up item, nil when free.
	Slot *QueueItem
	// Overflow holds the items waiting behind the slot, oldest first.
	Overflow []QueueItem
}

// withoutContent keeps every item, in place, with its text and message
// erased (a person erasure: the lane's state machine is unchanged).
func (q Queue) withoutContent() Queue {
	var out Queue
	if q.Slot != nil {
		it := *q.Slot
		it.Text, it.Message = "", nil
		out.Slot = &it
	}
	if len(q.Overflow) > 0 {
		out.Overflow = make([]QueueItem, len(q.Overflow))
		for i, it := range q.Overflow {
			it.Text, it.Message = "", nil
			out.Overflow[i] = it
		}
	}
	return out
}

// Depth is len(overflow) + 1 when the slot is occupied.
func (q Queue) Depth() int {
	n := len(q.Overflow)
	if q.Slot != nil {
		n++
	}
	return n
}

// Items lists the queued items in the order they will run.
func (q Queue) Items() []QueueItem {
	out := make([]QueueItem, 0, q.Depth())
	if q.Slot != nil {
		out = append(out, *q.Slot)
	}
	return append(out, q.Overflow...)
}

// Fresh is the queue without its stale items, as it will be once they are
// dropped: what a reader should be shown.
func (q Queue) Fresh(ttl time.Duration, now time.Time) Queue {
	return q.without(q.staleIDs(ttl, now))
}

func (q Queue) staleIDs(ttl time.Duration, now time.Time) []string {
	var ids []string
	for _, it := range q.Items() {
		if it.stale(ttl, now) {
			ids = append(ids, it.ID)
		}
	}
	return ids
}

// holds reports whether id names a queued item or a follow-up merged into
// one.
func (q Queue) holds(id string) bool {
	for _, it := range q.Items() {
		if it.ID == id || slices.Contains(it.MergedIDs, id) {
			return true
		}
	}
	return false
}

// QueueArrival is a message to queue. ItemID is chosen by the caller
// (random), so the domain stays deterministic.
type QueueArrival struct {
	ItemID string
	Kind   string
	Text   string
	// Message is an optional JSON object (null counts as none).
	Message json.RawMessage
}

func (a QueueArrival) validate() error {
	switch {
	case a.ItemID == "" || len(a.ItemID) > MaxQueueItemIDBytes:
		return fmt.Errorf("%w: queue item id must be 1 to %d bytes", ErrInvalidArgument, MaxQueueItemIDBytes)
	case a.Kind != events.QueueKindFollowup && a.Kind != events.QueueKindQueue:
		return fmt.Errorf("%w: queue kind %q is not followup or queue", ErrInvalidArgument, a.Kind)
	case len(a.Text) > MaxQueueTextBytes:
		return fmt.Errorf("%w: queued text is %d bytes, the limit is %d", ErrInvalidArgument, len(a.Text), MaxQueueTextBytes)
	case len(a.Message) > MaxQueueMessageBytes:
		return fmt.Errorf("%w: queued message is %d bytes, the limit is %d", ErrInvalidArgument, len(a.Message), MaxQueueMessageBytes)
	case len(a.Message) > 0 && !isJSONObject(a.Message):
		return fmt.Errorf("%w: queued message must be a JSON object", ErrInvalidArgument)
	case a.Text == "" && len(a.Message) == 0:
		return fmt.Errorf("%w: a queued item needs a text or a message", ErrInvalidArgument)
	}
	return nil
}

// Enqueue decides a message queued while the lane is busy (a follow-up or a
// /queue item); see the rules at the top of this file. Stale items are
// dropped first. It refuses a missing lane (ErrLaneNotFound), a malformed
// arrival (ErrInvalidArgument), an arrival over the cap (ErrQueueFull) and
// an id already queued (ErrInvalidArgument).
func (l Lane) Enqueue(a QueueArrival, r QueueRules, now time.Time) ([]events.Event, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	if len(a.Message) > 0 && bytes.Equal(bytes.TrimSpace(a.Message), []byte("null")) {
		a.Message = nil
	}
	if err := a.validate(); err != nil {
		return nil, err
	}
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	out, q := l.Queue.expire(r.TTL, now)
	if q.holds(a.ItemID) {
		return nil, fmt.Errorf("%w: queue item id %q is already queued", ErrInvalidArgument, a.ItemID)
	}
	added := events.QueueItemAdded{ItemID: a.ItemID, Kind: a.Kind, Text: a.Text, Message: compactJSON(a.Message), At: now}
	switch {
	case a.Kind == events.QueueKindFollowup && q.Slot == nil:
		added.Placement = events.QueuePlacementSlot
	case a.Kind == events.QueueKindFollowup && q.Slot.Kind == events.QueueKindFollowup:
		added.SlotItemID = q.Slot.ID
		if r.BusyInputMode != BusyInputQueue {
			added.Placement = events.QueuePlacementReplaced
			return append(out, added), nil
		}
		added.Placement = events.QueuePlacementMerged
		merged := q.Slot.merge(added)
		if len(merged.Text) > MaxQueueTextBytes || len(merged.Message) > MaxQueueMessageBytes {
			return nil, fmt.Errorf("%w: merging into the pending follow-up would exceed %d bytes of text or %d of message",
				ErrQueueFull, MaxQueueTextBytes, MaxQueueMessageBytes)
		}
		return append(out, added), nil
	case a.Kind == events.QueueKindQueue && q.Slot == nil && len(q.Overflow) == 0:
		added.Placement = events.QueuePlacementSlot
	default:
		added.Placement = events.QueuePlacementOverflow
	}
	if q.Depth() >= r.MaxItems {
		return nil, fmt.Errorf("%w (%d items)", ErrQueueFull, r.MaxItems)
	}
	return append(out, added), nil
}

// TakeNext decides that the agent takes the queue's next item to run it as
// a turn: the slot item, with the overflow head staged into the slot; or,
// when the slot is empty, the overflow head itself, with nothing staged.
// Stale items are dropped first. An empty queue decides no take (only the
// expiry, if any). A missing lane with an empty queue is ErrLaneNotFound.
func (l Lane) TakeNext(r QueueRules, now time.Time) ([]events.Event, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	if !l.Exists() && l.Queue.Depth() == 0 {
		return nil, ErrLaneNotFound
	}
	out, q := l.Queue.expire(r.TTL, now)
	var taken events.QueueItemTaken
	switch {
	case q.Slot != nil:
		taken = takenOf(*q.Slot, events.QueueFromSlot, now)
		if len(q.Overflow) > 0 {
			taken.StagedItemID = q.Overflow[0].ID
		}
	case len(q.Overflow) > 0:
		taken = takenOf(q.Overflow[0], events.QueueFromOverflow, now)
	default:
		return out, nil
	}
	return append(out, taken), nil
}

func takenOf(it QueueItem, from string, now time.Time) events.QueueItemTaken {
	return events.QueueItemTaken{ItemID: it.ID, Kind: it.Kind, Text: it.Text, Message: it.Message, From: from, At: now}
}

// ClearQueue decides /queue clear: every item, slot and overflow, is
// discarded. Stale items are dropped first (and not counted as cleared). An
// empty queue changes nothing. A missing lane with an empty queue is
// ErrLaneNotFound.
func (l Lane) ClearQueue(r QueueRules, now time.Time) ([]events.Event, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	if !l.Exists() && l.Queue.Depth() == 0 {
		return nil, ErrLaneNotFound
	}
	out, q := l.Queue.expire(r.TTL, now)
	if q.Depth() == 0 {
		return out, nil
	}
	ids := make([]string, 0, q.Depth())
	for _, it := range q.Items() {
		ids = append(ids, it.ID)
	}
	return append(out, events.QueueCleared{ItemIDs: ids, Reason: events.QueueClearedByCommand, At: now}), nil
}

// expire returns the expiry event due at now (if any) and the queue after it.
func (q Queue) expire(ttl time.Duration, now time.Time) ([]events.Event, Queue) {
	ids := q.staleIDs(ttl, now)
	if len(ids) == 0 {
		return nil, q
	}
	e := events.QueueItemsExpired{ItemIDs: ids, At: now}
	return []events.Event{e}, q.without(ids)
}

// added applies a QueueItemAdded.
func (q Queue) added(e events.QueueItemAdded) Queue {
	item := QueueItem{ID: e.ItemID, Kind: e.Kind, Text: e.Text, Message: e.Message, QueuedAt: e.At, UpdatedAt: e.At}
	switch e.Placement {
	case events.QueuePlacementSlot, events.QueuePlacementReplaced:
		q.Slot = &item
	case events.QueuePlacementMerged:
		if q.Slot == nil || q.Slot.ID != e.SlotItemID {
			// The slot item is gone (only possible in a history this
			// build did not decide): the arrival stands on its own.
			q.Slot = &item
			return q
		}
		merged := q.Slot.merge(e)
		q.Slot = &merged
	case events.QueuePlacementOverflow:
		q.Overflow = append(slices.Clip(q.Overflow), item)
	}
	return q
}

// taken applies a QueueItemTaken.
func (q Queue) taken(e events.QueueItemTaken) Queue {
	q = q.without([]string{e.ItemID})
	if e.StagedItemID == "" {
		return q
	}
	i := slices.IndexFunc(q.Overflow, func(it QueueItem) bool { return it.ID == e.StagedItemID })
	if i < 0 || q.Slot != nil {
		return q
	}
	staged := q.Overflow[i]
	q.Slot = &staged
	q.Overflow = slices.Delete(slices.Clone(q.Overflow), i, i+1)
	return q
}

// without returns the queue without the items named by ids.
func (q Queue) without(ids []string) Queue {
	if len(ids) == 0 {
		return q
	}
	if q.Slot != nil && slices.Contains(ids, q.Slot.ID) {
		q.Slot = nil
	}
	var kept []QueueItem
	for _, it := range q.Overflow {
		if !slices.Contains(ids, it.ID) {
			kept = append(kept, it)
		}
	}
	q.Overflow = kept
	return q
}

// withoutOverflow is the queue after /new or /reset: the slot stays.
func (q Queue) withoutOverflow() Queue {
	q.Overflow = nil
	return q
}

// merge returns the item with a follow-up merged into it; see MergeQueued.
func (it QueueItem) merge(e events.QueueItemAdded) QueueItem {
	it.Text, it.Message = MergeQueued(it.Text, it.Message, e.Text, e.Message)
	it.UpdatedAt = e.At
	it.MergedIDs = append(slices.Clip(it.MergedIDs), e.ItemID)
	return it
}

// MergeQueued is how a busy follow-up merges into the pending one
// (busy_input_mode queue), so a multi-part thought is not cut to its last
// part:
//
//   - texts are joined by a blank line ("\n\n") in arrival order; an empty
//     text adds no separator;
//   - messages (JSON objects) are merged key by key: when both values of a
//     key are arrays they are concatenated (earlier elements first, so
//     media_urls, media_types and the like accumulate); otherwise the later
//     value wins (message_id and the like name the newest arrival). The
//     result's keys are sorted. A missing message adds nothing.
func MergeQueued(text string, msg json.RawMessage, newText string, newMsg json.RawMessage) (string, json.RawMessage) {
	switch {
	case text == "":
		text = newText
	case newText != "":
		text = text + "\n\n" + newText
	}
	return text, mergeMessages(msg, newMsg)
}

func mergeMessages(old, add json.RawMessage) json.RawMessage {
	if len(add) == 0 {
		return old
	}
	if len(old) == 0 {
		return add
	}
	var a, b map[string]json.RawMessage
	if json.Unmarshal(old, &a) != nil || json.Unmarshal(add, &b) != nil || a == nil || b == nil {
		return add
	}
	for k, v := range b {
		if prev, ok := a[k]; ok {
			if joined, ok := concatArrays(prev, v); ok {
				a[k] = joined
				continue
			}
		}
		a[k] = v
	}
	out, err := json.Marshal(a)
	if err != nil {
		return add
	}
	return out
}

func concatArrays(x, y json.RawMessage) (json.RawMessage, bool) {
	var xs, ys []json.RawMessage
	if !isJSONArray(x) || !isJSONArray(y) || json.Unmarshal(x, &xs) != nil || json.Unmarshal(y, &ys) != nil {
		return nil, false
	}
	out, err := json.Marshal(append(xs, ys...))
	if err != nil {
		return nil, false
	}
	return out, true
}

func isJSONObject(m json.RawMessage) bool {
	t := bytes.TrimSpace(m)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

func isJSONArray(m json.RawMessage) bool {
	t := bytes.TrimSpace(m)
	return len(t) > 0 && t[0] == '['
}

// compactJSON stores a message without insignificant whitespace, as the
// codec would write it anyway.
func compactJSON(m json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if json.Compact(&buf, m) != nil {
		return m
	}
	return buf.Bytes()
}
