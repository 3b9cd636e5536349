package events

import (
	"strings"
	"time"
)

// Persisted type names of leases: a node's claim on a singleton duty (the
// stream lease-<name>) and a node's liveness (its own gateway-<node>
// stream), plus the adoption of a dead node's run.
const (
	TypeLeaseAcquired = "lease.acquired.v1"
	TypeLeaseRenewed  = "lease.renewed.v1"
	TypeLeaseReleased = "lease.released.v1"
	TypeRunAdopted    = "gateway.run_adopted.v1"
)

// LeasePrefix starts the name of a lease stream: lease-<name>.
const LeasePrefix = "lease-"

// LeaderLease is the stream of the leader lease: the node holding it runs
// the singleton duties of a cluster (webhook delivery, the expiry watcher,
// auto-prune).
const LeaderLease = LeasePrefix + "leader"

// IsLeaseStream reports whether stream is a lease stream.
func IsLeaseStream(stream string) bool { return strings.HasPrefix(stream, LeasePrefix) }

// IsLeaseType reports whether typ is a lease event (coordination between
// nodes, not something that happened to a session).
func IsLeaseType(typ string) bool { return strings.HasPrefix(typ, "lease.") }

// LeaseAcquired records that Holder took a lease that was free (never
// taken, released, or expired at At by the taker's clock), until Until.
// Delivered is the webhook delivery checkpoint the lease carries (the leader
// lease only; 0 elsewhere): the position up to which every event was
// delivered by the previous holders.
type LeaseAcquired struct {
	Holder    string    `json:"holder"`
	Until     time.Time `json:"until"`
	Delivered uint64    `json:"delivered,omitempty"`
	At        time.Time `json:"at"`
}

// LeaseRenewed records that the holder extended its lease to Until,
// carrying the delivery checkpoint it reached (leader lease).
type LeaseRenewed struct {
	Holder    string    `json:"holder"`
	Until     time.Time `json:"until"`
	Delivered uint64    `json:"delivered,omitempty"`
	At        time.Time `json:"at"`
}

// LeaseReleased records that the holder gave the lease up (a clean stop),
// with its final delivery checkpoint: another node may take it at once.
type LeaseReleased struct {
	Holder    string    `json:"holder"`
	Delivered uint64    `json:"delivered,omitempty"`
	At        time.Time `json:"at"`
}

// RunAdopted records, on a dead node's gateway stream, that node By found
// the node's lease expired (LeaseUntil, by By's clock at At) and ended its
// run in its place: OpenLanes had a turn the dead node opened, which By
// closes as crash recovery would (lane.turn_interrupted, resume pending,
// restart_interrupted). It counts as the run's crash for the stuck-loop
// escalation (domain.RunEnds) and as its stop for the node's next start.
type RunAdopted struct {
	By         string    `json:"by"`
	OpenLanes  []string  `json:"open_lanes"`
	LeaseUntil time.Time `json:"lease_until"`
	At         time.Time `json:"at"`
}

func (e LeaseAcquired) EventType() string { return TypeLeaseAcquired }
func (e LeaseRenewed) EventType() string  { return TypeLeaseRenewed }
func (e LeaseReleased) EventType() string { return TypeLeaseReleased }
func (e RunAdopted) EventType() string    { return TypeRunAdopted }

func (e LeaseAcquired) OccurredAt() time.Time { return e.At }
func (e LeaseRenewed) OccurredAt() time.Time  { return e.At }
func (e LeaseReleased) OccurredAt() time.Time { return e.At }
func (e RunAdopted) OccurredAt() time.Time    { return e.At }

func (LeaseAcquired) isEvent() {}
func (LeaseRenewed) isEvent()  {}
func (LeaseReleased) isEvent() {}
func (RunAdopted) isEvent()    {}
