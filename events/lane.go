package events

import "time"

// Persisted type names of the lane stream (one stream per session key). Never
// change one: a new shape is a new name plus an upcaster in codec.go.
const (
	TypeSessionCreated         = "lane.session_created.v1"
	TypeSessionAutoReset       = "lane.session_auto_reset.v1"
	TypeSessionReset           = "lane.session_reset.v1"
	TypeSessionSwitched        = "lane.session_switched.v1"
	TypeSuspendedV1            = "lane.suspended.v1"
	TypeSuspended              = "lane.suspended.v2"
	TypeResumeMarked           = "lane.resume_marked.v1"
	TypeResumeCleared          = "lane.resume_cleared.v1"
	TypeTouched                = "lane.touched.v1"
	TypeTurnStarted            = "lane.turn_started.v1"
	TypeTurnCompleted          = "lane.turn_completed.v1"
	TypeTurnInterrupted        = "lane.turn_interrupted.v1"
	TypeActiveProcessesChanged = "lane.active_processes_changed.v1"
	TypeActivityRecorded       = "lane.activity_recorded.v1"
	TypeExpiryFinalized        = "lane.expiry_finalized.v1"
	TypeEntryPruned            = "lane.entry_pruned.v1"
	TypeSessionCompressed      = "lane.session_compressed.v1"
	TypeFreshResetConsumed     = "lane.fresh_reset_consumed.v1"
)

// Auto-reset reasons, as stored in [SessionAutoReset.Reason].
const (
	AutoResetIdle                 = "idle"
	AutoResetDaily                = "daily"
	AutoResetSuspended            = "suspended"
	AutoResetResumePendingExpired = "resume_pending_expired"
)

// Resume reasons, as stored in [ResumeMarked.Reason].
const (
	ResumeRestartTimeout     = "restart_timeout"
	ResumeShutdownTimeout    = "shutdown_timeout"
	ResumeRestartInterrupted = "restart_interrupted"
)

// TurnSuperseded is the reason of a [TurnInterrupted] that closed a turn
// because another turn started on the lane while it was open: the turn
// will never complete, but no run ended under it (no resume mark, no
// stuck-loop count). Logs written before the busy rule (a turn start on a
// lane whose turn is open is refused) hold it; nothing writes it now.
const TurnSuperseded = "superseded"

// TurnDiscarded is the reason of a [TurnInterrupted] that closed a turn
// no gateway run holds without continuing it: after a gateway's clean
// stop (Hermes' discard_active_turn_markers), or a turn too old to resume
// at a gateway's start (recover_interrupted_turns). No resume mark, no
// stuck-loop count.
const TurnDiscarded = "discarded"

// Causes of a [FreshResetConsumed].
const (
	// FreshResetConsumedExplicitly: the gateway said it consumed the flag.
	FreshResetConsumedExplicitly = "explicit"
	// FreshResetConsumedByTurn: the first turn of the reset session
	// started (the first message after /new was handled).
	FreshResetConsumedByTurn = "turn_started"
)

// Suspension reasons, as stored in [Suspended.Reason].
const (
	SuspendStopCommand = "stop_command"
	SuspendStuckLoop   = "stuck_loop"
)

// Resume-cleared causes, as stored in [ResumeCleared.Cause].
const (
	ResumeClearedByTurn     = "turn_completed"
	ResumeClearedExplicitly = "explicit"
)

// SessionCreated records a new session incarnation on a lane that had none
// (first message, or the first after the entry was pruned), or one forced by
// force_new. PreviousSessionID is set when force_new replaced a live session.
type SessionCreated struct {
	SessionKey        string    `json:"session_key"`
	SessionID         string    `json:"session_id"`
	PreviousSessionID string    `json:"previous_session_id,omitempty"`
	ForceNew          bool      `json:"force_new"`
	Origin            Source    `json:"origin"`
	DisplayName       string    `json:"display_name,omitempty"`
	Platform          string    `json:"platform"`
	ChatType          string    `json:"chat_type"`
	At                time.Time `json:"at"`
}

