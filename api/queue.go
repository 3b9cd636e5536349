package api

import "github.com/go-chi/chi/v5"

// queueRoutes serves the per-lane message queue (issue [G]).
func (s *Server) queueRoutes(r chi.Router) {}
