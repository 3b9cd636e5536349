package domain

import "hermes/events"

// RunEnds follows the gateway stream to find the ends of runs that count
// toward the stuck-loop escalation (seed §7: a session active across
// consecutive restarts is suspended). Each run's end counts once, when it is
// first known: a drain that finished (timed out or not), or else the crash
// the next start records (RunInterrupted). At that stop each lane it cut (a
// turn still open when the drain ended, or open at the crash) counts one
// more interrupted restart, and every other lane's count is dropped, as in
// Hermes' _increment_restart_failure_counts; so a completed drain, which
// cuts no lane, drops every count. A drain that could not see the open turns
// (timed out, none listed) is not a known end: the counts stay, and a crash
// before the stop is recorded still counts. A run adopted by another node
// (RunAdopted) ends like a crash. RunEnds follows one gateway stream: with
// several nodes there is one per node, and a stop touches only the counts
// that node recorded. A gateway process's run stream (gatewayrun-<gateway>)
// is followed the same way: its announced stop (GatewayRunStopped) is the
// end of its drain, and a run found dead (GatewayRunLost) its crash.
type RunEnds struct {
	// Counted: the current run's end has been counted.
	Counted bool
}

// Observe folds one gateway event. When e is the counted end of a run it
// returns the lanes that stop cut (possibly none) and true.
func (r *RunEnds) Observe(e events.Event) (cut []string, end bool) {
	switch e := e.(type) {
	case events.GatewayStarted:
		r.Counted = false
	case events.DrainFinished:
		if e.TimedOut && len(e.OpenLanes) == 0 {
			return nil, false
		}
		r.Counted = true
		return e.OpenLanes, true
	case events.RunInterrupted:
		if r.Counted {
			// The run died after its drain finished: that drain counted it.
			return nil, false
		}
		r.Counted = true
		return e.OpenLanes, true
	case events.GatewayRunStarted:
		r.Counted = false
	case events.GatewayRunStopped:
		// A gateway's announced stop, after its own drain: the turns of
		// the run still open were cut; none cut (a completed drain) drops
		// the gateway's counts.
		r.Counted = true
		return e.OpenLanes, true
	case events.GatewayRunLost:
		// The gateway's crash, found by its next start or its lease.
		if r.Counted {
			return nil, false
		}
		r.Counted = true
		return e.OpenLanes, true
	case events.RunAdopted:
		// Another node ended the dead run in its place: the same crash,
		// counted once whether the adopter or the node's own restart
		// records it first.
		if r.Counted {
			return nil, false
		}
		r.Counted = true
		return e.OpenLanes, true
	}
	return nil, false
}

// ClearsRestartCount reports whether a lane event ends the lane's run of
// interrupted restarts: a successful turn, a new or switched session, or a
// suspension (the escalation's own included).
func ClearsRestartCount(e events.Event) bool {
	switch e := e.(type) {
	case events.TurnCompleted:
		return !e.Failed
	case events.SessionAutoReset, events.SessionReset, events.SessionSwitched, events.Suspended:
		return true
	}
	return false
}
