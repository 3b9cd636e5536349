package domain

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"hermes/events"
)

// Lane is the state of one conversation lane (one session key): Hermes'
// SessionEntry plus what hermes tracks beyond it. It is a value folded from
// the lane's events by [Evolve]; the zero Lane is a lane with no history.
type Lane struct {
	SessionKey string
	SessionID  string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	Origin     SessionSource
	// DisplayName is the chat's display name (from the source's chat_name).
	DisplayName string
	Platform    string
	ChatType    string

	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	TotalTokens      int64
	EstimatedCostUSD float64
	CostStatus       string
	LastPromptTokens int64

	WasAutoReset       bool
	AutoResetReason    string
	ResetHadActivity   bool
	IsFreshReset       bool
	ExpiryFinalized    bool
	Suspended          bool
	SuspendReason      string
	ResumePending      bool
	ResumeReason       string
	LastResumeMarkedAt time.Time

	// PreviousSessionID is the session this one replaced (any reset or
	// switch): the link Hermes never stored (Hermes #12857).
	PreviousSessionID string
	// ActiveProcesses counts live background processes; a lane with any is
	// never reset, expired or pruned.
	ActiveProcesses int
	// OpenTurnID is the turn started and not yet completed, if any.
	OpenTurnID    string
	TurnStartedAt time.Time
	// HadActivity: the current session saw a completed turn or an appended
	// message. It becomes ResetHadActivity when the session is auto-reset.
	HadActivity bool
	// Pruned: the routing entry was dropped for age; the lane is as if it
	// had never been (the next message creates a fresh session).
	Pruned bool
	// Queue holds the messages waiting while the agent is busy. It belongs
	// to the lane, not the session: automatic resets and /resume keep it,
	// /new and /reset discard its overflow (see queue.go).
	Queue Queue
	// ModelOverride is the current session's /model override (Hermes'
	// SessionEntry.model_override), nil when none. Metadata is the current
	// session's small key/value state (SessionEntry.metadata), sorted by
	// key, nil when empty. Both belong to the session: any new session on
	// the lane starts without them; a compression split keeps them.
	ModelOverride *ModelOverride
	Metadata      []MetadataItem
}

// ModelOverride is a session's /model override: the non-secret keys Hermes
// persists (never credentials).
type ModelOverride struct {
	Model    string `json:"model,omitempty"`
	Provider string `json:"provider,omitempty"`
	BaseURL  string `json:"base_url,omitempty"`
}

// MetadataItem is one value of a session's entry metadata (JSON).
type MetadataItem struct {
	Key   string
	Value json.RawMessage
}

// MetadataValue is the value of key in the current session's metadata.
func (l Lane) MetadataValue(key string) (json.RawMessage, bool) {
	i, found := slices.BinarySearchFunc(l.Metadata, key, func(it MetadataItem, k string) int { return strings.Compare(it.Key, k) })
	if !found {
		return nil, false
	}
	return l.Metadata[i].Value, true
}

// Exists reports whether the lane has a live entry.
func (l Lane) Exists() bool { return l.SessionID != "" && !l.Pruned }

// TurnOpen reports whether a turn has started and not completed.
func (l Lane) TurnOpen() bool { return l.OpenTurnID != "" }

// Replay folds a lane's history into its state.
func Replay(history []events.Event) Lane {
	var l Lane
	for _, e := range history {
		l = Evolve(l, e)
	}
	return l
}

