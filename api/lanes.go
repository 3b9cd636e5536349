package api

import (
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/samber/lo"

	"hermes/commands"
	"hermes/events"
	"hermes/projections/sessions"
)

func (s *Server) laneRoutes(rt routes) {
	rt.post("/sessions/resolve", s.resolve)
	rt.get("/sessions", s.listSessions)
	rt.get("/sessions/{key}", withKey(s.getSession))
	rt.post("/sessions/{key}/touch", withKey(s.touch))
	rt.post("/sessions/{key}/turns/start", s.admitted(errDraining, withKey(s.startTurn)))
	rt.post("/sessions/{key}/turns", withKey(s.completeTurn))
	rt.post("/sessions/{key}/reset", withKey(s.reset))
	rt.post("/sessions/{key}/switch", withKey(s.switchSession))
	rt.post("/sessions/{key}/suspend", withKey(s.suspend))
	rt.post("/sessions/{key}/resume-pending", withKey(s.markResumePending))
	rt.delete("/sessions/{key}/resume-pending", withKey(s.clearResumePending))
	rt.put("/sessions/{key}/active-processes", withKey(s.setActiveProcesses))
	rt.post("/recovery/suspend-recently-active", s.suspendRecentlyActive)
	rt.get("/recovery/resumable", s.resumable)
	rt.post("/maintenance/prune-entries", s.pruneEntries)
}

type resolveResponse struct {
	Entry       Entry   `json:"entry"`
	Created     bool    `json:"created"`
	ResetReason *string `json:"reset_reason"`
}

func (s *Server) resolve(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[resolveRequest](r, false)
	if err != nil {
		return err
	}
	res, err := s.Commands.ResolveSession(r.Context(), req.command(commandID(r)))
	if err != nil {
		return err
	}
	s.wrote(res.Position)
	return respondResolved(w, resolveResponse{Entry: NewEntry(res.Lane, res.Version), Created: res.Created, ResetReason: nullable(res.ResetReason)})
}

type sessionsResponse struct {
	Sessions []Entry `json:"sessions"`
}

func newSessionsResponse(rows []sessions.Row) sessionsResponse {
	out := sessionsResponse{Sessions: lo.Map(rows, func(row sessions.Row, _ int) Entry { return NewEntry(row.Lane, row.Version) })}
	return out
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if q.Has("session_id") {
		id, err := textQuery(r, "session_id", maxPathParam)
		if err != nil {
			return err
		}
		row, err := s.lanes(r.Context()).BySessionID(r.Context(), id)
		if err != nil {
			return err
		}
		return respond(w, NewEntry(row.Lane, row.Version))
	}
	var since time.Time
	if q.Has("active_minutes") {
		n, err := intQuery(r, "active_minutes", -1, 0, math.MaxInt32)
		if err == nil && n < 0 {
			err = fmt.Errorf("%w: active_minutes is empty", errBadRequest)
		}
		if err != nil {
			return err
		}
		since = s.Commands.Now().Add(-time.Duration(n) * time.Minute)
	}
	rows, err := s.lanes(r.Context()).List(r.Context(), since)
	if err != nil {
		return err
	}
	if q.Has("expired") {
		if rows, err = s.expiredOnly(r, rows); err != nil {
			return err
		}
	}
	return respond(w, newSessionsResponse(rows))
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	row, err := s.lanes(r.Context()).Lane(r.Context(), string(key))
	if err != nil {
		return err
	}
	return respond(w, NewEntry(row.Lane, row.Version))
}

// laneDone records a lane command's append and answers the entry.
func (s *Server) laneDone(w http.ResponseWriter, res commands.LaneResult, err error) error {
	if err != nil {
		return err
	}
	s.wrote(res.Position)
	return respond(w, NewEntry(res.Lane, res.Version))
}

func (s *Server) touch(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	req, err := decode[touchRequest](r, true)
	if err != nil {
		return err
	}
	res, err := s.Commands.UpdateSession(r.Context(), commands.UpdateSession{
		Key: string(key), LastPromptTokens: req.LastPromptTokens, CommandID: commandID(r),
	})
	return s.laneDone(w, res, err)
}

func (s *Server) startTurn(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	req, err := decode[startTurnRequest](r, true)
	if err != nil {
		return err
	}
	c := commands.StartTurn{Key: string(key), TurnID: req.TurnID, CommandID: commandID(r)}
	if req.GatewayRun != nil {
		c.Gateway, c.RunID = req.GatewayRun.Gateway, req.GatewayRun.RunID
	}
	res, turn, err := s.Commands.StartTurn(r.Context(), c)
	if err != nil && req.GatewayRun != nil {
		return s.runEnded(r.Context(), err, *req.GatewayRun)
	}
	if err != nil {
		return err
	}
	s.wrote(res.Position)
	return respond(w, struct {
		TurnID string `json:"turn_id"`
		Entry  Entry  `json:"entry"`
	}{turn, NewEntry(res.Lane, res.Version)})
}

