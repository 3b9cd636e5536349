package events

import (
	"context"
	"encoding/json"
	"time"
)

// Persisted type names of erasure (docs/ERASURE.md). An erasure event says
// what was erased, when, why and on whose request, never the erased content.
// Never change one: a new shape is a new name plus an upcaster in codec.go.
const (
	TypeTranscriptErased = "transcript.erased.v1"
	TypeLaneErased       = "lane.person_erased.v1"
	TypeErasureRequested = "erasure.requested.v1"
	TypeErasureCompleted = "erasure.completed.v1"
)

// ErasureStream holds the person erasures (requested, then completed).
const ErasureStream = "erasures"

// Scopes of a [TranscriptErased].
const (
	// EraseTranscript: every personal field of every earlier event of the
	// stream (after a delete or a prune: the session is gone).
	EraseTranscript = "transcript"
	// EraseMessages: the messages of the earlier events (after a clear: the
	// session, its title and metadata stay).
	EraseMessages = "messages"
)

// Reasons of an erasure, as stored in the erasure events.
const (
	ErasureOnRequest = "requested"
	ErasurePruned    = "pruned"
	ErasureRetention = "retention"
	ErasurePerson    = "person"
)

// IsErasureType reports whether events of the persisted type typ are
// [Erasure]s: a store that writes records without decoding every one
// (events.RecordStore) decodes only these. TestErasureTypes checks it
// against every type the codec knows.
func IsErasureType(typ string) bool {
	switch typ {
	case TypeTranscriptErased, TypeLaneErased, TypeErasureCompleted, TypeTopicsErased:
		return true
	}
	return false
}

// Erasure is an event that erases content of the events before it in its
// own stream. A store that implements [Eraser] rewrites those events, in
// the same transaction as the append of the erasure, to what Erase returns:
// the same event type, the same stream, version, position and id, with the
// personal fields emptied. Erase is pure and idempotent: it reports false
// for an event it leaves as it is (nothing personal, or already erased).
type Erasure interface {
	Event
	Erase(earlier Event) (Event, bool)
}

// Eraser is the optional part of a [Store] that can erase. Its Append
// honours every [Erasure] it appends: when Append returns, the content the
// erasure names is no longer readable from the log (the embedded and
// PostgreSQL stores rewrite the events in place; KurrentDB, which cannot,
// destroys the keys that sealed it: [PersonalClass]), and Purge makes it
// unreadable from every file of the store (page images kept by a
// write-ahead log, freed pages, a KurrentDB node's chunks after a
// scavenge); see docs/ERASURE.md.
type Eraser interface {
	// Purge removes the erased content from every file of the store: after
	// it returns nil, no byte of any file holds what an erasure appended
	// before the call erased. It is idempotent and safe to call at any time.
	Purge(ctx context.Context) error
}

// TranscriptErased records that the content of a transcript stream's earlier
// events was erased. It follows the transcript.deleted (EraseTranscript) or
// transcript.cleared (EraseMessages) event of the same append.
type TranscriptErased struct {
	SessionID string `json:"session_id"`
	Scope     string `json:"scope"`
	Reason    string `json:"reason"`
	// RequestedBy names who asked (an operator, "expiry watcher", …).
	RequestedBy string `json:"requested_by,omitempty"`
	// ErasureID links a person erasure (erasure.requested) to its parts.
	ErasureID string    `json:"erasure_id,omitempty"`
	At        time.Time `json:"at"`
}

// LaneErased records that a person was forgotten on a lane: the person
// fields of every earlier origin (user id, alt id, user name, chat name and
// topic, message id, display name, the first name of an auto-created
// thread) and every earlier entry metadata value are erased, and, when QueueTexts is set
// (the lane is keyed on the person), the texts and messages of every earlier
// queued item too. Transcripts lists the lane's transcripts erased with it.
// The lane's state machine is unchanged: items stay queued, only their
// content is gone.
type LaneErased struct {
	ErasureID  string `json:"erasure_id"`
	QueueTexts bool   `json:"queue_texts"`
	// Sessions are the sessions the lane's events created: their read-model
	// rows took the lane's origin, whose person fields go.
	Sessions []string `json:"sessions,omitempty"`
	// Transcripts are the sessions whose transcripts were erased with the
	// lane (each has its own transcript.erased).
	Transcripts []string  `json:"transcripts,omitempty"`
	Reason      string    `json:"reason"`
	RequestedBy string    `json:"requested_by,omitempty"`
	At          time.Time `json:"at"`
}

