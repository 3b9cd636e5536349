package events

import "time"

// Persisted type names of the gateway stream (the process lifecycle).
const (
	TypeGatewayStarted = "gateway.started.v1"
	TypeRunInterrupted = "gateway.run_interrupted.v1"
	TypeDrainStarted   = "gateway.drain_started.v1"
	TypeDrainFinished  = "gateway.drain_finished.v1"
	TypeGatewayStopped = "gateway.stopped.v1"
	TypeMarkerHonoured = "gateway.clean_shutdown_marker_honoured.v1"
	TypeAutoPruneRan   = "gateway.auto_prune_ran.v1"
)

// GatewayStarted records a start of hermes serve on a home.
// PreviousRunClean says whether the run before it ended with a clean stop.
type GatewayStarted struct {
	PID              int       `json:"pid"`
	ProcessStartedAt time.Time `json:"process_started_at"`
	PreviousRunClean bool      `json:"previous_run_clean"`
	At               time.Time `json:"at"`
}

// RunInterrupted records, at the next start, that the previous run ended
// without a clean stop (a crash or SIGKILL), and which lanes had a turn open
// at that moment: each counts one interrupted restart, and every other
// lane's count is dropped (unless a finished drain already counted that
// run's end; see domain.RunEnds).
type RunInterrupted struct {
	OpenLanes []string  `json:"open_lanes"`
	At        time.Time `json:"at"`
}

// DrainStarted records that a graceful stop (or restart) began: no new turns
// are accepted; OpenLanes had a turn running.
type DrainStarted struct {
	Restart   bool      `json:"restart"`
	OpenLanes []string  `json:"open_lanes"`
	At        time.Time `json:"at"`
}

// DrainFinished records the end of the drain. OpenLanes still had a turn
// open when it ended (TimedOut): each counts one interrupted restart, and
// every other lane's count is dropped — all of them after a completed
// drain. TimedOut with no OpenLanes: the drain could not see the open turns.
type DrainFinished struct {
	TimedOut  bool      `json:"timed_out"`
	OpenLanes []string  `json:"open_lanes"`
	At        time.Time `json:"at"`
}

// GatewayStopped records the end of a run: Clean when the drain completed.
type GatewayStopped struct {
	Clean   bool      `json:"clean"`
	Restart bool      `json:"restart"`
	At      time.Time `json:"at"`
}

// MarkerHonoured records that a Hermes .clean_shutdown marker was found and
// consumed at start, standing in for a clean stop event.
type MarkerHonoured struct {
	At time.Time `json:"at"`
}

// AutoPruneRan records a run of sessions.auto_prune (ended transcripts
// older than the retention deleted, then VACUUM if any were), so the
// minimum interval between runs survives restarts and read-model rebuilds.
type AutoPruneRan struct {
	Pruned   int       `json:"pruned"`
	Vacuumed bool      `json:"vacuumed"`
	Error    string    `json:"error,omitempty"`
	At       time.Time `json:"at"`
}

func (e AutoPruneRan) EventType() string     { return TypeAutoPruneRan }
func (e AutoPruneRan) OccurredAt() time.Time { return e.At }
func (AutoPruneRan) isEvent()                {}

func (e GatewayStarted) EventType() string { return TypeGatewayStarted }
func (e RunInterrupted) EventType() string { return TypeRunInterrupted }
func (e DrainStarted) EventType() string   { return TypeDrainStarted }
func (e DrainFinished) EventType() string  { return TypeDrainFinished }
func (e GatewayStopped) EventType() string { return TypeGatewayStopped }
func (e MarkerHonoured) EventType() string { return TypeMarkerHonoured }

func (e GatewayStarted) OccurredAt() time.Time { return e.At }
func (e RunInterrupted) OccurredAt() time.Time { return e.At }
func (e DrainStarted) OccurredAt() time.Time   { return e.At }
func (e DrainFinished) OccurredAt() time.Time  { return e.At }
func (e GatewayStopped) OccurredAt() time.Time { return e.At }
func (e MarkerHonoured) OccurredAt() time.Time { return e.At }

func (GatewayStarted) isEvent() {}
func (RunInterrupted) isEvent() {}
func (DrainStarted) isEvent()   {}
func (DrainFinished) isEvent()  {}
func (GatewayStopped) isEvent() {}
func (MarkerHonoured) isEvent() {}