// SessionAutoReset records that get-or-create replaced the lane's session
// because of Reason (idle, daily, suspended, resume_pending_expired).
// HadActivity says whether the replaced session had real activity (a
// completed turn or an appended message), which decides the user notice.
type SessionAutoReset struct {
	SessionKey        string    `json:"session_key"`
	SessionID         string    `json:"session_id"`
	PreviousSessionID string    `json:"previous_session_id"`
	Reason            string    `json:"reason"`
	HadActivity       bool      `json:"had_activity"`
	Origin            Source    `json:"origin"`
	DisplayName       string    `json:"display_name,omitempty"`
	Platform          string    `json:"platform"`
	ChatType          string    `json:"chat_type"`
	At                time.Time `json:"at"`
}

// SessionReset records an explicit /new or /reset: a fresh session on the
// same lane, keeping its origin.
type SessionReset struct {
	SessionID         string    `json:"session_id"`
	PreviousSessionID string    `json:"previous_session_id"`
	DisplayName       string    `json:"display_name,omitempty"`
	At                time.Time `json:"at"`
}

// SessionSwitched records /resume: the lane now points at an existing
// session id.
type SessionSwitched struct {
	SessionID         string    `json:"session_id"`
	PreviousSessionID string    `json:"previous_session_id"`
	At                time.Time `json:"at"`
}

// Suspended records a hard wipe signal: the next get-or-create starts a new
// session whatever else is pending. Reason is stop_command (/stop) or
// stuck_loop (3 consecutive interrupted restarts).
type Suspended struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// SuspendedV1 is the first stored shape of a suspension, written before
// stuck-loop suspensions existed: it has no reason. It is read through the
// upcaster in codec.go and never written.
type SuspendedV1 struct {
	At time.Time `json:"at"`
}

// ResumeMarked records that the lane's session must be preserved on the next
// access because a turn was interrupted by a restart, shutdown or crash.
type ResumeMarked struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// ResumeCleared records that a resume-pending mark was removed, after a
// successful turn or on request.
type ResumeCleared struct {
	Cause string    `json:"cause"`
	At    time.Time `json:"at"`
}

// Touched records activity that keeps the session (get-or-create with no
// reset, or update_session). LastPromptTokens is set only when reported.
type Touched struct {
	LastPromptTokens *int64    `json:"last_prompt_tokens,omitempty"`
	At               time.Time `json:"at"`
}

// TurnStarted records that the agent began a turn on the lane.
type TurnStarted struct {
	TurnID    string    `json:"turn_id"`
	SessionID string    `json:"session_id"`
	At        time.Time `json:"at"`
}

// TurnCompleted records the end of a turn with its token and cost deltas.
// A failed turn counts its tokens but does not clear a resume-pending mark.
type TurnCompleted struct {
	TurnID           string    `json:"turn_id"`
	SessionID        string    `json:"session_id"`
	InputTokens      int64     `json:"input_tokens"`
	OutputTokens     int64     `json:"output_tokens"`
	CacheReadTokens  int64     `json:"cache_read_tokens"`
	CacheWriteTokens int64     `json:"cache_write_tokens"`
	EstimatedCostUSD float64   `json:"estimated_cost_usd"`
	CostStatus       string    `json:"cost_status,omitempty"`
	LastPromptTokens *int64    `json:"last_prompt_tokens,omitempty"`
	Failed           bool      `json:"failed"`
	At               time.Time `json:"at"`
}