// ErasureRequested is the durable intent of a person erasure, on the
// [ErasureStream]: it is the only event that holds the person's ids, and
// the [ErasureCompleted] of the same ErasureID erases them.
type ErasureRequested struct {
	ErasureID   string    `json:"erasure_id"`
	Platform    string    `json:"platform"`
	UserID      string    `json:"user_id,omitempty"`
	UserIDAlt   string    `json:"user_id_alt,omitempty"`
	Reason      string    `json:"reason"`
	RequestedBy string    `json:"requested_by,omitempty"`
	At          time.Time `json:"at"`
}

// ErasureCompleted records what a person erasure erased. It erases the ids
// of its own [ErasureRequested].
type ErasureCompleted struct {
	ErasureID   string    `json:"erasure_id"`
	Lanes       int       `json:"lanes"`
	Transcripts int       `json:"transcripts"`
	QueuedItems int       `json:"queued_items"`
	Origins     int       `json:"origins"`
	At          time.Time `json:"at"`
}

func (e TranscriptErased) EventType() string { return TypeTranscriptErased }
func (e LaneErased) EventType() string       { return TypeLaneErased }
func (e ErasureRequested) EventType() string { return TypeErasureRequested }
func (e ErasureCompleted) EventType() string { return TypeErasureCompleted }

func (e TranscriptErased) OccurredAt() time.Time { return e.At }
func (e LaneErased) OccurredAt() time.Time       { return e.At }
func (e ErasureRequested) OccurredAt() time.Time { return e.At }
func (e ErasureCompleted) OccurredAt() time.Time { return e.At }

func (TranscriptErased) isEvent() {}
func (LaneErased) isEvent()       {}
func (ErasureRequested) isEvent() {}
func (ErasureCompleted) isEvent() {}

// Erase implements [Erasure].
func (x TranscriptErased) Erase(earlier Event) (Event, bool) {
	switch e := earlier.(type) {
	case MessageAppended:
		m, changed := eraseMessage(e.Message)
		e.Message = m
		return e, changed
	case TranscriptRewritten:
		changed := false
		msgs := make([]Message, len(e.Messages))
		for i, m := range e.Messages {
			var c bool
			msgs[i], c = eraseMessage(m)
			changed = changed || c
		}
		e.Messages = msgs
		return e, changed
	case MessagesImported:
		changed := false
		msgs := make([]ImportedMessage, len(e.Messages))
		for i, m := range e.Messages {
			var c bool
			msgs[i], c = eraseImportedMessage(m)
			changed = changed || c
		}
		e.Messages = msgs
		return e, changed
	}
	if x.Scope != EraseTranscript {
		return earlier, false
	}
	switch e := earlier.(type) {
	case TitleSet:
		if e.Title == "" {
			return e, false
		}
		e.Title = ""
		return e, true
	case SessionMetadataUpdated:
		changed := false
		for _, p := range []**string{&e.SystemPrompt, &e.ModelConfig} {
			if *p != nil && **p != "" {
				*p, changed = new(string), true
			}
		}
		return e, changed
	case SessionMetaSet:
		// A value about the session (a /goal's text) goes with it.
		if e.Value == "" {
			return e, false
		}
		e.Value = ""
		return e, true
	case HandoffFailed:
		if e.Error == "" {
			return e, false
		}
		e.Error = ""
		return e, true
	case SessionImported:
		changed := e.Extra != nil
		for _, p := range []**string{&e.SystemPrompt, &e.ModelConfig, &e.Title, &e.UserID, &e.HandoffError} {
			if *p != nil {
				*p, changed = nil, true
			}
		}
		e.Extra = nil
		return e, changed
	}
	return earlier, false
}

