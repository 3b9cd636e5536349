package domain

import (
	"fmt"

	"hermes/events"
)

// Summary says what an event is about, in a few words: the text `hermes
// events tail` prints and the timeline of the API and the web UI shows. An
// event it does not know is "".
func Summary(e events.Event) string {
	switch e := e.(type) {
	case events.SessionCreated:
		s := "new session " + e.SessionID
		if e.ForceNew {
			s += " (force_new, replacing " + e.PreviousSessionID + ")"
		} else if e.PreviousSessionID != "" {
			s += " (after the entry was pruned; previous " + e.PreviousSessionID + ")"
		}
		return s
	case events.SessionAutoReset:
		return fmt.Sprintf("auto-reset: %s — %s replaced %s (had activity: %t)", e.Reason, e.SessionID, e.PreviousSessionID, e.HadActivity)
	case events.SessionReset:
		return fmt.Sprintf("/new: %s replaced %s", e.SessionID, e.PreviousSessionID)
	case events.SessionSwitched:
		return fmt.Sprintf("/resume: now on %s (was %s)", e.SessionID, e.PreviousSessionID)
	case events.Suspended:
		return "suspended: " + e.Reason
	case events.ResumeMarked:
		return "resume pending: " + e.Reason
	case events.ResumeCleared:
		return "resume cleared: " + e.Cause
	case events.Touched:
		if e.LastPromptTokens != nil {
			return fmt.Sprintf("touched (last prompt %d tokens)", *e.LastPromptTokens)
		}
		return "touched"
	case events.TurnStarted:
		return "turn started " + e.TurnID
	case events.TurnCompleted:
		s := fmt.Sprintf("turn completed %s: +%d in, +%d out, $%.4f", e.TurnID, e.InputTokens, e.OutputTokens, e.EstimatedCostUSD)
		if e.Failed {
			s += " (failed)"
		}
		return s
	case events.ActiveProcessesChanged:
		return fmt.Sprintf("%d background processes", e.Count)
	case events.ActivityRecorded:
		return "first message of " + e.SessionID
	case events.ExpiryFinalized:
		if e.Forced {
			return "expiry finalized (forced after failed hooks)"
		}
		return "expiry finalized"
	case events.EntryPruned:
		return "entry pruned for age"
	case events.TurnInterrupted:
		return fmt.Sprintf("turn %s interrupted: %s", e.TurnID, e.Reason)
	case events.NoticeDelivered:
		return "reset notice delivered (" + e.Reason + ")"
	case events.QueueItemAdded:
		return fmt.Sprintf("queued %s %s → %s (%d bytes)", e.Kind, e.ItemID, e.Placement, len(e.Text))
	case events.QueueItemTaken:
		s := fmt.Sprintf("took %s %s from the %s", e.Kind, e.ItemID, e.From)
		if e.StagedItemID != "" {
			s += "; staged " + e.StagedItemID
		}
		return s
	case events.QueueCleared:
		return fmt.Sprintf("queue cleared: %d items (%s)", len(e.ItemIDs), e.Reason)
	case events.QueueItemsExpired:
		return fmt.Sprintf("%d queued items expired", len(e.ItemIDs))
	case events.SessionCompressed:
		return fmt.Sprintf("session compressed: %s → %s", e.PreviousSessionID, e.SessionID)
	case events.FreshResetConsumed:
		if e.Cause == events.FreshResetConsumedByTurn {
			return "fresh-reset flag consumed by the first turn of " + e.SessionID
		}
		return "fresh-reset flag consumed by the gateway (" + e.SessionID + ")"
	case events.GatewayRunStarted:
		s := fmt.Sprintf("gateway %s run %s started (pid %d", e.Gateway, e.RunID, e.PID)
		if e.Host != "" {
			s += " on " + e.Host
		}
		return s + fmt.Sprintf(", lease %ds)", e.LeaseSeconds)
	case events.GatewayRunStopped:
		if len(e.OpenLanes) == 0 {
			return "gateway run " + e.RunID + " stopped (drain completed)"
		}
		return fmt.Sprintf("gateway run %s stopped with %d turns cut", e.RunID, len(e.OpenLanes))
	case events.GatewayRunLost:
		why := "its lease expired at " + e.LeaseUntil.UTC().Format("2006-01-02 15:04:05")
		if e.Cause == events.RunLostRestarted {
			why = "the gateway started again without stopping it"
		}
		return fmt.Sprintf("gateway run %s lost (%s): %d turns cut", e.RunID, why, len(e.OpenLanes))
	case events.MetaSet:
		return fmt.Sprintf("meta %q set (%d bytes)", e.Key, len(e.Value))
	case events.SessionMetaSet:
		return fmt.Sprintf("meta %q set (%d bytes)", e.Key, len(e.Value))
	case events.HandoffRequested:
		return "handoff to " + e.Platform + " requested"
	case events.HandoffClaimed:
		return "handoff claimed"
	case events.HandoffCompleted:
		return "handoff completed"
	case events.HandoffFailed:
		return "handoff failed"
	case events.TopicModeEnabled:
		return "Telegram topic mode enabled"
	case events.TopicModeDisabled:
		if e.ClearBindings {
			return "Telegram topic mode disabled, bindings cleared"
		}
		return "Telegram topic mode disabled"
	case events.TopicBound:
		return fmt.Sprintf("topic %s bound to %s", e.ThreadID, e.SessionID)
	case events.TopicsErased:
		return fmt.Sprintf("person erased %s: topic users (%s%s)", e.ErasureID, e.Reason, requestedBy(e.RequestedBy))
	case events.MessageAppended:
		return fmt.Sprintf("%s message (%d bytes)", e.Message.Role, len(e.Message.Content))
	case events.TranscriptRewritten:
		return fmt.Sprintf("transcript rewritten (%d messages)", len(e.Messages))
	case events.TurnsRewound:
		return fmt.Sprintf("rewound %d turns to message %d", e.TurnsUndone, e.TargetMessageID)
	case events.TitleSet:
		return fmt.Sprintf("title %q", e.Title)
	case events.TranscriptEnded:
		return "ended: " + e.Reason
	case events.TranscriptDeleted:
		return "deleted: " + e.Reason
	case events.TranscriptErased:
		return fmt.Sprintf("erased %s (%s%s)", e.Scope, e.Reason, requestedBy(e.RequestedBy))
	case events.LaneErased:
		s := "person erased " + e.ErasureID + ": origins"
		if e.QueueTexts {
			s += ", queued texts"
		}
		return fmt.Sprintf("%s, %d transcripts (%s%s)", s, len(e.Transcripts), e.Reason, requestedBy(e.RequestedBy))
	case events.LaneImported:
		s := "imported from Hermes: session " + e.SessionID
		if e.Suspended {
			s += ", suspended"
		}
		if e.ResumePending {
			s += ", resume pending (" + e.ResumeReason + ")"
		}
		if e.RestartFailureCount > 0 {
			s += fmt.Sprintf(", %d interrupted restarts", e.RestartFailureCount)
		}
		return s
	case events.SessionImported:
		s := "imported from Hermes: session " + e.SessionID + " (" + e.Source
		if e.Title != nil {
			s += fmt.Sprintf(", title %q", *e.Title)
		}
		return s + ")"
	case events.ModelOverrideSet:
		if e.Override == nil {
			return "/model override cleared"
		}
		return fmt.Sprintf("/model override: %s (provider %q)", e.Override.Model, e.Override.Provider)
	case events.EntryMetadataSet:
		return fmt.Sprintf("entry metadata %q set (%d bytes)", e.Key, len(e.Value))
	case events.MessagesImported:
		if len(e.Messages) == 0 {
			return "imported from Hermes: no messages"
		}
		return fmt.Sprintf("imported from Hermes: %d messages (ids %d–%d)", len(e.Messages), e.Messages[0].ID, e.Messages[len(e.Messages)-1].ID)
	default:
		return ""
	}
}

// requestedBy is ", requested by who" for an erasure's summary, or nothing.
func requestedBy(who string) string {
	if who == "" {
		return ""
	}
	return ", requested by " + who
}
