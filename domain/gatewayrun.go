package domain

import (
	"errors"
	"fmt"
	"time"

	"hermes/events"
)

// Refusals of the gateway-run decisions.
var (
	// ErrRunNotFound: no such run of the gateway (or not its last one).
	ErrRunNotFound = errors.New("gateway run not found")
	// ErrRunEnded: the run was stopped, or hermes found it dead (its lease
	// expired or the gateway started again): its turns were recovered and
	// the process must announce a new run.
	ErrRunEnded = errors.New("gateway run ended")
)

// Bounds of a gateway run's lease.
const (
	MinRunLease     = 5 * time.Second
	MaxRunLease     = time.Hour
	DefaultRunLease = time.Minute
	maxRunName      = 64
)

// Gateway run states, as the API and the read model name them.
const (
	RunRunning = "running"
	RunStopped = "stopped"
	RunLost    = "lost"
)

// GatewayRun is one run of a gateway process as its stream tells it.
type GatewayRun struct {
	Gateway      string
	RunID        string
	PID          int
	Host         string
	StartedAt    time.Time
	LeaseSeconds int
	LeaseUntil   time.Time
	// State is RunRunning, RunStopped or RunLost ("" before any run).
	State   string
	EndedAt time.Time
	// Restart: the stop was a restart. Cause: why a lost run was lost.
	Restart bool
	Cause   string
	// Cut are the lanes whose turn the run's end cut.
	Cut []string
	// Position is the log position of the run's start (set by the read
	// model, which orders runs by it; 0 in a decision).
	Position uint64
}

// Running reports whether the run is open.
func (r GatewayRun) Running() bool { return r.State == RunRunning }

// Lease is the run's lease length.
func (r GatewayRun) Lease() time.Duration { return time.Duration(r.LeaseSeconds) * time.Second }

// GatewayRuns is the state of a gateway's run stream: its last run.
type GatewayRuns struct {
	Last GatewayRun
}

// Evolve folds one event of a gateway's run stream.
func (g GatewayRuns) Evolve(e events.Event) GatewayRuns {
	switch e := e.(type) {
	case events.GatewayRunStarted:
		g.Last = GatewayRun{Gateway: e.Gateway, RunID: e.RunID, PID: e.PID, Host: e.Host, StartedAt: e.At,
			LeaseSeconds: e.LeaseSeconds, LeaseUntil: e.LeaseUntil, State: RunRunning}
	case events.LeaseAcquired:
		if e.Holder == g.Last.RunID {
			g.Last.LeaseUntil = e.Until
		}
	case events.LeaseRenewed:
		if e.Holder == g.Last.RunID {
			g.Last.LeaseUntil = e.Until
		}
	case events.GatewayRunStopped:
		if e.RunID == g.Last.RunID {
			g.Last.State, g.Last.EndedAt, g.Last.Restart, g.Last.Cut = RunStopped, e.At, e.Restart, e.OpenLanes
		}
	case events.GatewayRunLost:
		if e.RunID == g.Last.RunID {
			g.Last.State, g.Last.EndedAt, g.Last.Cause, g.Last.Cut = RunLost, e.At, e.Cause, e.OpenLanes
		}
	}
	return g
}

// CheckRunName accepts a gateway name or run id: 1 to 64 letters, digits,
// '-', '_' or '.' (they name a stream and appear in a turn's metadata).
func CheckRunName(field, s string) error {
	if s == "" || len(s) > maxRunName {
		return fmt.Errorf("%w: %s must be 1 to %d characters", ErrInvalidArgument, field, maxRunName)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("%w: %s contains %q; use letters, digits, '-', '_' and '.'", ErrInvalidArgument, field, r)
		}
	}
	return nil
}

// RunStart is a gateway process announcing a run.
type RunStart struct {
	Gateway string
	RunID   string
	PID     int
	Host    string
	Lease   time.Duration
	// PreviousOpenLanes are the lanes with a turn of the gateway's last
	// run open (the caller reads them): cut if that run is still open.
	PreviousOpenLanes []string
}

