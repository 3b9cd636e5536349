package commands

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"hermes/domain"
	"hermes/events"
)

// ErrRunAdopted: this node's run was ended by another node (its lease
// expired; see [Handler.AdoptDeadRuns]). The process must restart to serve
// again: its open turns were closed in its place.
var ErrRunAdopted = errors.New("this node's run was adopted by another node")

// leaseAttempts bounds the retries of a lease append that lost a race with
// an append of the same node (another event of the same stream).
const leaseAttempts = 4

// leaseScanPage is how many events a backwards scan of a lease or gateway
// stream reads at once.
const leaseScanPage = 32

// ReadLease returns the lease state of a lease stream and the stream's
// version (0: no event yet). Only the stream's last lease event is read.
func (h *Handler) ReadLease(ctx context.Context, stream string) (domain.Lease, uint64, error) {
	var lease domain.Lease
	version, err := h.scanBack(ctx, stream, func(env events.Envelope) bool {
		if !events.IsLeaseType(env.Type) {
			return false
		}
		lease = lease.Evolve(env.Event)
		return true
	})
	if err != nil {
		return domain.Lease{}, 0, fmt.Errorf("read lease %s: %w", stream, err)
	}
	return lease, version, nil
}

// scanBack reads stream from its end, calling stop on each event until it
// returns true or the stream's first event was seen, and returns the
// stream's version (0 when the stream has no event).
func (h *Handler) scanBack(ctx context.Context, stream string, stop func(events.Envelope) bool) (uint64, error) {
	var version, from uint64
	for {
		page, err := h.store.ReadStream(ctx, stream, from, leaseScanPage, events.Backwards)
		if isNotFound(err) {
			return version, nil
		}
		if err != nil {
			return 0, err
		}
		if len(page) == 0 {
			return version, nil
		}
		if version == 0 {
			version = page[0].Version
		}
		for _, env := range page {
			if stop(env) {
				return version, nil
			}
		}
		last := page[len(page)-1].Version
		if len(page) < leaseScanPage || last <= 1 {
			return version, nil
		}
		from = last - 1
	}
}

// ClaimLease keeps or takes a lease for this node.
type ClaimLease struct {
	// Stream is the lease stream (events.LeaderLease).
	Stream string
	// TTL is how long the lease lasts from now.
	TTL time.Duration
	// Delivered is the holder's webhook delivery checkpoint to record.
	Delivered uint64
}

// ClaimLease renews the lease when this node holds it, takes it when it is
// free, and leaves it when another node holds it; it returns the lease as
// it stands after. The append carries the version read as its expected
// version: of two nodes claiming a free lease at once, one wins and the
// other reads the winner's lease.
func (h *Handler) ClaimLease(ctx context.Context, c ClaimLease) (domain.Lease, error) {
	for range leaseAttempts {
		lease, version, err := h.ReadLease(ctx, c.Stream)
		if err != nil {
			return domain.Lease{}, err
		}
		now := h.now()
		e := lease.Claim(h.node, now, c.TTL, c.Delivered)
		if e == nil {
			return lease, nil
		}
		err = h.appendLease(ctx, c.Stream, version, e)
		if errors.Is(err, events.ErrWrongExpectedVersion) {
			continue // someone appended: read again and decide again
		}
		if err != nil {
			return domain.Lease{}, err
		}
		return lease.Evolve(e), nil
	}
	return domain.Lease{}, fmt.Errorf("claim lease %s: %w", c.Stream, ErrConflict)
}

// ReleaseLease gives the lease up when this node holds it, recording the
// final delivery checkpoint, so another node may take it at once.
func (h *Handler) ReleaseLease(ctx context.Context, stream string, delivered uint64) error {
	for range leaseAttempts {
		lease, version, err := h.ReadLease(ctx, stream)
		if err != nil {
			return err
		}
		if lease.Holder != h.node || lease.Released {
			return nil
		}
		err = h.appendLease(ctx, stream, version, events.LeaseReleased{Holder: h.node, Delivered: max(lease.Delivered, delivered), At: h.now()})
		if errors.Is(err, events.ErrWrongExpectedVersion) {
			continue
		}
		return err
	}
	return fmt.Errorf("release lease %s: %w", stream, ErrConflict)
}

