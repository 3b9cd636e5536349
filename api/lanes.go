package api

import (
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"hermes/commands"
	"hermes/domain"
	"hermes/events"
)

func (s *Server) laneRoutes(r chi.Router) {
	r.Post("/sessions/resolve", s.resolve)
	r.Get("/sessions", s.listSessions)
	r.Get("/sessions/{key}", s.getSession)
	r.Post("/sessions/{key}/touch", s.touch)
	r.Post("/sessions/{key}/turns/start", s.startTurn)
	r.Post("/sessions/{key}/turns", s.completeTurn)
	r.Post("/sessions/{key}/reset", s.reset)
	r.Post("/sessions/{key}/switch", s.switchSession)
	r.Post("/sessions/{key}/suspend", s.suspend)
	r.Post("/sessions/{key}/resume-pending", s.markResumePending)
	r.Delete("/sessions/{key}/resume-pending", s.clearResumePending)
	r.Put("/sessions/{key}/active-processes", s.setActiveProcesses)
	r.Post("/recovery/suspend-recently-active", s.suspendRecentlyActive)
	r.Get("/recovery/resumable", s.resumable)
	r.Post("/maintenance/prune-entries", s.pruneEntries)
}

type resolveRequest struct {
	Source   *domain.SessionSource `json:"source"`
	ForceNew bool                  `json:"force_new"`
}

type resolveResponse struct {
	Entry       Entry   `json:"entry"`
	Created     bool    `json:"created"`
	ResetReason *string `json:"reset_reason"`
}

func (s *Server) resolve(w http.ResponseWriter, r *http.Request) {
	var req resolveRequest
	if err := decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := validateSource(req.Source); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.Commands.ResolveSession(r.Context(), commands.ResolveSession{Source: *req.Source, ForceNew: req.ForceNew, CommandID: commandID(r)})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.wrote(res.Position)
	writeJSON(w, http.StatusOK, resolveResponse{Entry: NewEntry(res.Lane, res.Version), Created: res.Created, ResetReason: nullable(res.ResetReason)})
}

// maxSourceField bounds every string of a source.
const maxSourceField = 1024

func validateSource(src *domain.SessionSource) error {
	if src == nil {
		return fmt.Errorf("%w: source is required", errBadRequest)
	}
	if src.Platform == "" {
		return fmt.Errorf("%w: source.platform is required", errBadRequest)
	}
	if src.ChatID == "" {
		return fmt.Errorf("%w: source.chat_id is required", errBadRequest)
	}
	switch src.ChatType {
	case "", domain.ChatDM, domain.ChatGroup, domain.ChatChannel, domain.ChatThread:
	default:
		return fmt.Errorf("%w: source.chat_type %q is not dm, group, channel or thread", errBadRequest, src.ChatType)
	}
	for name, v := range map[string]string{
		"platform": src.Platform, "chat_id": src.ChatID, "chat_name": src.ChatName, "user_id": src.UserID,
		"user_name": src.UserName, "thread_id": src.ThreadID, "chat_topic": src.ChatTopic, "user_id_alt": src.UserIDAlt,
		"chat_id_alt": src.ChatIDAlt, "guild_id": src.GuildID, "parent_chat_id": src.ParentChatID, "message_id": src.MessageID,
	} {
		if len(v) > maxSourceField {
			return fmt.Errorf("%w: source.%s is longer than %d bytes", errBadRequest, name, maxSourceField)
		}
	}
	return nil
}

