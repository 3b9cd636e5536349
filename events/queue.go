package events

import (
	"encoding/json"
	"time"
)

// Persisted type names of the per-lane message queue. They live on the lane
// stream, so a crash loses nothing queued and `hermes events tail` shows the
// queue beside the session lifecycle. Never change one: a new shape is a new
// name plus an upcaster in codec.go.
const (
	TypeQueueItemAdded    = "lane.queue_item_added.v1"
	TypeQueueItemTaken    = "lane.queue_item_taken.v1"
	TypeQueueCleared      = "lane.queue_cleared.v1"
	TypeQueueItemsExpired = "lane.queue_items_expired.v1"
)

// Queue item kinds, as stored in [QueueItemAdded.Kind]: a busy follow-up
// (an ordinary message sent while the agent works) or a `/queue` item (one
// full turn of its own, never merged).
const (
	QueueKindFollowup = "followup"
	QueueKindQueue    = "queue"
)

// Where an arrival went, as stored in [QueueItemAdded.Placement].
const (
	// QueuePlacementSlot: the arrival is the lane's next-up item.
	QueuePlacementSlot = "slot"
	// QueuePlacementOverflow: the arrival was appended to the FIFO overflow.
	QueuePlacementOverflow = "overflow"
	// QueuePlacementMerged: a follow-up (busy_input_mode queue) merged into
	// the follow-up in the slot, SlotItemID, which keeps its id.
	QueuePlacementMerged = "merged"
	// QueuePlacementReplaced: a follow-up (any other busy_input_mode)
	// displaced the follow-up in the slot, SlotItemID, which is gone.
	QueuePlacementReplaced = "replaced"
)

// Where a taken item came from, as stored in [QueueItemTaken.From].
const (
	QueueFromSlot     = "slot"
	QueueFromOverflow = "overflow"
)

// Why queued items were cleared, as stored in [QueueCleared.Reason].
const (
	// QueueClearedByCommand: `/queue clear` (DELETE …/queue).
	QueueClearedByCommand = "command"
)

// QueueItemAdded records a message queued on the lane while the agent was
// busy. ItemID is the arrival's own id; Text and Message are what arrived
// (Message is the client's JSON object, kept as sent). For a merged
// follow-up the queued item is SlotItemID with this arrival merged into it;
// for a replaced one SlotItemID is the follow-up it displaced.
type QueueItemAdded struct {
	ItemID     string          `json:"item_id"`
	Kind       string          `json:"kind"`
	Text       string          `json:"text"`
	Message    json.RawMessage `json:"message,omitempty"`
	Placement  string          `json:"placement"`
	SlotItemID string          `json:"slot_item_id,omitempty"`
	At         time.Time       `json:"at"`
}

// QueueItemTaken records that the queue's next item was handed to the agent
// to run as a turn, with its content as it ran (a merged follow-up holds
// every merged text). From is where it was: the slot, or the overflow head
// when the slot was empty. StagedItemID, when set, is the overflow head that
// was promoted into the slot because the item came from the slot.
type QueueItemTaken struct {
	ItemID       string          `json:"item_id"`
	Kind         string          `json:"kind"`
	Text         string          `json:"text"`
	Message      json.RawMessage `json:"message,omitempty"`
	From         string          `json:"from"`
	StagedItemID string          `json:"staged_item_id,omitempty"`
	At           time.Time       `json:"at"`
}

// QueueCleared records that ItemIDs (slot and overflow) were discarded on
// request. The overflow discarded by /new and /reset needs no event of its
// own: the reset itself is the record.
type QueueCleared struct {
	ItemIDs []string  `json:"item_ids"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

// QueueItemsExpired records that ItemIDs were dropped because they had waited
// longer than the queue's TTL. They are dropped when the queue is next
// changed, before the change is decided.
type QueueItemsExpired struct {
	ItemIDs []string  `json:"item_ids"`
	At      time.Time `json:"at"`
}

func (e QueueItemAdded) EventType() string    { return TypeQueueItemAdded }
func (e QueueItemTaken) EventType() string    { return TypeQueueItemTaken }
func (e QueueCleared) EventType() string      { return TypeQueueCleared }
func (e QueueItemsExpired) EventType() string { return TypeQueueItemsExpired }

func (e QueueItemAdded) OccurredAt() time.Time    { return e.At }
func (e QueueItemTaken) OccurredAt() time.Time    { return e.At }
func (e QueueCleared) OccurredAt() time.Time      { return e.At }
func (e QueueItemsExpired) OccurredAt() time.Time { return e.At }

func (QueueItemAdded) isEvent()    {}
func (QueueItemTaken) isEvent()    {}
func (QueueCleared) isEvent()      {}
func (QueueItemsExpired) isEvent() {}
