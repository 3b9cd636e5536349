package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"hermes/commands"
	"hermes/domain"
	"hermes/events"
	"hermes/projections/sessions"
	"hermes/projections/transcripts"
)

// TranscriptService is what the transcript and search endpoints need: the
// read model of state.db.
type TranscriptService = *transcripts.Reader

// transcriptIndex lets the transcript commands read the read models.
type transcriptIndex struct {
	reader *transcripts.Reader
	lanes  *sessions.Projection
}

func (x transcriptIndex) SessionExists(ctx context.Context, id string) (bool, error) {
	return x.reader.SessionExists(ctx, id)
}

// TitleOwner adapts the reader (ErrNotFound for a free title) to the port
// (""), or no title could ever be set.
func (x transcriptIndex) TitleOwner(ctx context.Context, title string) (string, error) {
	owner, err := x.reader.TitleOwner(ctx, title)
	if errors.Is(err, transcripts.ErrNotFound) {
		return "", nil
	}
	return owner, err
}

func (x transcriptIndex) LaneOfSession(ctx context.Context, id string) (string, error) {
	row, err := x.lanes.BySessionID(ctx, id)
	if errors.Is(err, sessions.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return row.Lane.SessionKey, nil
}

func (s *Server) transcriptRoutes(r chi.Router) {
	if s.Transcripts == nil {
		return
	}
	s.transcriptCommands = s.Commands.Transcripts(transcriptIndex{reader: s.Transcripts, lanes: s.Lanes})
	r.Get("/transcripts/recent", s.recentTranscripts)
	r.Get("/transcripts/{session_id}", s.getTranscriptSession)
	r.Patch("/transcripts/{session_id}", s.patchTranscriptSession)
	r.Delete("/transcripts/{session_id}", s.deleteTranscript)
	r.Post("/transcripts/{session_id}/messages", s.appendMessage)
	r.Get("/transcripts/{session_id}/messages", s.getMessages)
	r.Put("/transcripts/{session_id}/messages", s.rewriteMessages)
	r.Post("/transcripts/{session_id}/rewind", s.rewind)
	r.Put("/transcripts/{session_id}/title", s.setTitle)
	r.Get("/transcripts/{session_id}/lineage", s.lineage)
	r.Get("/transcripts/{session_id}/export", s.exportSession)
	r.Post("/transcripts/{session_id}/clear", s.clearTranscript)
	r.Post("/transcripts/{session_id}/end", s.endTranscript)
	r.Get("/titles/resolve", s.resolveTitle)
	r.Get("/titles/next", s.nextTitle)
	r.Get("/search", s.search)
	r.Get("/export", s.exportAll)
	r.Get("/stats/tokens", s.tokenStats)
	r.Post("/maintenance/prune-sessions", s.pruneSessions)
}

// sessionIDParam validates the session id of the path before it names a
// stream or a query.
func sessionIDParam(r *http.Request) (string, error) {
	id, err := pathParam(r, "session_id")
	if err != nil {
		return "", err
	}
	if err := domain.ValidateSessionID(id); err != nil {
		return "", err
	}
	return id, nil
}

// syncReadModel is read-your-writes for the transcript commands' checks.
func (s *Server) syncReadModel(ctx context.Context) error {
	head, err := s.Store.Head(ctx)
	if err != nil {
		return err
	}
	s.wrote(head)
	return s.fresh(ctx)
}

func (s *Server) transcriptSession(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, err := sessionIDParam(r)
	if err == nil {
		err = s.fresh(r.Context())
	}
	if err != nil {
		s.writeError(w, r, err)
		return "", false
	}
	return id, true
}

func (s *Server) getTranscriptSession(w http.ResponseWriter, r *http.Request) {
	id, ok := s.transcriptSession(w, r)
	if !ok {
		return
	}
	row, err := s.Transcripts.Session(r.Context(), id)
	s.reply(w, r, row, err)
}

func (s *Server) appendMessage(w http.ResponseWriter, r *http.Request) {
	id, ok := s.transcriptSession(w, r)
	if !ok {
		return
	}
	var m events.Message
	if err := decode(r, &m, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.transcriptCommands.AppendMessage(r.Context(), id, m, commandID(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.wrote(res.Position)
	if err := s.fresh(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	ids, err := s.Transcripts.MessageIDs(r.Context(), res.MessagePosition)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		ID       int64  `json:"id"`
		Position uint64 `json:"position"`
	}{ids.FirstID, res.MessagePosition})
}

func boolQuery(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	switch strings.ToLower(v) {
	case "", "0", "false", "no":
		return false, nil
	case "1", "true", "yes":
		return true, nil
	}
	return false, fmt.Errorf("%w: %s must be true or false", errBadRequest, name)
}

func (s *Server) getMessages(w http.ResponseWriter, r *http.Request) {
	id, ok := s.transcriptSession(w, r)
	if !ok {
		return
	}
	if _, err := s.Transcripts.Session(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	format := r.URL.Query().Get("format")
	ancestors, err := boolQuery(r, "include_ancestors")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	inactive, err := boolQuery(r, "include_inactive")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	switch format {
	case "conversation":
		msgs, err := s.Transcripts.Conversation(r.Context(), id, ancestors)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, struct {
			Messages []transcripts.ChatMessage `json:"messages"`
		}{nonNil(msgs)})
	case "", "raw":
		msgs, err := s.Transcripts.Messages(r.Context(), id, inactive)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, struct {
			Messages []transcripts.Message `json:"messages"`
		}{nonNil(msgs)})
	default:
		s.writeError(w, r, fmt.Errorf("%w: format must be raw or conversation", errBadRequest))
	}
}

func (s *Server) rewriteMessages(w http.ResponseWriter, r *http.Request) {
	id, ok := s.transcriptSession(w, r)
	if !ok {
		return
	}
	var req struct {
		Messages *[]events.Message `json:"messages"`
	}
	if err := decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Messages == nil {
		s.writeError(w, r, fmt.Errorf("%w: messages is required", errBadRequest))
		return
	}
	pos, err := s.transcriptCommands.RewriteTranscript(r.Context(), id, *req.Messages, commandID(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.wrote(pos)
	if err := s.fresh(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	ids := []int64{}
	if rng, err := s.Transcripts.MessageIDs(r.Context(), pos); err == nil {
		ids = rng.IDs()
	}
	writeJSON(w, http.StatusOK, struct {
		IDs []int64 `json:"ids"`
	}{ids})
}

func (s *Server) rewind(w http.ResponseWriter, r *http.Request) {
	id, ok := s.transcriptSession(w, r)
	if !ok {
		return
	}
	var req struct {
		N *int `json:"n"`
	}
	if err := decode(r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	n := 1
	if req.N != nil {
		n = *req.N
	}
	if n > 10000 {
		s.writeError(w, r, fmt.Errorf("%w: n must be at most 10000", errBadRequest))
		return
	}
	if err := s.syncReadModel(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := s.Transcripts.Session(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	target, err := s.Transcripts.RewindTarget(r.Context(), id, n)
	if errors.Is(err, transcripts.ErrNoUserMessages) {
		s.writeError(w, r, fmt.Errorf("%w: session %s has no user message to rewind to", errNotFound, id))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	active, err := s.Transcripts.Messages(r.Context(), id, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	flipped := 0
	for _, m := range active {
		if m.ID >= target.TargetID {
			flipped++
		}
	}
	pos, err := s.transcriptCommands.Rewind(r.Context(), id, target.TargetID, target.TurnsUndone, commandID(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.wrote(pos)
	writeJSON(w, http.StatusOK, struct {
		RewoundCount int    `json:"rewound_count"`
		TurnsUndone  int    `json:"turns_undone"`
		TargetText   string `json:"target_text"`
		TargetID     int64  `json:"target_id"`
	}{flipped, target.TurnsUndone, target.TargetText, target.TargetID})
}

func (s *Server) setTitle(w http.ResponseWriter, r *http.Request) {
	id, ok := s.transcriptSession(w, r)
	if !ok {
		return
	}
	var req struct {
		Title *string `json:"title"`
	}
	if err := decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Title == nil {
		s.writeError(w, r, fmt.Errorf("%w: title is required (\"\" clears it)", errBadRequest))
		return
	}
	title, err := transcripts.SanitizeTitle(*req.Title)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pos, err := s.transcriptCommands.SetTitle(r.Context(), id, title, s.syncReadModel, commandID(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.wrote(pos)
	writeJSON(w, http.StatusOK, struct {
		SessionID string  `json:"session_id"`
		Title     *string `json:"title"`
	}{id, nullable(title)})
}

func (s *Server) patchTranscriptSession(w http.ResponseWriter, r *http.Request) {
	id, ok := s.transcriptSession(w, r)
	if !ok {
		return
	}
	var u events.SessionMetadataUpdated
	var req struct {
		Model            *string  `json:"model"`
		ModelConfig      *string  `json:"model_config"`
		SystemPrompt     *string  `json:"system_prompt"`
		ParentSessionID  *string  `json:"parent_session_id"`
		BillingProvider  *string  `json:"billing_provider"`
		BillingBaseURL   *string  `json:"billing_base_url"`
		BillingMode      *string  `json:"billing_mode"`
		InputTokens      int64    `json:"input_tokens"`
		OutputTokens     int64    `json:"output_tokens"`
		CacheReadTokens  int64    `json:"cache_read_tokens"`
		CacheWriteTokens int64    `json:"cache_write_tokens"`
		ReasoningTokens  int64    `json:"reasoning_tokens"`
		EstimatedCostUSD *float64 `json:"estimated_cost_usd"`
		ActualCostUSD    *float64 `json:"actual_cost_usd"`
		CostStatus       *string  `json:"cost_status"`
		CostSource       *string  `json:"cost_source"`
		PricingVersion   *string  `json:"pricing_version"`
		APICallCount     int64    `json:"api_call_count"`
	}
	if err := decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	u = events.SessionMetadataUpdated{
		SessionID: id, Model: req.Model, ModelConfig: req.ModelConfig, SystemPrompt: req.SystemPrompt,
		ParentSessionID: req.ParentSessionID, BillingProvider: req.BillingProvider, BillingBaseURL: req.BillingBaseURL,
		BillingMode: req.BillingMode, InputTokens: req.InputTokens, OutputTokens: req.OutputTokens,
		CacheReadTokens: req.CacheReadTokens, CacheWriteTokens: req.CacheWriteTokens, ReasoningTokens: req.ReasoningTokens,
		EstimatedCostUSD: req.EstimatedCostUSD, ActualCostUSD: req.ActualCostUSD, CostStatus: req.CostStatus,
		CostSource: req.CostSource, PricingVersion: req.PricingVersion, APICallCount: req.APICallCount,
	}
	pos, err := s.transcriptCommands.UpdateMetadata(r.Context(), u, commandID(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.wrote(pos)
	if err := s.fresh(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	row, err := s.Transcripts.Session(r.Context(), id)
	s.reply(w, r, row, err)
}

func (s *Server) deleteTranscript(w http.ResponseWriter, r *http.Request) {
	s.transcriptAction(w, r, func(id string) (uint64, error) {
		return s.transcriptCommands.DeleteSession(r.Context(), id, events.DeleteRequested, commandID(r))
	}, "deleted")
}

func (s *Server) clearTranscript(w http.ResponseWriter, r *http.Request) {
	s.transcriptAction(w, r, func(id string) (uint64, error) {
		return s.transcriptCommands.ClearTranscript(r.Context(), id, commandID(r))
	}, "cleared")
}

func (s *Server) endTranscript(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Reason string `json:"reason"`
	}
	if err := decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.transcriptAction(w, r, func(id string) (uint64, error) {
		return s.transcriptCommands.EndSession(r.Context(), id, req.Reason, commandID(r))
	}, "ended")
}

func (s *Server) transcriptAction(w http.ResponseWriter, r *http.Request, run func(id string) (uint64, error), done string) {
	id, ok := s.transcriptSession(w, r)
	if !ok {
		return
	}
	pos, err := run(id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.wrote(pos)
	writeJSON(w, http.StatusOK, map[string]any{"session_id": id, done: true})
}

func (s *Server) resolveTitle(w http.ResponseWriter, r *http.Request) {
	title := r.URL.Query().Get("title")
	if title == "" {
		s.writeError(w, r, fmt.Errorf("%w: title is required", errBadRequest))
		return
	}
	if err := s.fresh(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	id, err := s.Transcripts.ResolveTitle(r.Context(), title)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if id == "" {
		s.writeError(w, r, fmt.Errorf("%w: no session titled %q", errNotFound, title))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"session_id": id})
}

func (s *Server) nextTitle(w http.ResponseWriter, r *http.Request) {
	title := r.URL.Query().Get("title")
	if title == "" {
		s.writeError(w, r, fmt.Errorf("%w: title is required", errBadRequest))
		return
	}
	if err := s.fresh(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	next, err := s.Transcripts.NextTitle(r.Context(), title)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"title": next})
}

// listQuery reads a filter given as repeated parameters or a comma list;
// absent is nil (no filter), present but empty is an empty filter.
func listQuery(r *http.Request, name string) []string {
	vals, ok := r.URL.Query()[name]
	if !ok {
		return nil
	}
	out := []string{}
	for _, v := range vals {
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

func intQuery(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%w: %s must be an integer from %d to %d", errBadRequest, name, lo, hi)
	}
	return n, nil
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	if len(q) > 4096 {
		s.writeError(w, r, fmt.Errorf("%w: q longer than 4096 bytes", errBadRequest))
		return
	}
	limit, err := intQuery(r, "limit", 20, 1, 500)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	offset, err := intQuery(r, "offset", 0, 0, 1_000_000)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.fresh(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	results, err := s.Transcripts.Search(r.Context(), transcripts.SearchQuery{
		Query: q, Sources: listQuery(r, "source"), ExcludeSources: listQuery(r, "exclude_source"),
		Roles: listQuery(r, "role"), Limit: limit, Offset: offset,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Results []transcripts.SearchResult `json:"results"`
	}{nonNil(results)})
}

func (s *Server) lineage(w http.ResponseWriter, r *http.Request) {
	id, ok := s.transcriptSession(w, r)
	if !ok {
		return
	}
	l, err := s.Transcripts.Lineage(r.Context(), id)
	s.reply(w, r, l, err)
}

func (s *Server) recentTranscripts(w http.ResponseWriter, r *http.Request) {
	limit, err := intQuery(r, "limit", 20, 1, 1000)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.fresh(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	rows, err := s.Transcripts.Recent(r.Context(), limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Sessions []transcripts.RecentSession `json:"sessions"`
	}{nonNil(rows)})
}

func (s *Server) exportSession(w http.ResponseWriter, r *http.Request) {
	id, ok := s.transcriptSession(w, r)
	if !ok {
		return
	}
	out, err := s.Transcripts.ExportSession(r.Context(), id)
	s.reply(w, r, out, err)
}

func (s *Server) exportAll(w http.ResponseWriter, r *http.Request) {
	if err := s.fresh(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.Transcripts.ExportAll(r.Context(), r.URL.Query().Get("source"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.Encode(struct {
		Sessions []transcripts.SessionExport `json:"sessions"`
	}{nonNil(out)})
}

func (s *Server) tokenStats(w http.ResponseWriter, r *http.Request) {
	if err := s.fresh(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	stats, err := s.Transcripts.TokenStats(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Models []transcripts.ModelUsage `json:"models"`
	}{nonNil(stats)})
}

func (s *Server) pruneSessions(w http.ResponseWriter, r *http.Request) {
	var req struct {
		OlderThanDays *int   `json:"older_than_days"`
		Source        string `json:"source"`
	}
	if err := decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.OlderThanDays == nil || *req.OlderThanDays < 0 || *req.OlderThanDays > 36500 {
		s.writeError(w, r, fmt.Errorf("%w: older_than_days must be an integer from 0 to 36500", errBadRequest))
		return
	}
	if err := s.syncReadModel(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	ids, err := s.Transcripts.PrunableSessions(r.Context(), time.Duration(*req.OlderThanDays)*24*time.Hour, req.Source, s.Commands.Now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	deleted := 0
	for _, id := range ids {
		pos, err := s.transcriptCommands.DeleteSession(r.Context(), id, events.DeletePruned, "")
		if errors.Is(err, commands.ErrSessionNotFound) {
			continue
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.wrote(pos)
		deleted++
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": deleted})
}
