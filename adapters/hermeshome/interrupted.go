package hermeshome

import (
	"encoding/json"
	"time"

	"hermes/events"
)

// HygieneStreakKey names, in an imported lane's Extra, the lane's
// gateway_hygiene_state failure streak (consecutive failed session-hygiene
// compressions, schema v26).
const HygieneStreakKey = "hygiene_failure_streak"

// MarkInterruptedTurns gives each lane whose turn was in flight when Hermes
// stopped the recovery hermes gives a turn cut by a crash: resume pending
// with reason restart_interrupted, unless the lane is suspended (never
// re-armed) or resume-pending already (its more specific reason is kept).
// A turn was in flight when its entry kept an active-turn marker (turns
// maps session key → start) or when session_turn_leases still holds the
// lease of the lane's conversation (the lineage root of its session, as
// Hermes keys leases). The mark is dated when the turn started, so the
// import stays a function of the source, and a turn older than the
// freshness window resets on the next message (Hermes' own recovery
// ignores markers older than an hour). After a clean shutdown Hermes
// discards the markers, and so does the import. It returns how many
// lanes it marked.
func MarkInterruptedTurns(lanes []events.LaneImported, turns map[string]time.Time, leases []TurnLease, sessions []Session, cleanShutdown bool, rep *Report) int {
	if len(turns) == 0 && len(leases) == 0 {
		return 0
	}
	if cleanShutdown {
		rep.Add(Info, "interrupted turns", "%d active-turn markers and %d turn leases ignored: .clean_shutdown says Hermes stopped cleanly (it discards them then too)", len(turns), len(leases))
		return 0
	}
	parent := map[string]string{}
	endReason := map[string]string{}
	for _, s := range sessions {
		if s.Event.ParentSessionID != nil {
			parent[s.Event.SessionID] = *s.Event.ParentSessionID
		}
		if s.Event.EndReason != nil {
			endReason[s.Event.SessionID] = *s.Event.EndReason
		}
	}
	root := func(id string) string {
		seen := map[string]bool{id: true}
		for {
			p, ok := parent[id]
			if !ok || p == "" || seen[p] || endReason[p] != "compression" {
				return id
			}
			seen[p] = true
			id = p
		}
	}
	byConversation := map[string]TurnLease{}
	for _, l := range leases {
		byConversation[l.ConversationID] = l
	}
	used := map[string]bool{}
	marked := 0
	for i := range lanes {
		l := &lanes[i]
		where := "interrupted turn " + printable(l.SessionKey)
		started, how := time.Time{}, ""
		if t, ok := turns[l.SessionKey]; ok {
			started, how = t, "its entry's active-turn marker"
		}
		if lease, ok := byConversation[root(l.SessionID)]; ok {
			used[lease.ConversationID] = true
			if how == "" {
				started, how = events.EpochTime(lease.AcquiredAt), "the turn lease "+printable(lease.Holder)+" holds"
			}
		}
		switch {
		case how == "":
			continue
		case l.Suspended:
			rep.Add(Info, where, "in flight when Hermes stopped (%s), but the lane is suspended: not re-armed, as in Hermes", how)
			continue
		case l.ResumePending:
			if l.LastResumeMarkedAt == nil {
				l.LastResumeMarkedAt = &started
			}
			rep.Add(Info, where, "in flight when Hermes stopped (%s); already resume-pending (%s): kept", how, l.ResumeReason)
			continue
		}
		l.ResumePending = true
		l.ResumeReason = events.ResumeRestartInterrupted
		l.LastResumeMarkedAt = &started
		marked++
		rep.Add(Info, where, "in flight when Hermes stopped (%s, since %s): resume pending (restart_interrupted), as after a crash", how, started.Format(time.RFC3339))
	}
	for _, lease := range leases {
		if !used[lease.ConversationID] {
			rep.Add(Skipped, "state.db session_turn_leases "+printable(lease.ConversationID), "no lane routes to this conversation: lease not imported")
		}
	}
	return marked
}

// CarryHygieneStreaks keeps each lane's gateway_hygiene_state streak in
// its Extra under [HygieneStreakKey], as the restart counts are carried
// with the lane. hermes runs no session hygiene, so nothing acts on it;
// it stays in the log. It returns how many lanes carry one.
func CarryHygieneStreaks(lanes []events.LaneImported, streaks map[string]int, rep *Report) int {
	n := 0
	have := map[string]bool{}
	for i := range lanes {
		l := &lanes[i]
		have[l.SessionKey] = true
		s, ok := streaks[l.SessionKey]
		if !ok {
			continue
		}
		if l.Extra == nil {
			l.Extra = map[string]json.RawMessage{}
		}
		data, _ := json.Marshal(s)
		l.Extra[HygieneStreakKey] = data
		n++
	}
	for key := range streaks {
		if !have[key] {
			rep.Add(Skipped, "state.db gateway_hygiene_state "+printable(key), "no routing entry for this key: streak not imported")
		}
	}
	return n
}
