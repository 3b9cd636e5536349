package domain

import (
	"time"

	"hermes/events"
)

// StateAtVersion is the lane as it was right after the event with stream
// version v (v 0: before any event). history is the lane's stream in order.
func StateAtVersion(history []events.Envelope, v uint64) Lane {
	var l Lane
	for _, env := range history {
		if env.Version > v {
			break
		}
		l = Evolve(l, env.Event)
	}
	return l
}

// StateAtTime is the lane as it was at instant t: every event that occurred
// at or before t applied. It also returns the version of the last event
// applied.
func StateAtTime(history []events.Envelope, t time.Time) (Lane, uint64) {
	var l Lane
	var v uint64
	for _, env := range history {
		if env.Event.OccurredAt().After(t) {
			break
		}
		l = Evolve(l, env.Event)
		v = env.Version
	}
	return l, v
}
