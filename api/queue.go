package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"hermes/commands"
	"hermes/domain"
)

// queueRoutes serves the per-lane message queue (issue [G]): busy
// follow-ups and /queue items, kept as lane events.
//
//	POST   /sessions/{key}/queue       {"text","kind","message"} → {"depth","item_id"}
//	POST   /sessions/{key}/queue/next  → {"item_id","text","kind","message"}, or 204 when nothing is queued
//	GET    /sessions/{key}/queue       → {"depth","slot","overflow"}
//	DELETE /sessions/{key}/queue       → {"cleared": n}
//
// A full queue is 409 conflict ("queue full (32 items)"): the request is
// well formed and may succeed once items are taken. A text over 64 KiB or a
// message over 256 KiB is 413 payload_too_large. While draining, taking is
// 503 (no new turns) and the items wait for the next start.
func (s *Server) queueRoutes(rt routes) {
	rt.post("/sessions/{key}/queue", withKey(s.enqueue))
	rt.post("/sessions/{key}/queue/next", s.admitted(fmt.Errorf("%w; queued items are kept for the next start", errDraining), withKey(s.takeQueued)))
	rt.get("/sessions/{key}/queue", withKey(s.inspectQueue))
	rt.delete("/sessions/{key}/queue", withKey(s.clearQueue))
}

func (s *Server) enqueue(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	req, err := decode[enqueueRequest](r, false)
	if err != nil {
		return err
	}
	res, err := s.Commands.Enqueue(r.Context(), req.command(key, commandID(r)))
	if err != nil {
		return queueError(err)
	}
	s.wrote(res.Position)
	return respond(w, struct {
		Depth  int    `json:"depth"`
		ItemID string `json:"item_id"`
	}{res.Depth, res.ItemID})
}

// queuedItem is a taken item as the API answers it.
type queuedItem struct {
	ItemID  string          `json:"item_id"`
	Text    string          `json:"text"`
	Kind    string          `json:"kind"`
	Message json.RawMessage `json:"message"`
}

func (s *Server) takeQueued(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	if _, err := decode[emptyRequest](r, true); err != nil {
		return err
	}
	res, err := s.Commands.TakeQueued(r.Context(), commands.TakeQueued{Key: string(key), CommandID: commandID(r)})
	if err != nil {
		return queueError(err)
	}
	s.wrote(res.Position)
	if res.Item == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return respond(w, queuedItem{
		ItemID: res.Item.ItemID, Text: res.Item.Text, Kind: res.Item.Kind, Message: jsonOrNull(res.Item.Message),
	})
}

// queueEntry is a waiting item as GET …/queue shows it.
type queueEntry struct {
	ItemID    string          `json:"item_id"`
	Kind      string          `json:"kind"`
	Text      string          `json:"text"`
	Message   json.RawMessage `json:"message"`
	QueuedAt  Timestamp       `json:"queued_at"`
	UpdatedAt Timestamp       `json:"updated_at"`
	ExpiresAt Timestamp       `json:"expires_at"`
}

func newQueueEntry(it domain.QueueItem, ttl time.Duration) queueEntry {
	return queueEntry{
		ItemID: it.ID, Kind: it.Kind, Text: it.Text, Message: jsonOrNull(it.Message),
		QueuedAt: Timestamp(it.QueuedAt), UpdatedAt: Timestamp(it.UpdatedAt), ExpiresAt: Timestamp(it.UpdatedAt.Add(ttl)),
	}
}

func (s *Server) inspectQueue(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	q, _, err := s.Commands.Queue(r.Context(), string(key))
	if err != nil {
		return queueError(err)
	}
	ttl := s.Commands.Config().Queue.Rules().TTL
	out := struct {
		Depth    int          `json:"depth"`
		Slot     *queueEntry  `json:"slot"`
		Overflow []queueEntry `json:"overflow"`
	}{Depth: q.Depth(), Overflow: make([]queueEntry, 0, len(q.Overflow))}
	if q.Slot != nil {
		e := newQueueEntry(*q.Slot, ttl)
		out.Slot = &e
	}
	for _, it := range q.Overflow {
		out.Overflow = append(out.Overflow, newQueueEntry(it, ttl))
	}
	return respond(w, out)
}

func (s *Server) clearQueue(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	if _, err := decode[emptyRequest](r, true); err != nil {
		return err
	}
	res, n, err := s.Commands.ClearQueue(r.Context(), commands.ClearQueue{Key: string(key), CommandID: commandID(r)})
	if err != nil {
		return queueError(err)
	}
	s.wrote(res.Position)
	return respond(w, struct {
		Cleared int `json:"cleared"`
	}{n})
}

func jsonOrNull(m json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return json.RawMessage("null")
	}
	return m
}

// queueError hands a full queue to statusOf as a conflict, keeping the
// domain's message ("queue full (32 items)").
func queueError(err error) error {
	if errors.Is(err, domain.ErrQueueFull) {
		return conflictError{err}
	}
	return err
}

type conflictError struct{ err error }

func (e conflictError) Error() string   { return e.err.Error() }
func (e conflictError) Unwrap() []error { return []error{errConflict, e.err} }
