package events

import (
	"strings"
	"time"
)

// Persisted type names of a gateway's runs: the Python gateway process
// (Hermes' GatewayRunner through the client) announcing each start and its
// clean stop, and hermes recording a run that died without a word. They are
// stored on the gateway's own stream, gatewayrun-<gateway>; its heartbeats
// are lease events there ([LeaseAcquired], [LeaseRenewed], the run id as
// holder).
const (
	TypeGatewayRunStarted = "gateway_run.started.v1"
	TypeGatewayRunStopped = "gateway_run.stopped.v1"
	TypeGatewayRunLost    = "gateway_run.lost.v1"
)

// GatewayRunPrefix starts the name of a gateway's run stream. It begins with
// [GatewayStream] (so stores that keep hermes' streams by prefix keep it)
// but is not a stream of a hermes node ([IsGatewayStream] is false).
const GatewayRunPrefix = "gatewayrun-"

// GatewayRunStream is the stream of the runs of the named gateway.
func GatewayRunStream(gateway string) string { return GatewayRunPrefix + gateway }

// GatewayOfRunStream returns the gateway of a run stream, and false for any
// other stream.
func GatewayOfRunStream(stream string) (string, bool) {
	return strings.CutPrefix(stream, GatewayRunPrefix)
}

// Causes of a [GatewayRunLost].
const (
	// RunLostRestarted: the gateway announced a new run while this one was
	// still open (it crashed and came back before its lease ran out).
	RunLostRestarted = "restarted"
	// RunLostLeaseExpired: the run sent no heartbeat for a whole lease by
	// hermes' clock.
	RunLostLeaseExpired = "lease_expired"
)

// GatewayRunStarted records that a gateway process announced a run: RunID
// names it (made by the gateway), PID and Host say where it runs, and its
// lease lasts LeaseSeconds from each heartbeat (the first until LeaseUntil).
type GatewayRunStarted struct {
	Gateway      string    `json:"gateway"`
	RunID        string    `json:"run_id"`
	PID          int       `json:"pid"`
	Host         string    `json:"host,omitempty"`
	LeaseSeconds int       `json:"lease_seconds"`
	LeaseUntil   time.Time `json:"lease_until"`
	At           time.Time `json:"at"`
}

// GatewayRunStopped records a run's announced stop, after the gateway's own
// drain: OpenLanes still had a turn of the run open, which the stop cut
// (each counts one interrupted restart); none means the drain completed.
type GatewayRunStopped struct {
	RunID     string    `json:"run_id"`
	Restart   bool      `json:"restart"`
	OpenLanes []string  `json:"open_lanes"`
	At        time.Time `json:"at"`
}

// GatewayRunLost records that a run ended without a stop (Cause: the
// gateway came back with a new run, or its lease expired at LeaseUntil):
// OpenLanes had a turn of the run open, closed as crash recovery closes
// one (lane.turn_interrupted, resume pending, restart_interrupted), each
// counting one interrupted restart.
type GatewayRunLost struct {
	RunID      string    `json:"run_id"`
	Cause      string    `json:"cause"`
	LeaseUntil time.Time `json:"lease_until"`
	OpenLanes  []string  `json:"open_lanes"`
	At         time.Time `json:"at"`
}

func (e GatewayRunStarted) EventType() string { return TypeGatewayRunStarted }
func (e GatewayRunStopped) EventType() string { return TypeGatewayRunStopped }
func (e GatewayRunLost) EventType() string    { return TypeGatewayRunLost }

func (e GatewayRunStarted) OccurredAt() time.Time { return e.At }
func (e GatewayRunStopped) OccurredAt() time.Time { return e.At }
func (e GatewayRunLost) OccurredAt() time.Time    { return e.At }

func (GatewayRunStarted) isEvent() {}
func (GatewayRunStopped) isEvent() {}
func (GatewayRunLost) isEvent()    {}

// GatewayRunTag is the [Metadata.GatewayRun] of a turn of run runID of
// gateway: "<gateway>/<run id>".
func GatewayRunTag(gateway, runID string) string { return gateway + "/" + runID }

// ParseGatewayRunTag splits a [Metadata.GatewayRun]; false for "" or a tag
// without its two parts.
func ParseGatewayRunTag(tag string) (gateway, runID string, ok bool) {
	gateway, runID, ok = strings.Cut(tag, "/")
	return gateway, runID, ok && gateway != "" && runID != ""
}