// appendLease appends e to stream at the expected version. Its id names the
// node and the version it follows, so a retried append is a duplicate.
func (h *Handler) appendLease(ctx context.Context, stream string, version uint64, e events.Event) error {
	commandID := fmt.Sprintf("lease/%s/%s/%d", stream, h.node, version)
	_, err := h.store.Append(ctx, stream, events.ExactVersion(version), []events.Proposed{{
		ID:       eventID(commandID, stream, 0),
		Event:    e,
		Metadata: events.Metadata{SchemaVersion: events.SchemaVersionOf(e.EventType()), Command: "claim_lease", CommandID: commandID, Node: h.node},
	}})
	if err != nil {
		return fmt.Errorf("append %s to %s: %w", e.EventType(), stream, err)
	}
	return nil
}

// NodeRun reads what node's gateway stream says of its current run, and
// the stream's version. It reads back only to the last lease event or run
// boundary (start, stop, adoption).
func (h *Handler) NodeRun(ctx context.Context, node string) (domain.NodeRun, uint64, error) {
	var run domain.NodeRun
	stream := events.GatewayStreamOf(node)
	version, err := h.scanBack(ctx, stream, func(env events.Envelope) bool {
		switch e := env.Event.(type) {
		case events.LeaseAcquired:
			run = domain.NodeRun{Open: true, LeaseUntil: e.Until}
		case events.LeaseRenewed:
			run = domain.NodeRun{Open: true, LeaseUntil: e.Until}
		case events.GatewayStarted, events.GatewayStopped, events.RunAdopted:
			run = run.Evolve(e, env.Position)
		default:
			return false
		}
		return true
	})
	if err != nil {
		return domain.NodeRun{}, 0, fmt.Errorf("read gateway stream %s: %w", stream, err)
	}
	return run, version, nil
}

// RenewNodeLease takes or extends this node's lease on its gateway stream
// until now + ttl. It fails with ErrRunAdopted when another node adopted
// the run (the lease had expired). The append carries the version read, so
// it cannot land after an adoption the read did not see.
func (h *Handler) RenewNodeLease(ctx context.Context, ttl time.Duration) error {
	stream := h.gatewayStream()
	for range leaseAttempts {
		run, version, err := h.NodeRun(ctx, h.node)
		if err != nil {
			return err
		}
		if !run.Open {
			return fmt.Errorf("renew lease on %s: %w", stream, ErrRunAdopted)
		}
		now := h.now()
		var e events.Event = events.LeaseRenewed{Holder: h.node, Until: now.Add(ttl), At: now}
		if run.LeaseUntil.IsZero() {
			e = events.LeaseAcquired{Holder: h.node, Until: now.Add(ttl), At: now}
		}
		err = h.appendLease(ctx, stream, version, e)
		if errors.Is(err, events.ErrWrongExpectedVersion) {
			continue // this node's own gateway event, or an adoption
		}
		return err
	}
	return fmt.Errorf("renew lease on %s: %w", stream, ErrConflict)
}

// OpenTurn is a lane's open turn and who opened it.
type OpenTurn struct {
	Key    string
	TurnID string
	// Node opened the turn (its turn_started's metadata.node).
	Node string
	// GatewayRun is the gateway run the turn belongs to ("<gateway>/<run
	// id>", its turn_started's metadata.gateway_run; "" for none).
	GatewayRun string
	// Position is the turn_started's position in the log.
	Position uint64
}

// turnScan is the page of the backwards search for an open turn's
// turn_started.
const turnScan = 64

// OpenTurns reads, for each lane key, the turn open on its stream and the
// node that opened it; lanes with no open turn (closed since the caller
// listed them) are left out. Whether a turn is open is the lane's folded
// state (its snapshot and the events after it); the turn_started is then
// searched backwards from the lane's end, however far back it is.
func (h *Handler) OpenTurns(ctx context.Context, keys []string) ([]OpenTurn, error) {
	var out []OpenTurn
	for _, key := range keys {
		lane, version, err := h.Lane(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("lane %s: %w", key, err)
		}
		if version == 0 || !lane.TurnOpen() {
			continue
		}
		env, found, err := h.lastTurnStarted(ctx, events.LaneStream(key), version)
		if err != nil {
			return nil, fmt.Errorf("lane %s: %w", key, err)
		}
		if e, ok := env.Event.(events.TurnStarted); found && ok {
			out = append(out, OpenTurn{Key: key, TurnID: e.TurnID, Node: env.Metadata.Node, GatewayRun: env.Metadata.GatewayRun, Position: env.Position})
		}
	}
	return out, nil
}