// Evolve applies one event to a lane. It is total: history is fact, so it
// validates nothing and never fails. Events of other streams leave the lane
// as it is.
func Evolve(l Lane, e events.Event) Lane {
	switch e := e.(type) {
	case events.SessionCreated:
		l = l.newIncarnation(e.SessionID, e.PreviousSessionID, e.At)
		l.SessionKey = e.SessionKey
		l.Origin = SessionSource(e.Origin)
		l.DisplayName = e.DisplayName
		l.Platform = e.Platform
		l.ChatType = e.ChatType
		if e.ForceNew {
			l.Queue = l.Queue.withoutOverflow()
		}
	case events.LaneImported:
		l = importedLane(l, e)
	case events.SessionAutoReset:
		l = l.newIncarnation(e.SessionID, e.PreviousSessionID, e.At)
		l.SessionKey = e.SessionKey
		l.Origin = SessionSource(e.Origin)
		l.DisplayName = e.DisplayName
		l.Platform = e.Platform
		l.ChatType = e.ChatType
		l.WasAutoReset = true
		l.AutoResetReason = e.Reason
		l.ResetHadActivity = e.HadActivity
	case events.SessionReset:
		display := l.DisplayName
		if e.DisplayName != "" {
			display = e.DisplayName
		}
		l = l.newIncarnation(e.SessionID, e.PreviousSessionID, e.At)
		l.DisplayName = display
		l.IsFreshReset = true
		l.Queue = l.Queue.withoutOverflow()
	case events.SessionSwitched:
		l = l.newIncarnation(e.SessionID, e.PreviousSessionID, e.At)
	case events.SessionCompressed:
		// The conversation goes on in its continuation: only the session
		// id moves (Hermes' entry.session_id = new, then save).
		l.SessionID = e.SessionID
	case events.FreshResetConsumed:
		if e.SessionID == l.SessionID {
			l.IsFreshReset = false
		}
	case events.Suspended:
		l.Suspended = true
		l.SuspendReason = e.Reason
	case events.ResumeMarked:
		l.ResumePending = true
		l.ResumeReason = e.Reason
		l.LastResumeMarkedAt = e.At
	case events.ResumeCleared:
		l.ResumePending = false
		l.ResumeReason = ""
		l.LastResumeMarkedAt = time.Time{}
	case events.Touched:
		l.UpdatedAt = e.At
		if e.LastPromptTokens != nil {
			l.LastPromptTokens = *e.LastPromptTokens
		}
	case events.TurnStarted:
		l.OpenTurnID = e.TurnID
		l.TurnStartedAt = e.At
		l.UpdatedAt = e.At
	case events.TurnCompleted:
		// Sums saturate and absurd values are left out (clamp.go).
		l, _ = l.addUsage(e)
		if e.CostStatus != "" {
			l.CostStatus = e.CostStatus
		}
		if e.LastPromptTokens != nil {
			l.LastPromptTokens = *e.LastPromptTokens
		}
		if e.TurnID == "" || e.TurnID == l.OpenTurnID {
			l.OpenTurnID = ""
			l.TurnStartedAt = time.Time{}
		}
		l.HadActivity = true
		l.UpdatedAt = e.At
	case events.TurnInterrupted:
		if e.TurnID == l.OpenTurnID {
			l.OpenTurnID = ""
			l.TurnStartedAt = time.Time{}
		}
	case events.ActiveProcessesChanged:
		l.ActiveProcesses = e.Count
	case events.ActivityRecorded:
		if e.SessionID == l.SessionID {
			l.HadActivity = true
		}
	case events.ExpiryFinalized:
		l.ExpiryFinalized = true
	case events.EntryPruned:
		l.Pruned = true
	case events.QueueItemAdded:
		l.Queue = l.Queue.added(e)
	case events.QueueItemTaken:
		l.Queue = l.Queue.taken(e)
	case events.QueueCleared:
		l.Queue = l.Queue.without(e.ItemIDs)
	case events.QueueItemsExpired:
		l.Queue = l.Queue.without(e.ItemIDs)
	case events.ModelOverrideSet:
		if e.SessionID == l.SessionID {
			l.ModelOverride = nil
			if e.Override != nil {
				l.ModelOverride = &ModelOverride{Model: e.Override.Model, Provider: e.Override.Provider, BaseURL: e.Override.BaseURL}
			}
		}
	case events.EntryMetadataSet:
		if e.SessionID == l.SessionID {
			l.Metadata = withMetadata(l.Metadata, e.Key, e.Value)
		}
	case events.LaneErased:
		// The person is forgotten; the lane keeps its state (docs/ERASURE.md).
		o, _ := events.EraseOrigin(events.Source(l.Origin))
		l.Origin = SessionSource(o)
		l.DisplayName = ""
		if l.Metadata != nil {
			erased := make([]MetadataItem, len(l.Metadata))
			for i, it := range l.Metadata {
				erased[i] = MetadataItem{Key: it.Key, Value: json.RawMessage("null")}
			}
			l.Metadata = erased
		}
		if e.QueueTexts {
			l.Queue = l.Queue.withoutContent()
		}
	case events.NoticeDelivered:
		// Hermes clears both flags once the message handler has read them;
		// a delivery recorded for an older session changes nothing.
		if e.SessionID == l.SessionID {
			l.WasAutoReset = false
			l.AutoResetReason = ""
		}
	}
	return l
}

