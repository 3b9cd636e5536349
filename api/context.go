package api

import "github.com/go-chi/chi/v5"

// contextRoutes serves the session context prompt and reset notices
// (issue [F]).
func (s *Server) contextRoutes(r chi.Router) {}
