package commands

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"hermes/domain"
	"hermes/events"
)

// QueueSettings configure the per-lane message queue. Zero fields take
// Hermes' defaults.
type QueueSettings struct {
	// BusyInputMode is busy_input_mode (HERMES_GATEWAY_BUSY_INPUT_MODE):
	// "queue" merges busy follow-ups into the pending one; "interrupt" (the
	// default), "steer" and anything else replace it.
	BusyInputMode string
	// MaxItems caps the queued items per lane (default 32).
	MaxItems int
	// TTL drops items that waited longer (default 24 h).
	TTL time.Duration
}

// Rules are the settings with the defaults filled in.
func (s QueueSettings) Rules() domain.QueueRules {
	r := domain.DefaultQueueRules()
	if s.BusyInputMode != "" {
		r.BusyInputMode = s.BusyInputMode
	}
	if s.MaxItems > 0 {
		r.MaxItems = s.MaxItems
	}
	if s.TTL > 0 {
		r.TTL = s.TTL
	}
	return r
}

// EnqueueMessage queues a message on a busy lane.
type EnqueueMessage struct {
	Key string
	// Kind is events.QueueKindFollowup (an ordinary busy follow-up) or
	// events.QueueKindQueue (/queue: a turn of its own).
	Kind string
	Text string
	// Message is the client's JSON object, kept as sent (optional).
	Message json.RawMessage
	// CommandID makes a retried request idempotent; empty: a fresh one.
	CommandID string
}

// Enqueued is the outcome of Enqueue.
type Enqueued struct {
	LaneResult
	// ItemID is the item that will run the message: its own, or for a
	// merged follow-up the pending follow-up it joined.
	ItemID string
	// Depth is the lane's queue depth after the command.
	Depth int
}

// Enqueue queues a follow-up or a /queue item (see domain/queue.go for
// where it goes). Refusals: domain.ErrLaneNotFound, domain.ErrInvalidArgument,
// domain.ErrQueueFull. A retry with the same CommandID answers the item the
// first attempt queued and queues nothing.
func (h *Handler) Enqueue(ctx context.Context, m EnqueueMessage) (Enqueued, error) {
	key := m.Key
	rules := h.cfg.Queue.Rules()
	arrival := domain.QueueArrival{ItemID: newQueueItemID(), Kind: m.Kind, Text: m.Text, Message: m.Message}
	res, err := h.executeOnce(ctx, key, "enqueue", m.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.Enqueue(arrival, rules, now)
	})
	if err != nil {
		return Enqueued{}, err
	}
	out := Enqueued{LaneResult: res, Depth: res.Lane.Queue.Fresh(rules.TTL, h.now()).Depth()}
	for _, e := range res.Events {
		if a, ok := e.(events.QueueItemAdded); ok {
			out.ItemID = a.ItemID
			if a.Placement == events.QueuePlacementMerged {
				out.ItemID = a.SlotItemID
			}
		}
	}
	if out.ItemID == "" {
		return Enqueued{}, fmt.Errorf("enqueue %s: %w: command id %q was already used by another command", key, domain.ErrInvalidArgument, m.CommandID)
	}
	return out, nil
}

// TakenItem is the outcome of TakeQueued.
type TakenItem struct {
	LaneResult
	// Item is the item to run now; nil when nothing was queued.
	Item *events.QueueItemTaken
}

// TakeQueued hands the agent the lane's next queued item and records it as
// taken (promoting the overflow head into the slot).
type TakeQueued struct {
	Key string
	// CommandID: a retry with the same id answers the same item and takes
	// nothing more.
	CommandID string
}

// TakeQueued takes a lane's next queued item.
func (h *Handler) TakeQueued(ctx context.Context, c TakeQueued) (TakenItem, error) {
	rules := h.cfg.Queue.Rules()
	res, err := h.executeOnce(ctx, c.Key, "take_queued", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.TakeNext(rules, now)
	})
	if err != nil {
		return TakenItem{}, err
	}
	out := TakenItem{LaneResult: res}
	for _, e := range res.Events {
		if tk, ok := e.(events.QueueItemTaken); ok {
			out.Item = &tk
		}
	}
	return out, nil
}

// ClearQueue is /queue clear: it discards the slot and the overflow.
type ClearQueue struct {
	Key string
	// CommandID: a retry with the same id answers the same count.
	CommandID string
}

// ClearQueue clears a lane's queue and returns how many items it discarded
// (stale ones expire instead and are not counted).
func (h *Handler) ClearQueue(ctx context.Context, c ClearQueue) (LaneResult, int, error) {
	rules := h.cfg.Queue.Rules()
	res, err := h.executeOnce(ctx, c.Key, "clear_queue", c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		return l.ClearQueue(rules, now)
	})
	if err != nil {
		return res, 0, err
	}
	n := 0
	for _, e := range res.Events {
		if c, ok := e.(events.QueueCleared); ok {
			n += len(c.ItemIDs)
		}
	}
	return res, n, nil
}

// Queue returns a lane's queue as it stands (stale items left out; they
// are dropped at the next change) and the lane version it reflects. It
// reads the store, so it sees every command that has returned.
func (h *Handler) Queue(ctx context.Context, key string) (domain.Queue, uint64, error) {
	l, version, err := h.Lane(ctx, key)
	if err != nil {
		return domain.Queue{}, 0, fmt.Errorf("queue %s: %w", key, err)
	}
	if !l.Exists() && l.Queue.Depth() == 0 {
		return domain.Queue{}, version, domain.ErrLaneNotFound
	}
	return l.Queue.Fresh(h.cfg.Queue.Rules().TTL, h.now()), version, nil
}

// executeOnce is execute for commands whose answer is what they appended
// (the item queued, the item taken): a retry with the same commandID must
// answer that again even when the queue has moved on since (deciding again
// would take the next item, or nothing). Under the lane's lock it first looks
// for events the command already appended and, when it finds them, answers
// them without deciding.
func (h *Handler) executeOnce(ctx context.Context, key, command, commandID string, decide decideFunc) (LaneResult, error) {
	if commandID == "" {
		return h.execute(ctx, key, command, commandID, decide)
	}
	stream := events.LaneStream(key)
	var prior []events.Event
	res, err := h.execute(ctx, key, command, commandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
		p, err := h.appendedBy(ctx, stream, command, commandID)
		if err != nil {
			return nil, err
		}
		if prior = p; len(prior) > 0 {
			return nil, nil
		}
		return decide(l, now)
	})
	if err != nil {
		return res, err
	}
	if len(prior) > 0 {
		res.Events = prior
	}
	return res, nil
}

// idempotencyWindow is how many of a lane's latest events are searched for
// a retried command: retries come within seconds, not hundreds of events.
const idempotencyWindow = readPage

// appendedBy returns the events command commandID appended to stream among
// its latest idempotencyWindow events, in order (none when it never ran).
func (h *Handler) appendedBy(ctx context.Context, stream, command, commandID string) ([]events.Event, error) {
	page, err := h.store.ReadStream(ctx, stream, 0, idempotencyWindow, events.Backwards)
	if errors.Is(err, events.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stream, err)
	}
	var found []events.Event
	for _, env := range page {
		if env.Metadata.CommandID == commandID && env.Metadata.Command == command {
			found = append(found, env.Event)
		} else if len(found) > 0 {
			break
		}
	}
	slices.Reverse(found)
	return found, nil
}

// newQueueItemID returns a random item id, "q_" and 16 hex characters.
func newQueueItemID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return "q_" + hex.EncodeToString(b[:])
}