// withMetadata is items (sorted by key) with key set to value, in a new
// slice: a folded lane may share its slice with an earlier value.
func withMetadata(items []MetadataItem, key string, value json.RawMessage) []MetadataItem {
	i, found := slices.BinarySearchFunc(items, key, func(it MetadataItem, k string) int { return strings.Compare(it.Key, k) })
	out := make([]MetadataItem, 0, len(items)+1)
	out = append(out, items[:i]...)
	out = append(out, MetadataItem{Key: key, Value: slices.Clone(value)})
	if found {
		i++
	}
	return append(out, items[i:]...)
}

// newIncarnation starts a fresh entry on the lane for sessionID: counters
// zeroed and flags at their defaults, keeping what belongs to the lane rather
// than the session (key, origin, live processes, an open turn).
func (l Lane) newIncarnation(sessionID, previous string, at time.Time) Lane {
	return Lane{
		SessionKey:        l.SessionKey,
		SessionID:         sessionID,
		CreatedAt:         at,
		UpdatedAt:         at,
		Origin:            l.Origin,
		DisplayName:       l.DisplayName,
		Platform:          l.Platform,
		ChatType:          l.ChatType,
		CostStatus:        CostStatusUnknown,
		PreviousSessionID: previous,
		ActiveProcesses:   l.ActiveProcesses,
		OpenTurnID:        l.OpenTurnID,
		TurnStartedAt:     l.TurnStartedAt,
		Queue:             l.Queue,
	}
}

// importedLane is the entry Hermes had for the lane, field by field. What
// hermes tracks beyond Hermes' entry keeps its lane-level value (live
// processes, an open turn, the queue), which on a fresh lane is none.
func importedLane(l Lane, e events.LaneImported) Lane {
	out := Lane{
		SessionKey:       e.SessionKey,
		SessionID:        e.SessionID,
		CreatedAt:        e.CreatedAt,
		UpdatedAt:        e.UpdatedAt,
		Origin:           SessionSource(e.Origin),
		DisplayName:      e.DisplayName,
		Platform:         e.Platform,
		ChatType:         e.ChatType,
		InputTokens:      e.InputTokens,
		OutputTokens:     e.OutputTokens,
		CacheReadTokens:  e.CacheReadTokens,
		CacheWriteTokens: e.CacheWriteTokens,
		TotalTokens:      e.TotalTokens,
		EstimatedCostUSD: e.EstimatedCostUSD,
		CostStatus:       e.CostStatus,
		LastPromptTokens: e.LastPromptTokens,
		WasAutoReset:     e.WasAutoReset,
		AutoResetReason:  e.AutoResetReason,
		ResetHadActivity: e.ResetHadActivity,
		IsFreshReset:     e.IsFreshReset,
		ExpiryFinalized:  e.ExpiryFinalized,
		Suspended:        e.Suspended,
		ResumePending:    e.ResumePending,
		ResumeReason:     e.ResumeReason,
		HadActivity:      e.HadActivity,
		ActiveProcesses:  l.ActiveProcesses,
		OpenTurnID:       l.OpenTurnID,
		TurnStartedAt:    l.TurnStartedAt,
		Queue:            l.Queue,
	}
	if e.LastResumeMarkedAt != nil {
		out.LastResumeMarkedAt = *e.LastResumeMarkedAt
	}
	return out
}

// CostStatusUnknown is the cost status of a session with no reported cost.
const CostStatusUnknown = "unknown"
