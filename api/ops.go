package api

import (
	"net/http"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is ready once recovery ran and the projections caught up, while
// the log is sound (damaged with the reason otherwise) and storage takes
// writes (storage_full with the reason otherwise), and no read model is
// being rebuilt after damage (healing with the reason otherwise).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.LogDamaged != nil {
		if err := s.LogDamaged(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "damaged", "reason": err.Error()})
			return
		}
	}
	if err := s.healing(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "healing", "reason": err.Error()})
		return
	}
	if err := s.StorageError(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "storage_full", "reason": err.Error()})
		return
	}
	if !s.ready.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting"})
		return
	}
	if s.Draining() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) restart(w http.ResponseWriter, r *http.Request) error {
	if _, err := decode[emptyRequest](r, true); err != nil {
		return err
	}
	if s.Restart == nil {
		return errUnavailable
	}
	s.Restart()
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "restarting"})
	return nil
}
