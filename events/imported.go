package events

import (
	"encoding/json"
	"math"
	"time"
)

// Persisted type names of the facts `hermes import` carries over from a
// Python Hermes home. They are written once per source fact, with ids
// derived from it, and never by a live command.
const (
	TypeLaneImported     = "lane.imported.v1"
	TypeSessionImported  = "transcript.session_imported.v1"
	TypeMessagesImported = "transcript.messages_imported.v1"
)

// LaneImported is the first event of a lane moved in from Hermes: the
// routing entry of sessions.json as it stood, field by field, with its
// original times, plus the lane's stuck-loop count from
// .restart_failure_counts. It replaces whatever state the lane had (a lane
// stream starts with it).
type LaneImported struct {
	SessionKey         string     `json:"session_key"`
	SessionID          string     `json:"session_id"`
	CreatedAt          time.Time  `json:"created_at"`
	UpdatedAt          time.Time  `json:"updated_at"`
	Origin             Source     `json:"origin"`
	DisplayName        string     `json:"display_name,omitempty"`
	Platform           string     `json:"platform"`
	ChatType           string     `json:"chat_type"`
	InputTokens        int64      `json:"input_tokens"`
	OutputTokens       int64      `json:"output_tokens"`
	CacheReadTokens    int64      `json:"cache_read_tokens"`
	CacheWriteTokens   int64      `json:"cache_write_tokens"`
	TotalTokens        int64      `json:"total_tokens"`
	LastPromptTokens   int64      `json:"last_prompt_tokens"`
	EstimatedCostUSD   float64    `json:"estimated_cost_usd"`
	CostStatus         string     `json:"cost_status"`
	ExpiryFinalized    bool       `json:"expiry_finalized"`
	Suspended          bool       `json:"suspended"`
	ResumePending      bool       `json:"resume_pending"`
	ResumeReason       string     `json:"resume_reason,omitempty"`
	LastResumeMarkedAt *time.Time `json:"last_resume_marked_at,omitempty"`
	IsFreshReset       bool       `json:"is_fresh_reset"`
	WasAutoReset       bool       `json:"was_auto_reset"`
	AutoResetReason    string     `json:"auto_reset_reason,omitempty"`
	ResetHadActivity   bool       `json:"reset_had_activity"`
	// HadActivity says whether the current session had real activity
	// (tokens counted or messages in state.db), which a later auto-reset
	// turns into reset_had_activity.
	HadActivity bool `json:"had_activity"`
	// RestartFailureCount is the lane's count in Hermes'
	// .restart_failure_counts (consecutive restarts that cut its turn).
	RestartFailureCount int `json:"restart_failure_count"`
	// Extra holds the entry's fields this build has no place for (later
	// Hermes versions), as Hermes wrote them: kept, not interpreted.
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// SessionImported is the first event of a transcript moved in from Hermes:
// its state.db sessions row, every column as stored (times are Hermes'
// float epoch seconds, kept exactly). The counters are Hermes' own; the
// messages that follow in [MessagesImported] do not add to them.
type SessionImported struct {
	SessionID        string   `json:"session_id"`
	Source           string   `json:"source"`
	UserID           *string  `json:"user_id,omitempty"`
	Model            *string  `json:"model,omitempty"`
	ModelConfig      *string  `json:"model_config,omitempty"`
	SystemPrompt     *string  `json:"system_prompt,omitempty"`
	ParentSessionID  *string  `json:"parent_session_id,omitempty"`
	StartedAt        float64  `json:"started_at"`
	EndedAt          *float64 `json:"ended_at,omitempty"`
	EndReason        *string  `json:"end_reason,omitempty"`
	MessageCount     int64    `json:"message_count"`
	ToolCallCount    int64    `json:"tool_call_count"`
	InputTokens      int64    `json:"input_tokens"`
	OutputTokens     int64    `json:"output_tokens"`
	CacheReadTokens  int64    `json:"cache_read_tokens"`
	CacheWriteTokens int64    `json:"cache_write_tokens"`
	ReasoningTokens  int64    `json:"reasoning_tokens"`
	BillingProvider  *string  `json:"billing_provider,omitempty"`
	BillingBaseURL   *string  `json:"billing_base_url,omitempty"`
	BillingMode      *string  `json:"billing_mode,omitempty"`
	EstimatedCostUSD *float64 `json:"estimated_cost_usd,omitempty"`
	ActualCostUSD    *float64 `json:"actual_cost_usd,omitempty"`
	CostStatus       *string  `json:"cost_status,omitempty"`
	CostSource       *string  `json:"cost_source,omitempty"`
	PricingVersion   *string  `json:"pricing_version,omitempty"`
	Title            *string  `json:"title,omitempty"`
	APICallCount     int64    `json:"api_call_count"`
	HandoffState     *string  `json:"handoff_state,omitempty"`
	HandoffPlatform  *string  `json:"handoff_platform,omitempty"`
	HandoffError     *string  `json:"handoff_error,omitempty"`
	RewindCount      int64    `json:"rewind_count"`
	// Extra holds columns of later Hermes versions this build has no
	// place for, by column name: kept, not interpreted.
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
	// At is StartedAt as a time.
	At time.Time `json:"at"`
}

// ImportedMessage is one state.db messages row as stored: its original
// id and timestamp, content as Hermes stored it (text, or "\x00json:"
// followed by JSON), the JSON columns as their stored text, and whether a
// rewind had hidden it (Active false).
type ImportedMessage struct {
	ID                  int64   `json:"id"`
	Role                string  `json:"role"`
	Content             *string `json:"content,omitempty"`
	ToolCallID          *string `json:"tool_call_id,omitempty"`
	ToolCalls           *string `json:"tool_calls,omitempty"`
	ToolName            *string `json:"tool_name,omitempty"`
	Timestamp           float64 `json:"timestamp"`
	TokenCount          *int64  `json:"token_count,omitempty"`
	FinishReason        *string `json:"finish_reason,omitempty"`
	Reasoning           *string `json:"reasoning,omitempty"`
	ReasoningContent    *string `json:"reasoning_content,omitempty"`
	ReasoningDetails    *string `json:"reasoning_details,omitempty"`
	CodexReasoningItems *string `json:"codex_reasoning_items,omitempty"`
	CodexMessageItems   *string `json:"codex_message_items,omitempty"`
	Active              bool    `json:"active"`
	// Extra holds columns of later Hermes versions, by column name.
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// MessagesImported carries consecutive messages of one imported
// transcript, in id order (a transcript's messages are split over as many
// of these as the event size allows).
type MessagesImported struct {
	SessionID string            `json:"session_id"`
	Messages  []ImportedMessage `json:"messages"`
	// At is the timestamp of the last message as a time.
	At time.Time `json:"at"`
}

func (e LaneImported) EventType() string     { return TypeLaneImported }
func (e SessionImported) EventType() string  { return TypeSessionImported }
func (e MessagesImported) EventType() string { return TypeMessagesImported }

// OccurredAt of an imported lane is its last update in Hermes.
func (e LaneImported) OccurredAt() time.Time { return e.UpdatedAt }

func (e SessionImported) OccurredAt() time.Time  { return e.At }
func (e MessagesImported) OccurredAt() time.Time { return e.At }

func (LaneImported) isEvent()     {}
func (SessionImported) isEvent()  {}
func (MessagesImported) isEvent() {}

// EpochTime is the time of Hermes' float epoch seconds (time.time()), to
// the microsecond it resolves; the zero time for NaN and infinities.
func EpochTime(sec float64) time.Time {
	if math.IsNaN(sec) || math.IsInf(sec, 0) {
		return time.Time{}
	}
	whole, frac := math.Modf(sec)
	return time.Unix(int64(whole), int64(math.Round(frac*1e6))*1e3).UTC()
}