// StartRun decides a run's announcement. Announcing the running run again
// changes nothing; reusing the id of the ended last run is refused. A last
// run still open died without a word: it is lost (cause restarted),
// cutting the turns it had open, before the new run starts.
func (g GatewayRuns) StartRun(s RunStart, now time.Time) ([]events.Event, error) {
	if err := CheckRunName("gateway", s.Gateway); err != nil {
		return nil, err
	}
	if err := CheckRunName("run_id", s.RunID); err != nil {
		return nil, err
	}
	if s.PID < 0 {
		return nil, fmt.Errorf("%w: pid %d is negative", ErrInvalidArgument, s.PID)
	}
	if s.Lease < MinRunLease || s.Lease > MaxRunLease || s.Lease%time.Second != 0 {
		return nil, fmt.Errorf("%w: lease_seconds must be a whole number from %d to %d", ErrInvalidArgument,
			int(MinRunLease/time.Second), int(MaxRunLease/time.Second))
	}
	if g.Last.RunID == s.RunID {
		if g.Last.Running() {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: run %s of gateway %s already %s", ErrRunEnded, s.RunID, s.Gateway, g.Last.State)
	}
	var out []events.Event
	if g.Last.Running() {
		out = append(out, events.GatewayRunLost{RunID: g.Last.RunID, Cause: events.RunLostRestarted,
			LeaseUntil: g.Last.LeaseUntil, OpenLanes: nonNil(s.PreviousOpenLanes), At: now})
	}
	return append(out, events.GatewayRunStarted{Gateway: s.Gateway, RunID: s.RunID, PID: s.PID, Host: s.Host,
		LeaseSeconds: int(s.Lease / time.Second), LeaseUntil: now.Add(s.Lease), At: now}), nil
}

// current returns the last run when it is runID.
func (g GatewayRuns) current(runID string) (GatewayRun, error) {
	if g.Last.RunID == "" || g.Last.RunID != runID {
		return GatewayRun{}, fmt.Errorf("%w: %s", ErrRunNotFound, runID)
	}
	return g.Last, nil
}

// Heartbeat extends the running run's lease to now + its lease. The event
// is decided only when less than two thirds of the lease is left, so a
// gateway may beat often while the log grows by about three events a lease.
func (g GatewayRuns) Heartbeat(runID string, now time.Time) ([]events.Event, error) {
	r, err := g.current(runID)
	if err != nil {
		return nil, err
	}
	if !r.Running() {
		return nil, fmt.Errorf("%w: run %s is %s", ErrRunEnded, runID, r.State)
	}
	if r.LeaseUntil.Sub(now) > r.Lease()*2/3 {
		return nil, nil
	}
	return []events.Event{events.LeaseRenewed{Holder: runID, Until: now.Add(r.Lease()), At: now}}, nil
}

// StopRun decides the run's announced stop; openLanes still had a turn of
// the run open (the stop cuts them). Stopping a stopped run changes
// nothing; a lost run is refused.
func (g GatewayRuns) StopRun(runID string, restart bool, openLanes []string, now time.Time) ([]events.Event, error) {
	r, err := g.current(runID)
	if err != nil {
		return nil, err
	}
	switch r.State {
	case RunStopped:
		return nil, nil
	case RunLost:
		return nil, fmt.Errorf("%w: run %s was lost (%s) before its stop", ErrRunEnded, runID, r.Cause)
	}
	return []events.Event{events.GatewayRunStopped{RunID: runID, Restart: restart, OpenLanes: nonNil(openLanes), At: now}}, nil
}

// LoseExpired decides that the running run died: its lease ran out at now
// and so did the grace a hermes start gives (notBefore: a gateway cannot
// beat while hermes is down). openLanes had a turn of the run open. A run
// with time left, or not running, changes nothing.
func (g GatewayRuns) LoseExpired(runID string, notBefore time.Time, openLanes []string, now time.Time) []events.Event {
	r, err := g.current(runID)
	if err != nil || !r.Running() || now.Before(r.LeaseUntil) || now.Before(notBefore) {
		return nil
	}
	return []events.Event{events.GatewayRunLost{RunID: runID, Cause: events.RunLostLeaseExpired,
		LeaseUntil: r.LeaseUntil, OpenLanes: nonNil(openLanes), At: now}}
}

// Expired reports whether the running run's lease ran out at now, counting
// the grace of a hermes start (see LoseExpired).
func (r GatewayRun) Expired(notBefore, now time.Time) bool {
	return r.Running() && !now.Before(r.LeaseUntil) && !now.Before(notBefore)
}

func nonNil(keys []string) []string {
	if keys == nil {
		return []string{}
	}
	return keys
}

// GatewayRunsFrom is the state of a gateway's run stream told by its last
// event alone, which is enough to decide on its last run: a run's start,
// a lease renewal (the run id is its holder, and it was renewed for
// Until - At), or the run's end. The run's other details (pid, host, start)
// are the read model's.
func GatewayRunsFrom(last events.Event) GatewayRuns {
	switch e := last.(type) {
	case events.LeaseAcquired:
		return GatewayRuns{Last: GatewayRun{RunID: e.Holder, LeaseUntil: e.Until,
			LeaseSeconds: int(e.Until.Sub(e.At).Round(time.Second) / time.Second), State: RunRunning}}
	case events.LeaseRenewed:
		return GatewayRuns{Last: GatewayRun{RunID: e.Holder, LeaseUntil: e.Until,
			LeaseSeconds: int(e.Until.Sub(e.At).Round(time.Second) / time.Second), State: RunRunning}}
	case events.GatewayRunStopped:
		return GatewayRuns{}.Evolve(events.GatewayRunStarted{RunID: e.RunID}).Evolve(e)
	case events.GatewayRunLost:
		return GatewayRuns{Last: GatewayRun{RunID: e.RunID, LeaseUntil: e.LeaseUntil, State: RunLost, EndedAt: e.At,
			Cause: e.Cause, Cut: e.OpenLanes}}
	}
	return GatewayRuns{}.Evolve(last)
}
