package api

import (
	"net/http"
	"time"

	"hermes/projections"
)

// Rebuilder rebuilds the read models while they serve (blue/green): new
// files are built from the log beside the ones in use, caught up, and
// swapped in.
type Rebuilder interface {
	// StartRebuild starts a rebuild in the background and returns its
	// first status. It fails with projections.ErrRebuildRunning while one
	// runs, and with an error wrapping events.ErrStorageFull when the disk
	// cannot hold the new files beside the old ones.
	StartRebuild() (projections.RebuildStatus, error)
	// RebuildStatus is the status of the last rebuild started.
	RebuildStatus() projections.RebuildStatus
}

// RebuildStatusResponse is the answer of the rebuild routes.
type RebuildStatusResponse struct {
	// Run numbers the rebuilds of this server process from 1; 0: none.
	Run int `json:"run"`
	// Phase: idle, building, catching_up, swapping, done or failed.
	Phase           string     `json:"phase"`
	Done            uint64     `json:"done"`
	Total           uint64     `json:"total"`
	EventsPerSecond float64    `json:"events_per_second"`
	ETASeconds      float64    `json:"eta_seconds"`
	StartedAt       *time.Time `json:"started_at"`
	FinishedAt      *time.Time `json:"finished_at"`
	Restarts        int        `json:"restarts"`
	Error           *string    `json:"error"`
}

func rebuildStatusResponse(st projections.RebuildStatus) RebuildStatusResponse {
	out := RebuildStatusResponse{
		Run: st.Run, Phase: string(st.Phase), Done: st.Done, Total: st.Total,
		EventsPerSecond: st.EventsPerSecond, ETASeconds: st.ETA.Seconds(), Restarts: st.Restarts,
	}
	if !st.StartedAt.IsZero() {
		out.StartedAt = &st.StartedAt
	}
	if !st.FinishedAt.IsZero() {
		out.FinishedAt = &st.FinishedAt
	}
	if st.Err != "" {
		out.Error = &st.Err
	}
	return out
}

func (s *Server) rebuildRoutes(rt routes) {
	if s.Rebuild == nil {
		return
	}
	// A control route: it appends nothing, and its own free-space check
	// answers insufficient_storage.
	rt.control("/projections/rebuild", s.startRebuild)
	rt.r.Get("/projections/rebuild", s.serve(s.rebuildStatus))
}

func (s *Server) startRebuild(w http.ResponseWriter, r *http.Request) error {
	if _, err := decode[emptyRequest](r, true); err != nil {
		return err
	}
	st, err := s.Rebuild.StartRebuild()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, rebuildStatusResponse(st))
	return nil
}

func (s *Server) rebuildStatus(w http.ResponseWriter, r *http.Request) error {
	return respond(w, rebuildStatusResponse(s.Rebuild.RebuildStatus()))
}
