package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"hermes/commands"
	"hermes/events"
	"hermes/projections/transcripts"
)

// The rest of Hermes' SessionDB ([C]): the Python client's SessionDB maps
// each of its methods onto one of these.
func (s *Server) sessionDBRoutes(rt routes) {
	session := func(h func(http.ResponseWriter, *http.Request, sessionID) error) handlerFunc {
		return s.current(withSessionID(h))
	}
	rt.post("/transcripts", s.openSession)
	rt.get("/transcripts", s.listTranscripts)
	rt.get("/transcripts/count", s.countTranscripts)
	rt.get("/transcripts/resolve", s.resolveSessionID)
	rt.post("/transcripts/delete", s.deleteTranscripts)
	rt.post("/transcripts/{session_id}/reopen", session(s.reopenTranscript))
	rt.put("/transcripts/{session_id}/archived", session(s.setArchived))
	rt.get("/transcripts/{session_id}/compression-tip", withSessionID(s.compressionTip))
	rt.get("/transcripts/{session_id}/resume-target", withSessionID(s.resumeTarget))
	rt.get("/stats/messages", s.countMessages)
	rt.get("/titles/session", s.sessionByTitle)
	rt.get("/titles/sanitize", s.sanitizeTitle)
	rt.post("/maintenance/delete-empty-sessions", s.deleteEmptySessions)
}

// openSessionRequest is POST /v1/transcripts (Hermes' create_session).
type openSessionRequest struct {
	SessionID       string  `json:"session_id"`
	Source          string  `json:"source"`
	UserID          *string `json:"user_id"`
	Model           *string `json:"model"`
	ModelConfig     *string `json:"model_config"`
	SystemPrompt    *string `json:"system_prompt"`
	ParentSessionID *string `json:"parent_session_id"`
}

