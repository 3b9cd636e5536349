package api

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// ManualClock is the test clock of `hermes serve --clock=manual`: it starts
// at the real time and moves only when told, forwards.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a clock stopped at start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start.UTC()} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t; moving backwards is refused, because events
// would then be recorded out of time order.
func (c *ManualClock) Set(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.Before(c.now) {
		return fmt.Errorf("%w: the clock only moves forwards (now %s, asked %s)", errBadRequest, c.now.Format(timeFormat), t.UTC().Format(timeFormat))
	}
	c.now = t.UTC()
	return nil
}

func (s *Server) setClock(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[clockRequest](r, false)
	if err != nil {
		return err
	}
	to := s.Clock.Now()
	if req.Now != nil {
		to = *req.Now
	} else {
		d, err := req.advance()
		if err != nil {
			return err
		}
		to = to.Add(d)
	}
	if err := s.Clock.Set(to); err != nil {
		return err
	}
	return respond(w, struct {
		Now Timestamp `json:"now"`
	}{Timestamp(s.Clock.Now())})
}
