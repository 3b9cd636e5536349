package events

import (
	"encoding/json"
	"time"
)

// Persisted type names of the transcript streams (one per session id).
const (
	TypeMessageAppended        = "transcript.message_appended.v1"
	TypeTranscriptRewritten    = "transcript.rewritten.v1"
	TypeTurnsRewound           = "transcript.rewound.v1"
	TypeTitleSet               = "transcript.title_set.v1"
	TypeSessionMetadataUpdated = "transcript.metadata_updated.v1"
	TypeTranscriptCleared      = "transcript.cleared.v1"
	TypeTranscriptDeleted      = "transcript.deleted.v1"
	TypeTranscriptEnded        = "transcript.ended.v1"
	TypeTranscriptReopened     = "transcript.reopened.v1"
	TypeTurnFenced             = "transcript.turn_fenced.v1"
)

// Reasons a transcript was deleted, as stored in [TranscriptDeleted.Reason].
const (
	DeleteRequested = "requested"
	DeletePruned    = "pruned"
)

// Message is one transcript message as the agent reported it, with Hermes'
// field names. Content, ToolCalls and the reasoning/codex item fields keep
// the JSON the agent sent (a string, a list of parts, an object, or null).
type Message struct {
	Role                string          `json:"role"`
	Content             json.RawMessage `json:"content,omitempty"`
	ToolCallID          string          `json:"tool_call_id,omitempty"`
	ToolCalls           json.RawMessage `json:"tool_calls,omitempty"`
	ToolName            string          `json:"tool_name,omitempty"`
	TokenCount          *int64          `json:"token_count,omitempty"`
	FinishReason        string          `json:"finish_reason,omitempty"`
	Reasoning           *string         `json:"reasoning,omitempty"`
	ReasoningContent    *string         `json:"reasoning_content,omitempty"`
	ReasoningDetails    json.RawMessage `json:"reasoning_details,omitempty"`
	CodexReasoningItems json.RawMessage `json:"codex_reasoning_items,omitempty"`
	CodexMessageItems   json.RawMessage `json:"codex_message_items,omitempty"`
}

// MessageAppended records a message added to a session's transcript.
type MessageAppended struct {
	SessionID string    `json:"session_id"`
	Message   Message   `json:"message"`
	At        time.Time `json:"at"`
}

// TranscriptRewritten records the full replacement of a transcript (/retry,
// /undo, /compress): every message is deleted and these take their place.
type TranscriptRewritten struct {
	SessionID string    `json:"session_id"`
	Messages  []Message `json:"messages"`
	At        time.Time `json:"at"`
}

// TurnsRewound records a soft rewind: every active message from
// TargetMessageID on (the user message TurnsUndone turns back) is hidden,
// kept for audit.
type TurnsRewound struct {
	SessionID       string    `json:"session_id"`
	TargetMessageID int64     `json:"target_message_id"`
	TurnsUndone     int       `json:"turns_undone"`
	At              time.Time `json:"at"`
}

// TitleSet records a session's (sanitised, unique) title; "" clears it.
type TitleSet struct {
	SessionID string    `json:"session_id"`
	Title     string    `json:"title"`
	At        time.Time `json:"at"`
}

// SessionMetadataUpdated records model, prompt, lineage and billing facts
// of a session. Nil fields were not reported. Token and call counts are
// increments.
type SessionMetadataUpdated struct {
	SessionID        string    `json:"session_id"`
	Model            *string   `json:"model,omitempty"`
	ModelConfig      *string   `json:"model_config,omitempty"`
	SystemPrompt     *string   `json:"system_prompt,omitempty"`
	ParentSessionID  *string   `json:"parent_session_id,omitempty"`
	BillingProvider  *string   `json:"billing_provider,omitempty"`
	BillingBaseURL   *string   `json:"billing_base_url,omitempty"`
	BillingMode      *string   `json:"billing_mode,omitempty"`
	InputTokens      int64     `json:"input_tokens,omitempty"`
	OutputTokens     int64     `json:"output_tokens,omitempty"`
	CacheReadTokens  int64     `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64     `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64     `json:"reasoning_tokens,omitempty"`
	EstimatedCostUSD *float64  `json:"estimated_cost_usd,omitempty"`
	ActualCostUSD    *float64  `json:"actual_cost_usd,omitempty"`
	CostStatus       *string   `json:"cost_status,omitempty"`
	CostSource       *string   `json:"cost_source,omitempty"`
	PricingVersion   *string   `json:"pricing_version,omitempty"`
	APICallCount     int64     `json:"api_call_count,omitempty"`
	At               time.Time `json:"at"`
}

