package events

import "time"

// Persisted type names of a session's handoff to another platform
// (Hermes' request_handoff, claim_handoff, complete_handoff, fail_handoff):
// the CLI asks, the gateway's watcher claims it once and reports how it
// went. They are stored on the session's transcript stream.
const (
	TypeHandoffRequested = "transcript.handoff_requested.v1"
	TypeHandoffClaimed   = "transcript.handoff_claimed.v1"
	TypeHandoffCompleted = "transcript.handoff_completed.v1"
	TypeHandoffFailed    = "transcript.handoff_failed.v1"
)

// Handoff states, as Hermes stores them in sessions.handoff_state.
const (
	HandoffStatePending   = "pending"
	HandoffStateRunning   = "running"
	HandoffStateCompleted = "completed"
	HandoffStateFailed    = "failed"
)

// HandoffRequested records that the session is to be handed off to
// Platform (state pending).
type HandoffRequested struct {
	SessionID string    `json:"session_id"`
	Platform  string    `json:"platform"`
	At        time.Time `json:"at"`
}

// HandoffClaimed records that a gateway took the pending handoff (state
// running).
type HandoffClaimed struct {
	SessionID string    `json:"session_id"`
	At        time.Time `json:"at"`
}

// HandoffCompleted records that the handoff was delivered.
type HandoffCompleted struct {
	SessionID string    `json:"session_id"`
	At        time.Time `json:"at"`
}

// HandoffFailed records that the handoff failed, and why.
type HandoffFailed struct {
	SessionID string    `json:"session_id"`
	Error     string    `json:"error"`
	At        time.Time `json:"at"`
}

func (e HandoffRequested) EventType() string { return TypeHandoffRequested }
func (e HandoffClaimed) EventType() string   { return TypeHandoffClaimed }
func (e HandoffCompleted) EventType() string { return TypeHandoffCompleted }
func (e HandoffFailed) EventType() string    { return TypeHandoffFailed }

func (e HandoffRequested) OccurredAt() time.Time { return e.At }
func (e HandoffClaimed) OccurredAt() time.Time   { return e.At }
func (e HandoffCompleted) OccurredAt() time.Time { return e.At }
func (e HandoffFailed) OccurredAt() time.Time    { return e.At }

func (HandoffRequested) isEvent() {}
func (HandoffClaimed) isEvent()   {}
func (HandoffCompleted) isEvent() {}
func (HandoffFailed) isEvent()    {}
