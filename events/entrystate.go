package events

import (
	"encoding/json"
	"time"
)

// Persisted type names of the per-session state a lane's entry keeps for
// the gateway (Hermes' SessionEntry.model_override and .metadata, since
// hermes-agent d7f5acb9). Never change one: a new shape is a new name plus
// an upcaster in codec.go.
const (
	TypeModelOverrideSet = "lane.model_override_set.v1"
	TypeEntryMetadataSet = "lane.entry_metadata_set.v1"
)

// ModelOverride is a session's /model choice as Hermes persists it: the
// non-secret keys only (credentials are never stored; Hermes resolves them
// again when it applies the override).
type ModelOverride struct {
	Model    string `json:"model,omitempty"`
	Provider string `json:"provider,omitempty"`
	BaseURL  string `json:"base_url,omitempty"`
}

// ModelOverrideSet records that the /model override of the lane's session
// SessionID was set, or cleared (Override nil). A new session on the lane
// starts without one.
type ModelOverrideSet struct {
	SessionID string         `json:"session_id"`
	Override  *ModelOverride `json:"override"`
	At        time.Time      `json:"at"`
}

// EntryMetadataSet records that the metadata value Key of the lane's
// session SessionID was set to Value (JSON; null is a value, as in Hermes).
// A new session on the lane starts with no metadata.
type EntryMetadataSet struct {
	SessionID string          `json:"session_id"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	At        time.Time       `json:"at"`
}

func (e ModelOverrideSet) EventType() string     { return TypeModelOverrideSet }
func (e EntryMetadataSet) EventType() string     { return TypeEntryMetadataSet }
func (e ModelOverrideSet) OccurredAt() time.Time { return e.At }
func (e EntryMetadataSet) OccurredAt() time.Time { return e.At }
func (ModelOverrideSet) isEvent()                {}
func (EntryMetadataSet) isEvent()                {}
