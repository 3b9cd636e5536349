package commands

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"hermes/domain"
	"hermes/events"
)

// GatewayRun is what the last recorded run of the gateway looked like.
type GatewayRun struct {
	// Started: a previous run was recorded at all.
	Started bool
	// Stopped: that run recorded its stop; Clean: the drain completed.
	Stopped bool
	Clean   bool
}

// gatewayStream is this node's gateway stream.
func (h *Handler) gatewayStream() string { return events.GatewayStreamOf(h.node) }

// PreviousRun reads the gateway stream's last start and stop.
func (h *Handler) PreviousRun(ctx context.Context) (GatewayRun, error) {
	last, err := h.store.ReadStream(ctx, h.gatewayStream(), 0, 16, events.Backwards)
	if err != nil {
		if isNotFound(err) {
			return GatewayRun{}, nil
		}
		return GatewayRun{}, fmt.Errorf("read gateway stream: %w", err)
	}
	var run GatewayRun
	for _, env := range last {
		switch e := env.Event.(type) {
		case events.GatewayStopped:
			run.Started, run.Stopped, run.Clean = true, true, e.Clean
			return run, nil
		case events.RunAdopted:
			// Another node ended the run after this node's lease expired.
			run.Started, run.Stopped = true, true
			return run, nil
		case events.GatewayStarted:
			run.Started = true
			return run, nil
		}
	}
	run.Started = len(last) > 0
	return run, nil
}

// RecordGateway appends a gateway lifecycle event (start, interrupted run,
// drain, stop). Single instance per home is guaranteed by the gateway lock,
// and each node of a shared store has its own gateway stream, so the
// stream is appended at any version.
type RecordGateway struct {
	Event events.Event
	// CommandID makes a retry idempotent; empty: one derived from the
	// process, the clock and the event type.
	CommandID string
}

// RecordGateway appends a gateway lifecycle event and returns its position.
func (h *Handler) RecordGateway(ctx context.Context, c RecordGateway) (uint64, error) {
	return h.recordOn(ctx, h.gatewayStream(), c)
}

// recordOn appends c's event to stream at any version.
func (h *Handler) recordOn(ctx context.Context, stream string, c RecordGateway) (uint64, error) {
	e, commandID := c.Event, c.CommandID
	if commandID == "" {
		commandID = fmt.Sprintf("gateway/%d/%d/%s", os.Getpid(), h.now().UnixNano(), e.EventType())
	}
	res, err := h.store.Append(ctx, stream, events.AnyVersion(), []events.Proposed{{
		ID:       eventID(commandID, stream, 0),
		Event:    e,
		Metadata: events.Metadata{SchemaVersion: events.SchemaVersionOf(e.EventType()), Command: "record_gateway", CommandID: commandID, Node: h.node},
	}})
	if err != nil {
		return 0, fmt.Errorf("record %s: %w", e.EventType(), err)
	}
	return res.LastPosition(), nil
}

// InterruptTurn closes a lane's open turn that will never complete and
// marks the lane resume-pending with Reason (see domain.Lane.InterruptTurn).
type InterruptTurn struct {
	Key    string
	Reason string
	// TurnID, when set, closes only that turn: a lane whose open turn is
	// another (or none) is left as it is.
	TurnID string
	// AdoptedFrom names the dead node whose turn this node closes in its
	// place (the adoption rule); the events are recorded as command
	// adopt_turn.
	AdoptedFrom string
	CommandID   string
}

// InterruptTurn closes a lane's open turn as interrupted.
func (h *Handler) InterruptTurn(ctx context.Context, c InterruptTurn) (LaneResult, error) {
	command := "interrupt_turn"
	if c.AdoptedFrom != "" {
		command = "adopt_turn"
	}
	// The turn's transcript is fenced first: a message of the turn that
	// checked the lane before the interruption cannot land after it
	// (fence.go). A lane that moved to another session or turn after the
	// fence is fenced again.
	for range fenceAttempts {
		lane, _, err := h.Lane(ctx, c.Key)
		if err != nil && !isNotFound(err) {
			return LaneResult{}, fmt.Errorf("%s %s: %w", command, c.Key, err)
		}
		var f fence
		if lane.TurnOpen() && (c.TurnID == "" || lane.OpenTurnID == c.TurnID) {
			f = fence{sessionID: lane.SessionID, turnID: lane.OpenTurnID}
			if err := h.fenceTurn(ctx, f.sessionID, f.turnID); err != nil {
				return LaneResult{}, fmt.Errorf("%s %s: %w", command, c.Key, err)
			}
		}
		res, err := h.execute(ctx, c.Key, command, c.CommandID, func(l domain.Lane, now time.Time) ([]events.Event, error) {
			if c.TurnID != "" && l.OpenTurnID != c.TurnID {
				return nil, nil
			}
			if l.TurnOpen() && !f.covers(l) {
				return nil, errFenceMoved
			}
			return l.InterruptTurn(c.Reason, now)
		})
		if !errors.Is(err, errFenceMoved) {
			return res, err
		}
	}
	return LaneResult{}, fmt.Errorf("%s %s: %w", command, c.Key, ErrConflict)
}

var _ AutoPruneLog = (*Handler)(nil)

// autoPruneStream holds the runs of sessions.auto_prune: the gateway stream
// of a single node; with several nodes, where only the leader prunes, the
// leader lease stream, so a new leader knows when the last one pruned.
func (h *Handler) autoPruneStream() string {
	if h.node == "" {
		return h.gatewayStream()
	}
	return events.LeaderLease
}

// LastAutoPrune returns when sessions.auto_prune last ran, from the gateway
// stream (the leader lease stream with several nodes; the zero time if
// never).
func (h *Handler) LastAutoPrune(ctx context.Context) (time.Time, error) {
	var from uint64
	for {
		page, err := h.store.ReadStream(ctx, h.autoPruneStream(), from, readPage, events.Backwards)
		if isNotFound(err) {
			return time.Time{}, nil
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("read gateway stream: %w", err)
		}
		for _, env := range page {
			if e, ok := env.Event.(events.AutoPruneRan); ok {
				return e.At, nil
			}
		}
		if len(page) < readPage || page[len(page)-1].Version <= 1 {
			return time.Time{}, nil
		}
		from = page[len(page)-1].Version - 1
	}
}

// RecordAutoPrune records a run of sessions.auto_prune.
func (h *Handler) RecordAutoPrune(ctx context.Context, run AutoPruneRun) error {
	_, err := h.recordOn(ctx, h.autoPruneStream(), RecordGateway{
		Event:     events.AutoPruneRan{Pruned: run.Pruned, Vacuumed: run.Vacuumed, Error: run.Error, At: run.At},
		CommandID: "auto_prune/" + run.At.UTC().Format(time.RFC3339Nano),
	})
	return err
}
