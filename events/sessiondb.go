package events

import "time"

// Persisted type names of the SessionDB commands added for the Python
// client ([C]): a session opened on its own (Hermes' create_session) and a
// session archived or unarchived.
const (
	TypeTranscriptOpened = "transcript.opened.v1"
	TypeArchivedSet      = "transcript.archived_set.v1"
)

// TranscriptOpened records a session created without a lane (Hermes'
// create_session and ensure_session: the CLI, cron jobs, subagents,
// compression continuations). As in Hermes the first write of a session
// row wins: opening a session that exists changes nothing.
type TranscriptOpened struct {
	SessionID       string    `json:"session_id"`
	Source          string    `json:"source"`
	UserID          *string   `json:"user_id,omitempty"`
	Model           *string   `json:"model,omitempty"`
	ModelConfig     *string   `json:"model_config,omitempty"`
	SystemPrompt    *string   `json:"system_prompt,omitempty"`
	ParentSessionID *string   `json:"parent_session_id,omitempty"`
	At              time.Time `json:"at"`
}

// ArchivedSet records that a session was archived (hidden from the default
// listings, messages kept) or unarchived. It applies to the session's whole
// compression chain, as Hermes' set_session_archived does.
type ArchivedSet struct {
	SessionID string    `json:"session_id"`
	Archived  bool      `json:"archived"`
	At        time.Time `json:"at"`
}

func (e TranscriptOpened) EventType() string { return TypeTranscriptOpened }
func (e ArchivedSet) EventType() string      { return TypeArchivedSet }

func (e TranscriptOpened) OccurredAt() time.Time { return e.At }
func (e ArchivedSet) OccurredAt() time.Time      { return e.At }

func (TranscriptOpened) isEvent() {}
func (ArchivedSet) isEvent()      {}
