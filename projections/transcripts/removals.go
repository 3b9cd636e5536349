package transcripts

import "hermes/events"

// RemovesSessions reports whether e deletes session rows (delete_session,
// an erasure): after one, a state.db behind the log may still hold a
// session that is gone (projections.Runner.SetBarrier).
func RemovesSessions(e events.Event) bool {
	if _, ok := e.(events.Erasure); ok {
		return true
	}
	_, ok := e.(events.TranscriptDeleted)
	return ok
}
