package events

import "time"

// Persisted type names of Hermes' state_meta key/value store
// (SessionDB.get_meta/set_meta): a key about one session (it ends in
// ":<session id>", as /goal's "goal:<session id>") is stored on that
// session's transcript stream, so deleting or erasing the session erases
// it; any other key on [MetaStream].
const (
	TypeMetaSet        = "meta.set.v1"
	TypeSessionMetaSet = "transcript.meta_set.v1"
)

// MetaStream holds the state_meta values that belong to no session.
const MetaStream = "meta"

// MetaSet records set_meta(Key, Value) for a key of no session.
type MetaSet struct {
	Key   string    `json:"key"`
	Value string    `json:"value"`
	At    time.Time `json:"at"`
}

// SessionMetaSet records set_meta(Key, Value) for a key about SessionID,
// on that session's transcript stream.
type SessionMetaSet struct {
	SessionID string    `json:"session_id"`
	Key       string    `json:"key"`
	Value     string    `json:"value"`
	At        time.Time `json:"at"`
}

func (e MetaSet) EventType() string        { return TypeMetaSet }
func (e SessionMetaSet) EventType() string { return TypeSessionMetaSet }

func (e MetaSet) OccurredAt() time.Time        { return e.At }
func (e SessionMetaSet) OccurredAt() time.Time { return e.At }

func (MetaSet) isEvent()        {}
func (SessionMetaSet) isEvent() {}
