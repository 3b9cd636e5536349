package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"hermes/events"
)

// Bounds of a session's entry state. Hermes asks its callers to keep
// metadata "small and JSON-serializable"; hermes holds it to that.
const (
	// MaxModelOverrideField bounds each of model, provider and base_url.
	MaxModelOverrideField = 1024
	// MaxMetadataKey bounds a metadata key, in bytes.
	MaxMetadataKey = 200
	// MaxMetadataValue bounds one metadata value, as compact JSON.
	MaxMetadataValue = 16 << 10
	// MaxMetadataKeys bounds the keys of one session's metadata.
	MaxMetadataKeys = 64
)

// SetModelOverride persists (or, with nil or an override of empty fields,
// clears) the current session's /model override, as Hermes'
// set_model_override does. The same override again changes nothing.
func (l Lane) SetModelOverride(o *ModelOverride, now time.Time) ([]events.Event, error) {
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	if o != nil && *o == (ModelOverride{}) {
		o = nil
	}
	if o != nil {
		for _, f := range [...]struct{ name, v string }{{"model", o.Model}, {"provider", o.Provider}, {"base_url", o.BaseURL}} {
			if len(f.v) > MaxModelOverrideField || !utf8.ValidString(f.v) {
				return nil, fmt.Errorf("%w: model override %s is not valid UTF-8 of at most %d bytes", ErrInvalidArgument, f.name, MaxModelOverrideField)
			}
		}
	}
	switch {
	case o == nil && l.ModelOverride == nil:
		return nil, nil
	case o != nil && l.ModelOverride != nil && *o == *l.ModelOverride:
		return nil, nil
	}
	ev := events.ModelOverrideSet{SessionID: l.SessionID, At: now}
	if o != nil {
		ev.Override = &events.ModelOverride{Model: o.Model, Provider: o.Provider, BaseURL: o.BaseURL}
	}
	return []events.Event{ev}, nil
}

// SetEntryMetadata sets one value of the current session's metadata, as
// Hermes' set_session_metadata does (it does not count as activity: the
// lane's updated_at stays). value is JSON, stored compact; the same value
// again changes nothing.
func (l Lane) SetEntryMetadata(key string, value json.RawMessage, now time.Time) ([]events.Event, error) {
	if !l.Exists() {
		return nil, ErrLaneNotFound
	}
	if key == "" || len(key) > MaxMetadataKey || !utf8.ValidString(key) || bytes.IndexByte([]byte(key), 0) >= 0 {
		return nil, fmt.Errorf("%w: a metadata key is 1 to %d bytes of UTF-8 without NUL", ErrInvalidArgument, MaxMetadataKey)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, value); err != nil || len(value) == 0 {
		return nil, fmt.Errorf("%w: metadata value of %q is not JSON", ErrInvalidArgument, key)
	}
	if compact.Len() > MaxMetadataValue {
		return nil, fmt.Errorf("%w: metadata value of %q is %d bytes, more than %d", ErrInvalidArgument, key, compact.Len(), MaxMetadataValue)
	}
	old, found := l.MetadataValue(key)
	switch {
	case found && bytes.Equal(old, compact.Bytes()):
		return nil, nil
	case !found && len(l.Metadata) >= MaxMetadataKeys:
		return nil, fmt.Errorf("%w: the session's metadata holds %d keys already, the most it may", ErrInvalidArgument, MaxMetadataKeys)
	}
	return []events.Event{events.EntryMetadataSet{SessionID: l.SessionID, Key: key, Value: compact.Bytes(), At: now}}, nil
}
