package domain

import (
	"time"

	"hermes/events"
)

// Lease is the state of a lease stream (or of the lease events of a node's
// gateway stream): who holds it, until when, and the webhook delivery
// checkpoint it carries. Time is each node's injected clock: a holder
// renews at a third of the TTL and stops acting as holder a third of the TTL
// before Until by its own clock, and another node takes the lease only once
// Until passed by its clock; so two nodes never act as holders at once
// while their clocks differ by less than a third of the TTL.
type Lease struct {
	Holder    string
	Until     time.Time
	Delivered uint64
	// Released: the holder gave the lease up.
	Released bool
}

// Evolve folds one event of a lease stream; other events change nothing.
func (l Lease) Evolve(e events.Event) Lease {
	switch e := e.(type) {
	case events.LeaseAcquired:
		return Lease{Holder: e.Holder, Until: e.Until, Delivered: max(l.Delivered, e.Delivered)}
	case events.LeaseRenewed:
		return Lease{Holder: e.Holder, Until: e.Until, Delivered: max(l.Delivered, e.Delivered)}
	case events.LeaseReleased:
		return Lease{Holder: e.Holder, Until: l.Until, Delivered: max(l.Delivered, e.Delivered), Released: true}
	}
	return l
}

// Free reports whether another node may take the lease at now: never taken,
// released, or expired.
func (l Lease) Free(now time.Time) bool {
	return l.Holder == "" || l.Released || !now.Before(l.Until)
}

// HeldBy reports whether node may act as the holder at now: it holds the
// lease and at least margin is left before Until (see [Lease]).
func (l Lease) HeldBy(node string, now time.Time, margin time.Duration) bool {
	return l.Holder == node && !l.Released && now.Before(l.Until.Add(-margin))
}

// Claim decides what node appends to keep or take the lease at now for ttl,
// reporting the delivery checkpoint delivered: a renewal when it holds the
// lease (even past its margin, as long as nobody took it), an acquisition
// when the lease is free, nothing when another node holds it.
func (l Lease) Claim(node string, now time.Time, ttl time.Duration, delivered uint64) events.Event {
	delivered = max(l.Delivered, delivered)
	switch {
	case l.Holder == node && !l.Released && now.Before(l.Until):
		return events.LeaseRenewed{Holder: node, Until: now.Add(ttl), Delivered: delivered, At: now}
	case l.Free(now):
		return events.LeaseAcquired{Holder: node, Until: now.Add(ttl), Delivered: delivered, At: now}
	}
	return nil
}

// NodeRun is what a node's gateway stream says of its current run, for
// the adoption rule: a node whose run is open and whose lease expired is
// dead, and another node may end the run in its place (events.RunAdopted).
type NodeRun struct {
	// Open: a run started and was neither stopped nor adopted.
	Open bool
	// StartedAt is the start of the run (its clock).
	StartedAt time.Time
	// LeaseUntil is the run's last lease (zero: none taken yet).
	LeaseUntil time.Time
	// Ended is the position of the event that ended the last run (its
	// stop or adoption); 0 while it is open or when there is none.
	Ended uint64
}

// Evolve folds one event of a gateway stream at position pos.
func (r NodeRun) Evolve(e events.Event, pos uint64) NodeRun {
	switch e := e.(type) {
	case events.GatewayStarted:
		return NodeRun{Open: true, StartedAt: e.At}
	case events.LeaseAcquired:
		r.LeaseUntil = e.Until
	case events.LeaseRenewed:
		r.LeaseUntil = e.Until
	case events.GatewayStopped, events.RunAdopted:
		r.Open, r.Ended = false, pos
	}
	return r
}

// Expired reports whether the run's lease ran out at now. A run that took
// no lease yet holds an implied one of ttl from its start.
func (r NodeRun) Expired(now time.Time, ttl time.Duration) bool {
	until := r.LeaseUntil
	if until.IsZero() {
		until = r.StartedAt.Add(ttl)
	}
	return !now.Before(until)
}

// Abandoned reports whether another node may adopt the run at now: it is
// open and its lease expired.
func (r NodeRun) Abandoned(now time.Time, ttl time.Duration) bool {
	return r.Open && r.Expired(now, ttl)
}