func (q openSessionRequest) validate() error {
	if q.SessionID == "" {
		return fmt.Errorf("%w: session_id is required", errBadRequest)
	}
	if err := checkText("source", q.Source, maxSourceField); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"user_id", q.UserID}, {"model", q.Model}, {"parent_session_id", q.ParentSessionID}} {
		if f.v != nil {
			if err := checkText(f.name, *f.v, maxMetadataField); err != nil {
				return err
			}
		}
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"model_config", q.ModelConfig}, {"system_prompt", q.SystemPrompt}} {
		if f.v != nil {
			if err := checkText(f.name, *f.v, maxBodyText); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxBodyText bounds a text only the body's cap bounds otherwise.
const maxBodyText = 1 << 30

// archivedRequest is PUT /v1/transcripts/{session_id}/archived.
type archivedRequest struct {
	Archived *bool `json:"archived"`
}

func (q archivedRequest) validate() error {
	if q.Archived == nil {
		return fmt.Errorf("%w: archived is required", errBadRequest)
	}
	return nil
}

// maxBulkDelete bounds the ids of one bulk delete.
const maxBulkDelete = 10_000

// bulkDeleteRequest is POST /v1/transcripts/delete (Hermes' delete_sessions).
type bulkDeleteRequest struct {
	SessionIDs []string `json:"session_ids"`
}

func (q bulkDeleteRequest) validate() error {
	if len(q.SessionIDs) > maxBulkDelete {
		return fmt.Errorf("%w: at most %d session_ids", errBadRequest, maxBulkDelete)
	}
	for _, id := range q.SessionIDs {
		if err := checkText("session_ids", id, maxPathParam); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) openSession(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[openSessionRequest](r, false)
	if err != nil {
		return err
	}
	if err := s.syncReadModel(r.Context()); err != nil {
		return err
	}
	pos, err := s.transcriptCommands.OpenSession(r.Context(), commands.OpenSession{Opened: events.TranscriptOpened{
		SessionID: req.SessionID, Source: req.Source, UserID: req.UserID, Model: req.Model, ModelConfig: req.ModelConfig,
		SystemPrompt: req.SystemPrompt, ParentSessionID: req.ParentSessionID,
	}, CommandID: commandID(r)})
	if err != nil {
		return err
	}
	if pos > 0 {
		if err := s.readAfter(r.Context(), pos); err != nil {
			return err
		}
	}
	row, err := s.transcripts(r.Context()).Session(r.Context(), req.SessionID)
	if err != nil {
		return err
	}
	return respond(w, struct {
		transcripts.Session
		Created bool `json:"created"`
	}{row, pos > 0})
}

// listFilters reads the filters of GET /v1/transcripts and its count.
func listFilters(r *http.Request) (transcripts.ListQuery, error) {
	var q transcripts.ListQuery
	var err error
	if q.Source, err = textQuery(r, "source", maxSourceField); err != nil {
		return q, err
	}
	if q.ExcludeSources, err = listQuery(r, "exclude_source"); err != nil {
		return q, err
	}
	if q.MinMessageCount, err = intQuery(r, "min_message_count", 0, 0, 1<<31-1); err != nil {
		return q, err
	}
	if q.IDQuery, err = textQuery(r, "id_query", maxPathParam); err != nil {
		return q, err
	}
	q.IDQuery = strings.TrimSpace(q.IDQuery)
	for _, b := range []struct {
		name string
		v    *bool
	}{
		{"include_children", &q.IncludeChildren}, {"order_by_last_active", &q.OrderByActive},
		{"include_archived", &q.IncludeArchived}, {"archived_only", &q.ArchivedOnly}, {"empty", &q.Empty},
	} {
		if *b.v, err = boolQuery(r, b.name); err != nil {
			return q, err
		}
	}
	return q, nil
}

func (s *Server) listTranscripts(w http.ResponseWriter, r *http.Request) error {
	q, err := listFilters(r)
	if err != nil {
		return err
	}
	if q.Limit, err = intQuery(r, "limit", 20, 1, 10_000); err != nil {
		return err
	}
	if q.Offset, err = intQuery(r, "offset", 0, 0, 1<<31-1); err != nil {
		return err
	}
	rows, err := s.transcripts(r.Context()).ListSessions(r.Context(), q)
	if err != nil {
		return err
	}
	return respond(w, struct {
		Sessions []map[string]any `json:"sessions"`
	}{nonNil(rows)})
}

func (s *Server) countTranscripts(w http.ResponseWriter, r *http.Request) error {
	q, err := listFilters(r)
	if err != nil {
		return err
	}
	exclude, err := boolQuery(r, "exclude_children")
	if err != nil {
		return err
	}
	// session_count counts children unless told not to; the listing hides
	// them unless told to show them.
	q.IncludeChildren = !exclude
	if q.Empty {
		q.IncludeChildren, q.IncludeArchived, q.ArchivedOnly = true, false, false
	}
	n, err := s.transcripts(r.Context()).CountSessions(r.Context(), q)
	if err != nil {
		return err
	}
	return respond(w, map[string]int64{"count": n})
}

func (s *Server) countMessages(w http.ResponseWriter, r *http.Request) error {
	id, err := textQuery(r, "session_id", maxPathParam)
	if err != nil {
		return err
	}
	n, err := s.transcripts(r.Context()).CountMessages(r.Context(), id)
	if err != nil {
		return err
	}
	return respond(w, map[string]int64{"count": n})
}

func (s *Server) resolveSessionID(w http.ResponseWriter, r *http.Request) error {
	id, err := textQuery(r, "id", maxPathParam)
	if err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("%w: id is required", errBadRequest)
	}
	got, err := s.transcripts(r.Context()).ResolveSessionID(r.Context(), id)
	if errors.Is(err, transcripts.ErrNotFound) {
		// No match or an ambiguous prefix: Hermes answers None.
		return respond(w, map[string]*string{"session_id": nil})
	}
	if err != nil {
		return err
	}
	return respond(w, map[string]*string{"session_id": &got})
}

func (s *Server) sessionByTitle(w http.ResponseWriter, r *http.Request) error {
	title, err := titleQuery(r)
	if err != nil {
		return err
	}
	row, err := s.transcripts(r.Context()).SessionByTitle(r.Context(), title)
	if err != nil {
		return err
	}
	if row == nil {
		return fmt.Errorf("%w: no session titled %q", errNotFound, title)
	}
	return respond(w, row)
}

// sanitizeTitle applies the title rules the title command applies
// (Hermes' sanitize_title): {"title": s} or null for an empty result, 400
// for a title too long.
func (s *Server) sanitizeTitle(w http.ResponseWriter, r *http.Request) error {
	title := r.URL.Query().Get("title")
	if err := checkTitle("title", title); err != nil {
		return err
	}
	clean, err := transcripts.SanitizeTitle(title)
	if err != nil {
		return err
	}
	return respond(w, map[string]*string{"title": nullable(clean)})
}

func (s *Server) compressionTip(w http.ResponseWriter, r *http.Request, id sessionID) error {
	tip, err := s.transcripts(r.Context()).CompressionTip(r.Context(), string(id))
	if err != nil {
		return err
	}
	return respond(w, map[string]string{"session_id": tip})
}

func (s *Server) resumeTarget(w http.ResponseWriter, r *http.Request, id sessionID) error {
	target, err := s.transcripts(r.Context()).ResumeTarget(r.Context(), string(id))
	if err != nil {
		return err
	}
	return respond(w, map[string]string{"session_id": target})
}

func (s *Server) reopenTranscript(w http.ResponseWriter, r *http.Request, id sessionID) error {
	if _, err := decode[emptyRequest](r, true); err != nil {
		return err
	}
	pos, err := s.transcriptCommands.ReopenSession(r.Context(), commands.ReopenSession{SessionID: string(id), CommandID: commandID(r)})
	return s.transcriptDone(w, id, pos, err, "reopened")
}

func (s *Server) setArchived(w http.ResponseWriter, r *http.Request, id sessionID) error {
	req, err := decode[archivedRequest](r, false)
	if err != nil {
		return err
	}
	pos, err := s.transcriptCommands.SetArchived(r.Context(), commands.SetArchived{
		SessionID: string(id), Archived: *req.Archived, CommandID: commandID(r),
	})
	if err != nil {
		return err
	}
	s.wrote(pos)
	return respond(w, map[string]any{"session_id": string(id), "archived": *req.Archived, "updated": true})
}

// deleteEach deletes each session through the command of DELETE
// /v1/transcripts/{session_id}, so every way of deleting a session is one
// path (erasure rules included); ids that are gone already are skipped.
func (s *Server) deleteEach(r *http.Request, ids []string) (int, error) {
	deleted := 0
	for _, id := range ids {
		pos, err := s.transcriptCommands.DeleteSession(r.Context(), commands.DeleteSession{SessionID: id, Reason: events.DeleteRequested})
		if errors.Is(err, commands.ErrSessionNotFound) {
			continue
		}
		if err != nil {
			return deleted, err
		}
		s.wrote(pos)
		deleted++
	}
	return deleted, nil
}

func (s *Server) deleteTranscripts(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[bulkDeleteRequest](r, false)
	if err != nil {
		return err
	}
	if err := s.syncReadModel(r.Context()); err != nil {
		return err
	}
	seen := map[string]bool{}
	var ids []string
	for _, id := range req.SessionIDs {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	n, err := s.deleteEach(r, ids)
	if err != nil {
		return err
	}
	return respond(w, map[string]int{"deleted": n})
}

func (s *Server) deleteEmptySessions(w http.ResponseWriter, r *http.Request) error {
	if _, err := decode[emptyRequest](r, true); err != nil {
		return err
	}
	if err := s.syncReadModel(r.Context()); err != nil {
		return err
	}
	ids, err := s.transcripts(r.Context()).SessionIDs(r.Context(), transcripts.ListQuery{IncludeChildren: true, Empty: true})
	if err != nil {
		return err
	}
	n, err := s.deleteEach(r, ids)
	if err != nil {
		return err
	}
	return respond(w, map[string]int{"deleted": n})
}
