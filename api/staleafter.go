package api

import (
	"hermes/events"
	"hermes/projections/transcripts"
)

// StaleAfter reports whether the read models, until they apply e, would
// answer the append's own checks wrongly (projections.Runner.SetBarrier;
// appendCurrent): a session deleted or erased (transcripts.RemovesSessions)
// would still exist, and a session moved to another lane
// (lane.session_switched) would still be found on its old one, whose
// activity note would then be skipped. Every other event only adds what
// a lookup that misses waits for (transcriptIndex).
func StaleAfter(e events.Event) bool {
	if transcripts.RemovesSessions(e) {
		return true
	}
	_, ok := e.(events.SessionSwitched)
	return ok
}
