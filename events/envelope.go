package events

import "time"

// Metadata travels with every stored event. SchemaVersion is the version of
// the persisted type as written (the ".vN" suffix of its name); the other
// fields say which command wrote the event, for audit and de-duplication.
type Metadata struct {
	SchemaVersion int    `json:"schema_version"`
	Command       string `json:"command,omitempty"`
	CommandID     string `json:"command_id,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	// Node is the hermes serve node that wrote the event, when several
	// share one store (empty on a single node): crash recovery closes only
	// the turns its own node opened.
	Node string `json:"node,omitempty"`
	// GatewayRun is the gateway run (see [GatewayRunStarted]) a
	// turn_started belongs to, as "<gateway>/<run id>": that run's end cuts
	// the turn, and hermes' own restarts leave it to the gateway process,
	// which outlives them. Empty: the turn is hermes' own run's.
	GatewayRun string `json:"gateway_run,omitempty"`
	// Redacted is set on an event whose content an erasure removed: the id
	// of that erasure event (see [Erasure]). The event keeps its type,
	// stream, version, position and id.
	Redacted string `json:"redacted,omitempty"`
}

// Proposed is an event offered to [Store.Append]: its id (derived from the
// command, so a retried command proposes the same ids), the event and its
// metadata. The store sets the version, the position and the recorded time.
type Proposed struct {
	ID       string
	Event    Event
	Metadata Metadata
}

// Envelope is an event as stored: the (upcast) event plus where and when it
// was written.
type Envelope struct {
	// Stream is the name of the stream the event belongs to.
	Stream string
	// Version is the event's 1-based position within its stream: the first
	// event of a stream has version 1, and versions never skip.
	Version uint64
	// Position is the event's place in the whole log, strictly increasing in
	// commit order; projections checkpoint on it. It is an ordered cursor,
	// not a count: the SQLite store numbers events 1, 2, 3…, but KurrentDB's
	// positions are byte offsets with gaps. Compare positions and use one as
	// an exclusive lower bound; never compute a neighbour with +1 or -1.
	Position uint64
	// ID is the event id given by the writer; unique within the stream.
	ID string
	// Type is the persisted type name as written (before any upcast).
	Type string
	// RecordedAt is when the store committed the event.
	RecordedAt time.Time
	// Metadata is the metadata written with the event.
	Metadata Metadata
	// Event is the decoded event, upcast to its current shape.
	Event Event
}