// Erase implements [Erasure].
func (x LaneErased) Erase(earlier Event) (Event, bool) {
	switch e := earlier.(type) {
	case SessionCreated:
		o, c := EraseOrigin(e.Origin)
		e.Origin = o
		c = c || e.DisplayName != ""
		e.DisplayName = ""
		return e, c
	case SessionAutoReset:
		o, c := EraseOrigin(e.Origin)
		e.Origin = o
		c = c || e.DisplayName != ""
		e.DisplayName = ""
		return e, c
	case SessionReset:
		c := e.DisplayName != ""
		e.DisplayName = ""
		return e, c
	case LaneImported:
		o, c := EraseOrigin(e.Origin)
		e.Origin = o
		c = c || e.DisplayName != "" || e.Extra != nil
		e.DisplayName, e.Extra = "", nil
		return e, c
	case EntryMetadataSet:
		// What a gateway keeps there is its own (a watermark, a thread's
		// context): it may name the person, so the value goes.
		c := string(e.Value) != "null"
		e.Value = json.RawMessage("null")
		return e, c
	case QueueItemAdded:
		if !x.QueueTexts {
			return e, false
		}
		c := e.Text != "" || e.Message != nil
		e.Text, e.Message = "", nil
		return e, c
	case QueueItemTaken:
		if !x.QueueTexts {
			return e, false
		}
		c := e.Text != "" || e.Message != nil
		e.Text, e.Message = "", nil
		return e, c
	}
	return earlier, false
}

// Erase implements [Erasure]: the ids of the request it completes.
func (x ErasureCompleted) Erase(earlier Event) (Event, bool) {
	e, ok := earlier.(ErasureRequested)
	if !ok || e.ErasureID != x.ErasureID || (e.UserID == "" && e.UserIDAlt == "") {
		return earlier, false
	}
	e.UserID, e.UserIDAlt = "", ""
	return e, true
}

// EraseOrigin drops the person fields of an origin and keeps what routes
// it (platform, chat id and type, thread, flags): the lane's key is built
// from those, and the lane must keep working.
func EraseOrigin(o Source) (Source, bool) {
	erased := o
	erased.UserID, erased.UserIDAlt, erased.UserName = "", "", ""
	erased.ChatName, erased.ChatTopic, erased.MessageID = "", "", ""
	// An auto-created thread's first name is cut from the person's message.
	erased.AutoThreadInitialName = ""
	return erased, erased != o
}

// eraseMessage keeps a message's role, ids, tool name, token count and
// finish reason (what the read model counts) and drops what was said.
func eraseMessage(m Message) (Message, bool) {
	erased := Message{
		Role:         m.Role,
		ToolCallID:   m.ToolCallID,
		ToolName:     m.ToolName,
		TokenCount:   m.TokenCount,
		FinishReason: m.FinishReason,
	}
	changed := len(m.Content) > 0 || len(m.ToolCalls) > 0 || m.Reasoning != nil || m.ReasoningContent != nil ||
		len(m.ReasoningDetails) > 0 || len(m.CodexReasoningItems) > 0 || len(m.CodexMessageItems) > 0
	return erased, changed
}

// eraseImportedMessage is eraseMessage for a message imported from Hermes:
// it keeps the row's id, role, time, ids, tool name, token count, finish
// reason and rewind flag, and drops what was said (and the columns of later
// Hermes versions kept in Extra, which may hold it too).
func eraseImportedMessage(m ImportedMessage) (ImportedMessage, bool) {
	erased := ImportedMessage{
		ID: m.ID, Role: m.Role, ToolCallID: m.ToolCallID, ToolName: m.ToolName, Timestamp: m.Timestamp,
		TokenCount: m.TokenCount, FinishReason: m.FinishReason, Active: m.Active,
	}
	changed := m.Content != nil || m.ToolCalls != nil || m.Reasoning != nil || m.ReasoningContent != nil ||
		m.ReasoningDetails != nil || m.CodexReasoningItems != nil || m.CodexMessageItems != nil || m.Extra != nil
	return erased, changed
}