type sessionsResponse struct {
	Sessions []Entry `json:"sessions"`
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	if err := s.fresh(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	if id := q.Get("session_id"); q.Has("session_id") {
		row, err := s.Lanes.BySessionID(r.Context(), id)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, NewEntry(row.Lane, row.Version))
		return
	}
	var since time.Time
	if q.Has("active_minutes") {
		n, err := intQuery(r, "active_minutes", -1, 0, math.MaxInt32)
		if err == nil && n < 0 {
			err = fmt.Errorf("%w: active_minutes is empty", errBadRequest)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		since = s.Commands.Now().Add(-time.Duration(n) * time.Minute)
	}
	rows, err := s.Lanes.List(r.Context(), since)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := sessionsResponse{Sessions: make([]Entry, 0, len(rows))}
	for _, row := range rows {
		out.Sessions = append(out.Sessions, NewEntry(row.Lane, row.Version))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	key, err := pathKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.fresh(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	row, err := s.Lanes.Lane(r.Context(), key)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, NewEntry(row.Lane, row.Version))
}

// laneCommand runs a command on the lane of the path and answers the entry.
func (s *Server) laneCommand(w http.ResponseWriter, r *http.Request, body any, allowEmpty bool, run func(key string) (commands.LaneResult, error)) {
	key, err := pathKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if body != nil {
		if err := decode(r, body, allowEmpty); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	res, err := run(key)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.wrote(res.Position)
	writeJSON(w, http.StatusOK, NewEntry(res.Lane, res.Version))
}

func (s *Server) touch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		LastPromptTokens *int64 `json:"last_prompt_tokens"`
	}
	s.laneCommand(w, r, &req, true, func(key string) (commands.LaneResult, error) {
		return s.Commands.UpdateSession(r.Context(), key, req.LastPromptTokens, commandID(r))
	})
}

func (s *Server) startTurn(w http.ResponseWriter, r *http.Request) {
	release, ok := s.admitTurn()
	if !ok {
		s.writeError(w, r, errDraining)
		return
	}
	defer release()
	key, err := pathKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req struct {
		TurnID string `json:"turn_id"`
	}
	if err := decode(r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.TurnID) > 200 {
		s.writeError(w, r, fmt.Errorf("%w: turn_id longer than 200 bytes", errBadRequest))
		return
	}
	res, turn, err := s.Commands.StartTurn(r.Context(), key, req.TurnID, commandID(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.wrote(res.Position)
	writeJSON(w, http.StatusOK, struct {
		TurnID string `json:"turn_id"`
		Entry  Entry  `json:"entry"`
	}{turn, NewEntry(res.Lane, res.Version)})
}

func (s *Server) completeTurn(w http.ResponseWriter, r *http.Request) {
	var req struct {
		TurnID           string  `json:"turn_id"`
		InputTokens      int64   `json:"input_tokens"`
		OutputTokens     int64   `json:"output_tokens"`
		CacheReadTokens  int64   `json:"cache_read_tokens"`
		CacheWriteTokens int64   `json:"cache_write_tokens"`
		EstimatedCostUSD float64 `json:"estimated_cost_usd"`
		CostStatus       string  `json:"cost_status"`
		LastPromptTokens *int64  `json:"last_prompt_tokens"`
		Failed           bool    `json:"failed"`
	}
	s.laneCommand(w, r, &req, true, func(key string) (commands.LaneResult, error) {
		if len(req.TurnID) > 200 || len(req.CostStatus) > 200 {
			return commands.LaneResult{}, fmt.Errorf("%w: turn_id and cost_status are limited to 200 bytes", errBadRequest)
		}
		return s.Commands.CompleteTurn(r.Context(), key, domain.TurnOutcome{
			TurnID: req.TurnID, InputTokens: req.InputTokens, OutputTokens: req.OutputTokens,
			CacheReadTokens: req.CacheReadTokens, CacheWriteTokens: req.CacheWriteTokens,
			EstimatedCostUSD: req.EstimatedCostUSD, CostStatus: req.CostStatus,
			LastPromptTokens: req.LastPromptTokens, Failed: req.Failed,
		}, commandID(r))
	})
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	var req struct {
		DisplayName string `json:"display_name"`
	}
	s.laneCommand(w, r, &req, true, func(key string) (commands.LaneResult, error) {
		if len(req.DisplayName) > maxSourceField {
			return commands.LaneResult{}, fmt.Errorf("%w: display_name longer than %d bytes", errBadRequest, maxSourceField)
		}
		return s.Commands.ResetSession(r.Context(), key, req.DisplayName, commandID(r))
	})
}

func (s *Server) switchSession(w http.ResponseWriter, r *http.Request) {
	var req struct {
		SessionID string `json:"session_id"`
	}
	s.laneCommand(w, r, &req, false, func(key string) (commands.LaneResult, error) {
		return s.Commands.SwitchSession(r.Context(), key, req.SessionID, commandID(r))
	})
}

func (s *Server) suspend(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	s.laneCommand(w, r, &req, true, func(key string) (commands.LaneResult, error) {
		return s.Commands.SuspendSession(r.Context(), key, events.SuspendStopCommand, commandID(r))
	})
}

func (s *Server) markResumePending(w http.ResponseWriter, r *http.Request) {
	key, err := pathKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req struct {
		Reason string `json:"reason"`
	}
	if err := decode(r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Reason == "" {
		req.Reason = events.ResumeRestartTimeout
	}
	res, marked, err := s.Commands.MarkResumePending(r.Context(), key, req.Reason, commandID(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.wrote(res.Position)
	writeJSON(w, http.StatusOK, struct {
		Marked bool  `json:"marked"`
		Entry  Entry `json:"entry"`
	}{marked, NewEntry(res.Lane, res.Version)})
}

func (s *Server) clearResumePending(w http.ResponseWriter, r *http.Request) {
	key, err := pathKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, cleared, err := s.Commands.ClearResumePending(r.Context(), key, commandID(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.wrote(res.Position)
	writeJSON(w, http.StatusOK, struct {
		Cleared bool  `json:"cleared"`
		Entry   Entry `json:"entry"`
	}{cleared, NewEntry(res.Lane, res.Version)})
}

func (s *Server) setActiveProcesses(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Count *int `json:"count"`
	}
	s.laneCommand(w, r, &req, false, func(key string) (commands.LaneResult, error) {
		if req.Count == nil {
			return commands.LaneResult{}, fmt.Errorf("%w: count is required", errBadRequest)
		}
		return s.Commands.SetActiveProcesses(r.Context(), key, *req.Count, commandID(r))
	})
}

func (s *Server) suspendRecentlyActive(w http.ResponseWriter, r *http.Request) {
	var req struct {
		MaxAgeSeconds *int64 `json:"max_age_seconds"`
	}
	if err := decode(r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	age := int64(120)
	if req.MaxAgeSeconds != nil {
		age = *req.MaxAgeSeconds
	}
	if age < 0 || age > 10*365*24*3600 {
		s.writeError(w, r, fmt.Errorf("%w: max_age_seconds must be between 0 and ten years", errBadRequest))
		return
	}
	if err := s.fresh(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	marked, err := s.Commands.SuspendRecentlyActive(r.Context(), time.Duration(age)*time.Second, commandID(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.afterSweep(r)
	writeJSON(w, http.StatusOK, struct {
		Marked []string `json:"marked"`
	}{nonNil(marked)})
}

func (s *Server) pruneEntries(w http.ResponseWriter, r *http.Request) {
	var req struct {
		MaxAgeDays *int `json:"max_age_days"`
	}
	if err := decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.MaxAgeDays == nil || *req.MaxAgeDays < 0 || *req.MaxAgeDays > 100*365 {
		s.writeError(w, r, fmt.Errorf("%w: max_age_days must be an integer between 0 and 36500", errBadRequest))
		return
	}
	if err := s.fresh(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	pruned, err := s.Commands.PruneOldEntries(r.Context(), time.Duration(*req.MaxAgeDays)*24*time.Hour, commandID(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.afterSweep(r)
	writeJSON(w, http.StatusOK, struct {
		Pruned []string `json:"pruned"`
	}{nonNil(pruned)})
}

// afterSweep makes the next query see a sweep's appends.
func (s *Server) afterSweep(r *http.Request) {
	if head, err := s.Store.Head(r.Context()); err == nil {
		s.wrote(head)
	}
}

func (s *Server) resumable(w http.ResponseWriter, r *http.Request) {
	if err := s.fresh(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	rows, err := s.Lanes.Resumable(r.Context(), s.ResumeFreshness, s.Commands.Now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := sessionsResponse{Sessions: make([]Entry, 0, len(rows))}
	for _, row := range rows {
		out.Sessions = append(out.Sessions, NewEntry(row.Lane, row.Version))
	}
	writeJSON(w, http.StatusOK, out)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
