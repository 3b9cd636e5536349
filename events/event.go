package events

import "time"

// Event is one fact recorded by hermes. The set is closed: the unexported
// marker method means only this package declares events, and [Decode] has one
// explicit case per persisted type name.
//
//sumtype:decl
type Event interface {
	// EventType is the persisted type name written with the event. It never
	// changes for a given Go type; a new shape gets a new name.
	EventType() string
	// OccurredAt is the domain time of the fact (the injected clock's "now"
	// when the command was decided), used by Evolve and by time travel.
	OccurredAt() time.Time
	isEvent()
}
