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

func (s *Server) setClock(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Now     *time.Time `json:"now"`
		Advance string     `json:"advance"`
	}
	if err := decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	switch {
	case req.Now != nil && req.Advance != "":
		s.writeError(w, r, fmt.Errorf("%w: give now or advance, not both", errBadRequest))
		return
	case req.Now != nil:
		if err := s.Clock.Set(*req.Now); err != nil {
			s.writeError(w, r, err)
			return
		}
	case req.Advance != "":
		d, err := time.ParseDuration(req.Advance)
		if err != nil || d < 0 {
			s.writeError(w, r, fmt.Errorf("%w: advance must be a non-negative Go duration such as \"25h\" or \"90s\"", errBadRequest))
			return
		}
		if err := s.Clock.Set(s.Clock.Now().Add(d)); err != nil {
			s.writeError(w, r, err)
			return
		}
	default:
		s.writeError(w, r, fmt.Errorf("%w: give now or advance", errBadRequest))
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Now Timestamp `json:"now"`
	}{Timestamp(s.Clock.Now())})
}
