package api

import (
	"encoding/json"
	"time"

	"hermes/domain"
	"hermes/events"
)

// timeFormat is RFC 3339 in UTC with microseconds, always present.
const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

// Timestamp renders a time as the API does (null for the zero time).
type Timestamp time.Time

// MarshalJSON implements json.Marshaler.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	tt := time.Time(t)
	if tt.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + tt.UTC().Format(timeFormat) + `"`), nil
}

// Entry is the API's SessionEntry: Hermes' fields plus what hermes adds
// (version, previous session, live processes, open turn, suspend reason).
type Entry struct {
	SessionKey         string    `json:"session_key"`
	SessionID          string    `json:"session_id"`
	CreatedAt          Timestamp `json:"created_at"`
	UpdatedAt          Timestamp `json:"updated_at"`
	Origin             Source    `json:"origin"`
	DisplayName        *string   `json:"display_name"`
	Platform           string    `json:"platform"`
	ChatType           string    `json:"chat_type"`
	InputTokens        int64     `json:"input_tokens"`
	OutputTokens       int64     `json:"output_tokens"`
	CacheReadTokens    int64     `json:"cache_read_tokens"`
	CacheWriteTokens   int64     `json:"cache_write_tokens"`
	TotalTokens        int64     `json:"total_tokens"`
	EstimatedCostUSD   float64   `json:"estimated_cost_usd"`
	CostStatus         string    `json:"cost_status"`
	LastPromptTokens   int64     `json:"last_prompt_tokens"`
	WasAutoReset       bool      `json:"was_auto_reset"`
	AutoResetReason    *string   `json:"auto_reset_reason"`
	ResetHadActivity   bool      `json:"reset_had_activity"`
	IsFreshReset       bool      `json:"is_fresh_reset"`
	ExpiryFinalized    bool      `json:"expiry_finalized"`
	Suspended          bool      `json:"suspended"`
	ResumePending      bool      `json:"resume_pending"`
	ResumeReason       *string   `json:"resume_reason"`
	LastResumeMarkedAt Timestamp `json:"last_resume_marked_at"`
	Version            uint64    `json:"version"`

	PreviousSessionID *string   `json:"previous_session_id"`
	SuspendReason     *string   `json:"suspend_reason"`
	ActiveProcesses   int       `json:"active_processes"`
	OpenTurnID        *string   `json:"open_turn_id"`
	TurnStartedAt     Timestamp `json:"turn_started_at"`
	HadActivity       bool      `json:"had_activity"`
	// ModelOverride and Metadata are the session's entry state (Hermes'
	// SessionEntry.model_override and .metadata, since d7f5acb9).
	ModelOverride *modelOverrideJSON         `json:"model_override"`
	Metadata      map[string]json.RawMessage `json:"metadata"`
}

// Source is a lane's origin as the API answers it (Hermes'
// SessionSource), mapped field by field from the domain's.
type Source struct {
	Platform  string `json:"platform"`
	ChatID    string `json:"chat_id"`
	ChatName  string `json:"chat_name,omitempty"`
	ChatType  string `json:"chat_type"`
	UserID    string `json:"user_id,omitempty"`
	UserName  string `json:"user_name,omitempty"`
	ThreadID  string `json:"thread_id,omitempty"`
	ChatTopic string `json:"chat_topic,omitempty"`
	UserIDAlt string `json:"user_id_alt,omitempty"`
	ChatIDAlt string `json:"chat_id_alt,omitempty"`
	IsBot     bool   `json:"is_bot"`
	// ScopeID and GuildID are the one scope under both of Hermes' names
	// (scope_id, and guild_id its alias), as Hermes writes it.
	ScopeID        string `json:"scope_id,omitempty"`
	GuildID        string `json:"guild_id,omitempty"`
	ParentChatID   string `json:"parent_chat_id,omitempty"`
	MessageID      string `json:"message_id,omitempty"`
	RoleAuthorized bool   `json:"role_authorized"`
	Profile        string `json:"profile,omitempty"`
	// AutoThreadCreated is written only when true, as Hermes does.
	AutoThreadCreated     bool   `json:"auto_thread_created,omitempty"`
	AutoThreadInitialName string `json:"auto_thread_initial_name,omitempty"`
	ProspectiveThreadID   string `json:"prospective_thread_id,omitempty"`
}