func (s *Server) completeTurn(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	req, err := decode[completeTurnRequest](r, true)
	if err != nil {
		return err
	}
	res, err := s.Commands.CompleteTurn(r.Context(), commands.CompleteTurn{Key: string(key), Outcome: req.outcome(), CommandID: commandID(r)})
	return s.laneDone(w, res, err)
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	req, err := decode[resetRequest](r, true)
	if err != nil {
		return err
	}
	res, err := s.Commands.ResetSession(r.Context(), commands.ResetSession{Key: string(key), DisplayName: req.DisplayName, CommandID: commandID(r)})
	return s.laneDone(w, res, err)
}

func (s *Server) switchSession(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	req, err := decode[switchRequest](r, false)
	if err != nil {
		return err
	}
	res, err := s.Commands.SwitchSession(r.Context(), commands.SwitchSession{Key: string(key), SessionID: req.SessionID, CommandID: commandID(r)})
	return s.laneDone(w, res, err)
}

func (s *Server) suspend(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	req, err := decode[suspendRequest](r, true)
	if err != nil {
		return err
	}
	if req.Reason == events.SuspendStuckLoop {
		return s.suspendStuckLoop(w, r, key)
	}
	res, err := s.Commands.SuspendSession(r.Context(), commands.SuspendSession{Key: string(key), Reason: events.SuspendStopCommand, CommandID: commandID(r)})
	return s.laneDone(w, res, err)
}

func (s *Server) markResumePending(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	req, err := decode[resumePendingRequest](r, true)
	if err != nil {
		return err
	}
	res, marked, err := s.Commands.MarkResumePending(r.Context(), commands.MarkResumePending{Key: string(key), Reason: req.reason(), CommandID: commandID(r)})
	if err != nil {
		return err
	}
	s.wrote(res.Position)
	return respond(w, struct {
		Marked bool  `json:"marked"`
		Entry  Entry `json:"entry"`
	}{marked, NewEntry(res.Lane, res.Version)})
}

func (s *Server) clearResumePending(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	if _, err := decode[emptyRequest](r, true); err != nil {
		return err
	}
	res, cleared, err := s.Commands.ClearResumePending(r.Context(), commands.ClearResumePending{Key: string(key), CommandID: commandID(r)})
	if err != nil {
		return err
	}
	s.wrote(res.Position)
	return respond(w, struct {
		Cleared bool  `json:"cleared"`
		Entry   Entry `json:"entry"`
	}{cleared, NewEntry(res.Lane, res.Version)})
}

func (s *Server) setActiveProcesses(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	req, err := decode[activeProcessesRequest](r, false)
	if err != nil {
		return err
	}
	res, err := s.Commands.SetActiveProcesses(r.Context(), commands.SetActiveProcesses{Key: string(key), Count: *req.Count, CommandID: commandID(r)})
	return s.laneDone(w, res, err)
}

func (s *Server) suspendRecentlyActive(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[suspendRecentRequest](r, true)
	if err != nil {
		return err
	}
	// The sweep lists the lanes from the read model.
	if err := s.fresh(r.Context()); err != nil {
		return err
	}
	marked, err := s.Commands.SuspendRecentlyActive(r.Context(), commands.SuspendRecentlyActive{
		MaxAge: time.Duration(req.maxAgeSeconds()) * time.Second, CommandID: commandID(r),
	})
	if err != nil {
		return err
	}
	s.afterSweep(r)
	return respond(w, struct {
		Marked []string `json:"marked"`
	}{nonNil(marked)})
}

func (s *Server) pruneEntries(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[pruneEntriesRequest](r, false)
	if err != nil {
		return err
	}
	if req.disabled() {
		return respond(w, struct {
			Pruned []string `json:"pruned"`
		}{[]string{}})
	}
	// The sweep lists the lanes from the read model.
	if err := s.fresh(r.Context()); err != nil {
		return err
	}
	pruned, err := s.Commands.PruneOldEntries(r.Context(), commands.PruneOldEntries{
		MaxAge: time.Duration(*req.MaxAgeDays) * 24 * time.Hour, CommandID: commandID(r),
	})
	if err != nil {
		return err
	}
	s.afterSweep(r)
	return respond(w, struct {
		Pruned []string `json:"pruned"`
	}{nonNil(pruned)})
}

// afterSweep makes the next query see a sweep's appends.
func (s *Server) afterSweep(r *http.Request) {
	if head, err := s.Store.Head(r.Context()); err == nil {
		s.wrote(head)
	}
}

func (s *Server) resumable(w http.ResponseWriter, r *http.Request) error {
	rows, err := s.lanes(r.Context()).Resumable(r.Context(), s.ResumeFreshness, s.Commands.Now())
	if err != nil {
		return err
	}
	return respond(w, newSessionsResponse(rows))
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