// TurnInterrupted records that the lane's open turn will never complete:
// the process crashed under it (restart_interrupted), a drain timed out
// (shutdown_timeout, restart_timeout), or, in logs of older builds,
// another turn started over it ([TurnSuperseded]).
type TurnInterrupted struct {
	TurnID string    `json:"turn_id"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// ActiveProcessesChanged records the number of live background processes on
// the lane. A lane with live processes is never reset, expired or pruned.
type ActiveProcessesChanged struct {
	Count int       `json:"count"`
	At    time.Time `json:"at"`
}

// ActivityRecorded records the first real activity (a message appended to
// the transcript) of the lane's current session, so that a later auto-reset
// knows the session was not empty.
type ActivityRecorded struct {
	SessionID string    `json:"session_id"`
	At        time.Time `json:"at"`
}

// ExpiryFinalized records that the expiry watcher finalized the lane's
// expired session (hooks ran, or gave up after repeated failures: Forced).
type ExpiryFinalized struct {
	SessionID string    `json:"session_id"`
	Forced    bool      `json:"forced"`
	At        time.Time `json:"at"`
}

// EntryPruned records that the lane's routing entry was dropped for age. The
// transcript stays; the next message creates a fresh session.
type EntryPruned struct {
	SessionID string    `json:"session_id"`
	At        time.Time `json:"at"`
}

// SessionCompressed records that context compression moved the lane to a
// continuation session (Hermes sets entry.session_id and saves): SessionID
// descends from PreviousSessionID through the transcripts' parent links.
// Unlike a switch, the entry keeps everything else (token sums, flags, its
// creation time, an open turn).
type SessionCompressed struct {
	SessionID         string    `json:"session_id"`
	PreviousSessionID string    `json:"previous_session_id"`
	At                time.Time `json:"at"`
}

// FreshResetConsumed records that the is_fresh_reset flag of the lane's
// session (set by /new or /reset) was consumed: the first message of the
// new session was handled (Cause), so channel and topic skills are
// injected once.
type FreshResetConsumed struct {
	SessionID string    `json:"session_id"`
	Cause     string    `json:"cause"`
	At        time.Time `json:"at"`
}

func (e SessionCompressed) EventType() string      { return TypeSessionCompressed }
func (e FreshResetConsumed) EventType() string     { return TypeFreshResetConsumed }
func (e SessionCompressed) OccurredAt() time.Time  { return e.At }
func (e FreshResetConsumed) OccurredAt() time.Time { return e.At }
func (SessionCompressed) isEvent()                 {}
func (FreshResetConsumed) isEvent()                {}

func (e SessionCreated) EventType() string         { return TypeSessionCreated }
func (e SessionAutoReset) EventType() string       { return TypeSessionAutoReset }
func (e SessionReset) EventType() string           { return TypeSessionReset }
func (e SessionSwitched) EventType() string        { return TypeSessionSwitched }
func (e Suspended) EventType() string              { return TypeSuspended }
func (e ResumeMarked) EventType() string           { return TypeResumeMarked }
func (e ResumeCleared) EventType() string          { return TypeResumeCleared }
func (e Touched) EventType() string                { return TypeTouched }
func (e TurnStarted) EventType() string            { return TypeTurnStarted }
func (e TurnCompleted) EventType() string          { return TypeTurnCompleted }
func (e TurnInterrupted) EventType() string        { return TypeTurnInterrupted }
func (e ActiveProcessesChanged) EventType() string { return TypeActiveProcessesChanged }
func (e ActivityRecorded) EventType() string       { return TypeActivityRecorded }
func (e ExpiryFinalized) EventType() string        { return TypeExpiryFinalized }
func (e EntryPruned) EventType() string            { return TypeEntryPruned }

func (e SessionCreated) OccurredAt() time.Time         { return e.At }
func (e SessionAutoReset) OccurredAt() time.Time       { return e.At }
func (e SessionReset) OccurredAt() time.Time           { return e.At }
func (e SessionSwitched) OccurredAt() time.Time        { return e.At }
func (e Suspended) OccurredAt() time.Time              { return e.At }
func (e ResumeMarked) OccurredAt() time.Time           { return e.At }
func (e ResumeCleared) OccurredAt() time.Time          { return e.At }
func (e Touched) OccurredAt() time.Time                { return e.At }
func (e TurnStarted) OccurredAt() time.Time            { return e.At }
func (e TurnCompleted) OccurredAt() time.Time          { return e.At }
func (e TurnInterrupted) OccurredAt() time.Time        { return e.At }
func (e ActiveProcessesChanged) OccurredAt() time.Time { return e.At }
func (e ActivityRecorded) OccurredAt() time.Time       { return e.At }
func (e ExpiryFinalized) OccurredAt() time.Time        { return e.At }
func (e EntryPruned) OccurredAt() time.Time            { return e.At }

func (SessionCreated) isEvent()         {}
func (SessionAutoReset) isEvent()       {}
func (SessionReset) isEvent()           {}
func (SessionSwitched) isEvent()        {}
func (Suspended) isEvent()              {}
func (ResumeMarked) isEvent()           {}
func (ResumeCleared) isEvent()          {}
func (Touched) isEvent()                {}
func (TurnStarted) isEvent()            {}
func (TurnCompleted) isEvent()          {}
func (TurnInterrupted) isEvent()        {}
func (ActiveProcessesChanged) isEvent() {}
func (ActivityRecorded) isEvent()       {}
func (ExpiryFinalized) isEvent()        {}
func (EntryPruned) isEvent()            {}
