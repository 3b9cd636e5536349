package domain

import (
	"fmt"
	"slices"
	"time"

	"hermes/events"
)

// Exact texts of the turn notes (Hermes' build_resume_recovery_note and the
// pending-tool-output note).
const (
	recoveryNoteFormat = "[System note: The previous turn was interrupted by %s; the gateway is now back online. " +
		"Any restart/shutdown command in the history has already run — do NOT re-execute or verify it. %s %s]"

	guidanceNewMessage  = "Address the user's NEW message below FIRST and focus on what the user is asking now."
	guidanceInteractive = "Report to the user that the session was restored successfully and ask what they would like to do next."
	guidanceUnattended  = "No user is present on this non-interactive platform, so do NOT emit a 'session restored' acknowledgement or ask questions. Review the conversation history and CONTINUE the interrupted task to completion."
	tailSkipOldWork     = "Do NOT re-execute old tool calls — skip any unfinished work from the conversation history."
	tailResumeFirstGap  = "Do NOT re-run tool calls whose results already appear in the history — resume from the first step that has no recorded result."

	// PendingToolOutputNote goes before a new message when the transcript
	// ends on tool output of an interrupted turn.
	PendingToolOutputNote = "[System note: A new message has arrived. The conversation history contains pending tool outputs from an interrupted turn. IGNORE those pending results. Address the user's NEW message below FIRST. Do NOT re-execute old tool calls from the history.]"
)

// nonInteractivePlatforms are the event platforms where nobody answers a
// "session restored" message (Hermes adapters with interactive_resume =
// False).
var nonInteractivePlatforms = []string{"api_server", "webhook"}

// InteractivePlatform reports whether a user is present to answer on
// platform: false for the event platforms webhook and api_server.
func InteractivePlatform(platform string) bool {
	return !slices.Contains(nonInteractivePlatforms, platform)
}

// ResumeRecoveryNote is the note of a turn on a lane whose previous turn was
// interrupted by a restart, shutdown or crash (Hermes'
// build_resume_recovery_note). The phrase follows reason: "a gateway
// restart" (restart_timeout), "a gateway shutdown" (shutdown_timeout), "a
// gateway interruption" (anything else). The guidance follows the message:
// address a new message first; with no message (the startup auto-resume)
// report the restore and ask what next on an interactive platform, or
// continue the task to completion on a non-interactive one. A non-empty
// message follows the note after a blank line.
func ResumeRecoveryNote(reason, message string, interactive bool) string {
	note := recoveryNote(reason, message != "", interactive)
	if message != "" {
		note += "\n\n" + message
	}
	return note
}

// recoveryNote is the note of [ResumeRecoveryNote] without the message.
func recoveryNote(reason string, hasMessage, interactive bool) string {
	phrase := "a gateway interruption"
	switch reason {
	case events.ResumeRestartTimeout:
		phrase = "a gateway restart"
	case events.ResumeShutdownTimeout:
		phrase = "a gateway shutdown"
	}
	guidance, tail := guidanceNewMessage, tailSkipOldWork
	switch {
	case hasMessage:
	case interactive:
		guidance = guidanceInteractive
	default:
		guidance, tail = guidanceUnattended, tailResumeFirstGap
	}
	return fmt.Sprintf(recoveryNoteFormat, phrase, guidance, tail)
}

// TranscriptTail is what the turn notes need from the session's transcript:
// its last row that is replayed to the model (role neither session_meta nor
// system).
type TranscriptTail struct {
	// LastAt is that row's timestamp; zero when there is none or it is
	// unknown (which counts as fresh, as Hermes treats legacy transcripts).
	LastAt time.Time
	// LastRole is that row's role ("" when there is none).
	LastRole string
}

// FreshInterruption reports whether an interruption marked at ts is recent
// enough to act on at now: within window (the boundary is fresh); a window
// of 0 or less is always fresh, and so is an unknown (zero) time.
func FreshInterruption(ts time.Time, window time.Duration, now time.Time) bool {
	if window <= 0 || ts.IsZero() {
		return true
	}
	return now.Sub(ts) <= window
}

// TurnNote is the system note of the lane's next turn and the message as
// the agent receives it.
type TurnNote struct {
	// Note is the recovery note or the pending-tool-output note, "" when
	// the turn needs none.
	Note string
	// Message is the message with the note in front (the message alone
	// when there is no note).
	Message string
}

// TurnNote decides the note of the lane's next turn, whose message is
// message ("" for the startup auto-resume), as Hermes does before running
// the agent:
//
//   - the lane is resume-pending and either the transcript (tail.LastAt) or
//     the resume mark is fresh within window: the [ResumeRecoveryNote] for
//     the resume reason (restart_timeout when it has none), worded for
//     whether platform is interactive;
//   - otherwise, when the transcript is fresh and ends on tool output: the
//     [PendingToolOutputNote], then a blank line, then the message;
//   - otherwise no note.
func (l Lane) TurnNote(message string, tail TranscriptTail, window time.Duration, now time.Time) TurnNote {
	transcriptFresh := FreshInterruption(tail.LastAt, window, now)
	markFresh := l.ResumePending && FreshInterruption(l.LastResumeMarkedAt, window, now)
	switch {
	case l.ResumePending && (transcriptFresh || markFresh):
		reason := firstNonEmpty(l.ResumeReason, events.ResumeRestartTimeout)
		interactive := InteractivePlatform(l.Platform)
		return TurnNote{
			Note:    recoveryNote(reason, message != "", interactive),
			Message: ResumeRecoveryNote(reason, message, interactive),
		}
	case tail.LastRole == "tool" && transcriptFresh:
		return TurnNote{Note: PendingToolOutputNote, Message: PendingToolOutputNote + "\n\n" + message}
	}
	return TurnNote{Message: message}
}