// TranscriptCleared records that every message of a session was deleted
// (the session row stays).
type TranscriptCleared struct {
	SessionID string    `json:"session_id"`
	At        time.Time `json:"at"`
}

// TranscriptDeleted records that a session and its messages were deleted,
// on request or by pruning; its children lose their parent link.
type TranscriptDeleted struct {
	SessionID string    `json:"session_id"`
	Reason    string    `json:"reason"`
	At        time.Time `json:"at"`
}

// TranscriptEnded records that a session ended for Reason (the first reason
// wins). Lane resets and switches end sessions implicitly.
type TranscriptEnded struct {
	SessionID string    `json:"session_id"`
	Reason    string    `json:"reason"`
	At        time.Time `json:"at"`
}

// TranscriptReopened records that an ended session was reopened.
type TranscriptReopened struct {
	SessionID string    `json:"session_id"`
	At        time.Time `json:"at"`
}

// TurnFenced records, in the transcript of the session a turn runs on,
// that the turn is being closed: interrupted (its node's run was adopted,
// its gateway run ended, crash recovery) or, with several processes on
// the store, completed. From here on a message naming the turn is refused.
// It is written before the turn's lane.turn_interrupted (or
// turn_completed), so a message append that checked the lane before the
// close and appends after it finds the fence (its append carries the
// transcript version it read).
type TurnFenced struct {
	SessionID string    `json:"session_id"`
	TurnID    string    `json:"turn_id"`
	At        time.Time `json:"at"`
}

func (e MessageAppended) EventType() string        { return TypeMessageAppended }
func (e TurnFenced) EventType() string             { return TypeTurnFenced }
func (e TranscriptRewritten) EventType() string    { return TypeTranscriptRewritten }
func (e TurnsRewound) EventType() string           { return TypeTurnsRewound }
func (e TitleSet) EventType() string               { return TypeTitleSet }
func (e SessionMetadataUpdated) EventType() string { return TypeSessionMetadataUpdated }
func (e TranscriptCleared) EventType() string      { return TypeTranscriptCleared }
func (e TranscriptDeleted) EventType() string      { return TypeTranscriptDeleted }
func (e TranscriptEnded) EventType() string        { return TypeTranscriptEnded }
func (e TranscriptReopened) EventType() string     { return TypeTranscriptReopened }

func (e MessageAppended) OccurredAt() time.Time        { return e.At }
func (e TurnFenced) OccurredAt() time.Time             { return e.At }
func (e TranscriptRewritten) OccurredAt() time.Time    { return e.At }
func (e TurnsRewound) OccurredAt() time.Time           { return e.At }
func (e TitleSet) OccurredAt() time.Time               { return e.At }
func (e SessionMetadataUpdated) OccurredAt() time.Time { return e.At }
func (e TranscriptCleared) OccurredAt() time.Time      { return e.At }
func (e TranscriptDeleted) OccurredAt() time.Time      { return e.At }
func (e TranscriptEnded) OccurredAt() time.Time        { return e.At }
func (e TranscriptReopened) OccurredAt() time.Time     { return e.At }

func (MessageAppended) isEvent()        {}
func (TranscriptRewritten) isEvent()    {}
func (TurnsRewound) isEvent()           {}
func (TitleSet) isEvent()               {}
func (SessionMetadataUpdated) isEvent() {}
func (TranscriptCleared) isEvent()      {}
func (TranscriptDeleted) isEvent()      {}
func (TranscriptEnded) isEvent()        {}
func (TranscriptReopened) isEvent()     {}
func (TurnFenced) isEvent()             {}