// lastTurnStarted finds the last turn_started of stream at or before
// version (the open turn's: a later one would have replaced it).
func (h *Handler) lastTurnStarted(ctx context.Context, stream string, version uint64) (events.Envelope, bool, error) {
	for from := version; from > 0; {
		page, err := h.store.ReadStream(ctx, stream, from, turnScan, events.Backwards)
		if isNotFound(err) {
			return events.Envelope{}, false, nil
		}
		if err != nil {
			return events.Envelope{}, false, err
		}
		for _, env := range page {
			if _, ok := env.Event.(events.TurnStarted); ok {
				return env, true, nil
			}
		}
		if len(page) < turnScan {
			return events.Envelope{}, false, nil
		}
		from = page[len(page)-1].Version - 1
	}
	return events.Envelope{}, false, nil
}

// AdoptDeadRuns applies the adoption rule to the open turns of other
// nodes (see [Adoption]).
type AdoptDeadRuns struct {
	// Turns are the open turns seen (from [Handler.OpenTurns]); this
	// node's own and those of nodes with a live lease are left alone.
	Turns []OpenTurn
	// TTL is the implied lease of a run that took none yet.
	TTL time.Duration
}

// Adoption is what AdoptDeadRuns did for one dead node.
type Adoption struct {
	Node string
	// Recorded: this call appended the node's gateway.run_adopted (at most
	// one node ever does for a run).
	Recorded bool
	// Interrupted are the lanes whose turn this call closed.
	Interrupted []string
}

// AdoptDeadRuns ends the runs of dead nodes. For each other node with an
// open turn: when its run is open and its lease expired by this node's
// clock, it appends gateway.run_adopted to that node's gateway stream with
// the version it read as expected version (so of several adopters, and of
// an adopter and the node itself renewing or restarting, exactly one
// wins); then, once the run is ended (by this adoption, an earlier one, or
// the node's own stop), it closes each of that node's turns opened before
// the end, as crash recovery would (the lane's expected version and the turn
// id make each close happen once). A node whose lease is live is left
// alone; a lost race is left to the next call.
func (h *Handler) AdoptDeadRuns(ctx context.Context, c AdoptDeadRuns) ([]Adoption, error) {
	byNode := map[string][]OpenTurn{}
	for _, t := range c.Turns {
		if t.GatewayRun != "" {
			continue // a gateway process's turn: its run's end cuts it, not the node's
		}
		if t.Node != "" && t.Node != h.node {
			byNode[t.Node] = append(byNode[t.Node], t)
		}
	}
	var out []Adoption
	var errs []error
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		turns := byNode[node]
		run, version, err := h.NodeRun(ctx, node)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		now := h.now()
		a := Adoption{Node: node}
		ended := run.Ended
		switch {
		case run.Abandoned(now, c.TTL):
			keys := make([]string, len(turns))
			for i, t := range turns {
				keys[i] = t.Key
			}
			slices.Sort(keys)
			pos, err := h.recordAdoption(ctx, node, version, events.RunAdopted{By: h.node, OpenLanes: keys, LeaseUntil: run.LeaseUntil, At: now})
			if errors.Is(err, events.ErrWrongExpectedVersion) {
				continue // the node renewed, restarted or was adopted: look again next time
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			a.Recorded, ended = true, pos
		case run.Open || ended == 0:
			continue // alive, or no run to speak of
		}
		for _, t := range turns {
			if t.Position >= ended {
				continue
			}
			res, err := h.InterruptTurn(ctx, InterruptTurn{Key: t.Key, TurnID: t.TurnID, AdoptedFrom: node,
				Reason: events.ResumeRestartInterrupted, CommandID: "adopt/" + node + "/" + t.TurnID + "/" + h.node})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if hasEvent[events.TurnInterrupted](res.Events) {
				a.Interrupted = append(a.Interrupted, t.Key)
			}
		}
		if a.Recorded || len(a.Interrupted) > 0 {
			out = append(out, a)
		}
	}
	return out, errors.Join(errs...)
}

// recordAdoption appends e to node's gateway stream at version.
func (h *Handler) recordAdoption(ctx context.Context, node string, version uint64, e events.RunAdopted) (uint64, error) {
	stream := events.GatewayStreamOf(node)
	commandID := fmt.Sprintf("adopt/%s/%d/%s", node, version, h.node)
	res, err := h.store.Append(ctx, stream, events.ExactVersion(version), []events.Proposed{{
		ID:       eventID(commandID, stream, 0),
		Event:    e,
		Metadata: events.Metadata{SchemaVersion: events.SchemaVersionOf(e.EventType()), Command: "adopt_run", CommandID: commandID, Node: h.node},
	}})
	if err != nil {
		return 0, fmt.Errorf("adopt %s: %w", stream, err)
	}
	return res.LastPosition(), nil
}
