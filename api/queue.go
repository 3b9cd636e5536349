package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"hermes/commands"
	"hermes/domain"
	"hermes/events"
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
func (s *Server) queueRoutes(r chi.Router) {
	r.Post("/sessions/{key}/queue", s.enqueue)
	r.Post("/sessions/{key}/queue/next", s.takeQueued)
	r.Get("/sessions/{key}/queue", s.inspectQueue)
	r.Delete("/sessions/{key}/queue", s.clearQueue)
}

type enqueueRequest struct {
	Text    string          `json:"text"`
	Kind    string          `json:"kind"`
	Message json.RawMessage `json:"message"`
}

func (s *Server) enqueue(w http.ResponseWriter, r *http.Request) {
	key, err := pathKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req enqueueRequest
	if err := decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if bytes.Equal(req.Message, []byte("null")) {
		req.Message = nil
	}
	if err := validateEnqueue(req); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.Commands.Enqueue(r.Context(), key, commands.EnqueueMessage{
		Kind: req.Kind, Text: req.Text, Message: req.Message, CommandID: commandID(r),
	})
	if err != nil {
		s.writeError(w, r, queueError(err))
		return
	}
	s.wrote(res.Position)
	writeJSON(w, http.StatusOK, struct {
		Depth  int    `json:"depth"`
		ItemID string `json:"item_id"`
	}{res.Depth, res.ItemID})
}

func validateEnqueue(req enqueueRequest) error {
	switch {
	case req.Kind == "":
		return fmt.Errorf("%w: kind is required (followup or queue)", errBadRequest)
	case req.Kind != events.QueueKindFollowup && req.Kind != events.QueueKindQueue:
		return fmt.Errorf("%w: kind %q is not followup or queue", errBadRequest, req.Kind)
	case len(req.Text) > domain.MaxQueueTextBytes:
		return fmt.Errorf("%w: text is %d bytes, the limit is %d", errTooLarge, len(req.Text), domain.MaxQueueTextBytes)
	case len(req.Message) > domain.MaxQueueMessageBytes:
		return fmt.Errorf("%w: message is %d bytes, the limit is %d", errTooLarge, len(req.Message), domain.MaxQueueMessageBytes)
	case len(req.Message) > 0 && req.Message[0] != '{':
		return fmt.Errorf("%w: message must be a JSON object", errBadRequest)
	case req.Text == "" && len(req.Message) == 0:
		return fmt.Errorf("%w: text or message is required", errBadRequest)
	}
	return nil
}

// queuedItem is a taken item as the API answers it.
type queuedItem struct {
	ItemID  string          `json:"item_id"`
	Text    string          `json:"text"`
	Kind    string          `json:"kind"`
	Message json.RawMessage `json:"message"`
}

func (s *Server) takeQueued(w http.ResponseWriter, r *http.Request) {
	release, ok := s.admitTurn()
	if !ok {
		s.writeError(w, r, fmt.Errorf("%w; queued items are kept for the next start", errDraining))
		return
	}
	defer release()
	key, err := pathKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := decode(r, &struct{}{}, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.Commands.TakeQueued(r.Context(), key, commandID(r))
	if err != nil {
		s.writeError(w, r, queueError(err))
		return
	}
	s.wrote(res.Position)
	if res.Item == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, queuedItem{
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

func (s *Server) inspectQueue(w http.ResponseWriter, r *http.Request) {
	key, err := pathKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q, _, err := s.Commands.Queue(r.Context(), key)
	if err != nil {
		s.writeError(w, r, queueError(err))
		return
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
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) clearQueue(w http.ResponseWriter, r *http.Request) {
	key, err := pathKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := decode(r, &struct{}{}, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, n, err := s.Commands.ClearQueue(r.Context(), key, commandID(r))
	if err != nil {
		s.writeError(w, r, queueError(err))
		return
	}
	s.wrote(res.Position)
	writeJSON(w, http.StatusOK, struct {
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