func newSource(s domain.SessionSource) Source {
	return Source{
		Platform: s.Platform, ChatID: s.ChatID, ChatName: s.ChatName, ChatType: s.ChatType,
		UserID: s.UserID, UserName: s.UserName, ThreadID: s.ThreadID, ChatTopic: s.ChatTopic,
		UserIDAlt: s.UserIDAlt, ChatIDAlt: s.ChatIDAlt, IsBot: s.IsBot, ScopeID: s.GuildID, GuildID: s.GuildID,
		ParentChatID: s.ParentChatID, MessageID: s.MessageID, RoleAuthorized: s.RoleAuthorized,
		Profile: s.Profile, AutoThreadCreated: s.AutoThreadCreated, AutoThreadInitialName: s.AutoThreadInitialName,
		ProspectiveThreadID: s.ProspectiveThreadID,
	}
}

// NewEntry renders a lane at a stream version.
func NewEntry(l domain.Lane, version uint64) Entry {
	return Entry{
		SessionKey:         l.SessionKey,
		SessionID:          l.SessionID,
		CreatedAt:          Timestamp(l.CreatedAt),
		UpdatedAt:          Timestamp(l.UpdatedAt),
		Origin:             newSource(l.Origin),
		DisplayName:        nullable(l.DisplayName),
		Platform:           l.Platform,
		ChatType:           l.ChatType,
		InputTokens:        l.InputTokens,
		OutputTokens:       l.OutputTokens,
		CacheReadTokens:    l.CacheReadTokens,
		CacheWriteTokens:   l.CacheWriteTokens,
		TotalTokens:        l.TotalTokens,
		EstimatedCostUSD:   l.EstimatedCostUSD,
		CostStatus:         l.CostStatus,
		LastPromptTokens:   l.LastPromptTokens,
		WasAutoReset:       l.WasAutoReset,
		AutoResetReason:    nullable(l.AutoResetReason),
		ResetHadActivity:   l.ResetHadActivity,
		IsFreshReset:       l.IsFreshReset,
		ExpiryFinalized:    l.ExpiryFinalized,
		Suspended:          l.Suspended,
		ResumePending:      l.ResumePending,
		ResumeReason:       nullable(l.ResumeReason),
		LastResumeMarkedAt: Timestamp(l.LastResumeMarkedAt),
		Version:            version,
		PreviousSessionID:  nullable(l.PreviousSessionID),
		SuspendReason:      nullable(l.SuspendReason),
		ActiveProcesses:    l.ActiveProcesses,
		OpenTurnID:         nullable(l.OpenTurnID),
		TurnStartedAt:      Timestamp(l.TurnStartedAt),
		HadActivity:        l.HadActivity,
		ModelOverride:      newModelOverrideAnswer(l).ModelOverride,
		Metadata:           newEntryMetadataAnswer(l).Metadata,
	}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Envelope is the API's event envelope.
type Envelope struct {
	Stream        string          `json:"stream"`
	Version       uint64          `json:"version"`
	Position      uint64          `json:"position"`
	ID            string          `json:"id"`
	Type          string          `json:"type"`
	SchemaVersion int             `json:"schema_version"`
	Time          Timestamp       `json:"time"`
	Data          events.Event    `json:"data"`
	Metadata      events.Metadata `json:"metadata"`
}

// NewEnvelope renders a stored event.
func NewEnvelope(env events.Envelope) Envelope {
	return Envelope{
		Stream:        env.Stream,
		Version:       env.Version,
		Position:      env.Position,
		ID:            env.ID,
		Type:          env.Type,
		SchemaVersion: events.SchemaVersionOf(env.Type),
		Time:          Timestamp(env.RecordedAt),
		Data:          env.Event,
		Metadata:      env.Metadata,
	}
}
