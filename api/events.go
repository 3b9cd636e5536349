package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/samber/lo"

	"hermes/domain"
	"hermes/events"
)

const (
	defaultEventLimit = 100
	maxEventLimit     = 1000
	sseHeartbeat      = 15 * time.Second
)

func (s *Server) eventRoutes(rt routes) {
	rt.get("/sessions/{key}/events", withKey(s.laneEvents))
	rt.get("/sessions/{key}/state", withKey(s.laneState))
	rt.get("/events", s.allEvents)
}

func queryUint(r *http.Request, name string, def uint64) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s must be a non-negative integer", errBadRequest, name)
	}
	return n, nil
}

func queryLimit(r *http.Request) (int, error) {
	return intQuery(r, "limit", defaultEventLimit, 1, maxEventLimit)
}

type eventsResponse struct {
	Events []Envelope `json:"events"`
}

func newEventsResponse(envs []events.Envelope) eventsResponse {
	out := eventsResponse{Events: lo.Map(envs, func(env events.Envelope, _ int) Envelope { return NewEnvelope(env) })}
	return out
}

func (s *Server) laneEvents(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	from, err := queryUint(r, "from_version", 1)
	if err != nil {
		return err
	}
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	envs, err := s.Store.ReadStream(r.Context(), events.LaneStream(string(key)), max(from, 1), limit, events.Forwards)
	if err != nil {
		return err
	}
	return respond(w, newEventsResponse(envs))
}

// laneState is time travel: the entry as it was right after version
// at_version, or at instant at_time.
func (s *Server) laneState(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	q := r.URL.Query()
	if q.Has("at_version") == q.Has("at_time") {
		return fmt.Errorf("%w: give exactly one of at_version and at_time", errBadRequest)
	}
	history, err := s.readLane(r, key)
	if err != nil {
		return err
	}
	var lane domain.Lane
	var version uint64
	if q.Has("at_version") {
		v, err := queryUint(r, "at_version", 0)
		if err != nil {
			return err
		}
		if v == 0 || v > uint64(len(history)) {
			return fmt.Errorf("%w: lane %s has versions 1 to %d", errNotFound, key, len(history))
		}
		lane, version = domain.StateAtVersion(history, v), v
	} else {
		t, err := time.Parse(time.RFC3339Nano, q.Get("at_time"))
		if err != nil {
			return fmt.Errorf("%w: at_time must be an RFC 3339 time", errBadRequest)
		}
		lane, version = domain.StateAtTime(history, t)
		if version == 0 {
			return fmt.Errorf("%w: lane %s did not exist at %s", errNotFound, key, t.UTC().Format(time.RFC3339Nano))
		}
	}
	return respond(w, NewEntry(lane, version))
}

// maxLaneHistory bounds what time travel reads.
const maxLaneHistory = 1_000_000

func (s *Server) readLane(r *http.Request, key sessionKey) ([]events.Envelope, error) {
	var all []events.Envelope
	from := uint64(1)
	for {
		page, err := s.Store.ReadStream(r.Context(), events.LaneStream(string(key)), from, 4096, events.Forwards)
		if errors.Is(err, events.ErrStreamNotFound) && len(all) == 0 {
			return nil, fmt.Errorf("%w: lane %s", errNotFound, key)
		}
		if err != nil {
			return nil, fmt.Errorf("read lane %s: %w", key, err)
		}
		all = append(all, page...)
		if len(page) < 4096 || len(all) >= maxLaneHistory {
			return all, nil
		}
		from = page[len(page)-1].Version + 1
	}
}

func (s *Server) allEvents(w http.ResponseWriter, r *http.Request) error {
	from, err := queryUint(r, "from_position", 0)
	if err != nil {
		return err
	}
	if r.URL.Query().Get("follow") == "1" {
		return s.followEvents(w, r, from)
	}
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	// from_position is inclusive: the first event returned has it.
	after := uint64(0)
	if from > 0 {
		after = from - 1
	}
	envs, err := s.Store.ReadAll(r.Context(), after, limit)
	if err != nil {
		return err
	}
	return respond(w, newEventsResponse(envs))
}
