package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"hermes/commands"
	"hermes/domain"
	"hermes/events"
)

// The SessionDB state a gateway keeps beside its transcripts: Hermes'
// state_meta (get_meta/set_meta), handoffs, the Telegram DM topic API,
// get_messages_around, get_anchored_view and maybe_auto_prune_and_vacuum.
func (s *Server) gatewayStateRoutes(rt routes) {
	if !s.hasTranscripts {
		return
	}
	s.stateCommands = s.Commands.State(runIndex{s})
	// The state commands check the read model, so they wait for it too.
	session := func(h func(http.ResponseWriter, *http.Request, sessionID) error) handlerFunc {
		return s.current(withSessionID(h))
	}
	rt.get("/meta/{meta_key}", s.getMeta)
	rt.put("/meta/{meta_key}", s.current(s.setMeta))

	rt.get("/handoffs", s.listHandoffs)
	rt.get("/transcripts/{session_id}/handoff", withSessionID(s.getHandoff))
	rt.post("/transcripts/{session_id}/handoff", session(s.requestHandoff))
	rt.post("/transcripts/{session_id}/handoff/claim", session(s.claimHandoff))
	rt.post("/transcripts/{session_id}/handoff/complete", session(s.completeHandoff))
	rt.post("/transcripts/{session_id}/handoff/fail", session(s.failHandoff))

	rt.get("/transcripts/{session_id}/messages/around", withSessionID(s.messagesAround))
	rt.get("/transcripts/{session_id}/messages/anchored", withSessionID(s.anchoredView))
	rt.post("/maintenance/auto-prune", s.autoPrune)

	rt.post("/telegram/topic-migration", s.current(s.topicMigration))
	rt.get("/telegram/chats/{chat_id}/topic-mode", s.getTopicMode)
	rt.put("/telegram/chats/{chat_id}/topic-mode", s.current(s.enableTopicMode))
	rt.delete("/telegram/chats/{chat_id}/topic-mode", s.current(s.disableTopicMode))
	rt.get("/telegram/chats/{chat_id}/topics", s.listTopicBindings)
	rt.get("/telegram/chats/{chat_id}/topics/{thread_id}", s.getTopicBinding)
	rt.put("/telegram/chats/{chat_id}/topics/{thread_id}", s.current(s.bindTopic))
	rt.get("/telegram/topic-bindings", s.topicBindingOfSession)
	rt.get("/telegram/unlinked-sessions", s.unlinkedTelegramSessions)
}

// metaKey is the {meta_key} path parameter, checked as set_meta checks it.
func metaKey(r *http.Request) (string, error) {
	key, err := pathParam(r, "meta_key")
	if err != nil {
		return "", err
	}
	return key, commands.CheckMetaKey(key)
}

// metaLastAutoPrune is the state_meta key of Hermes' last auto-prune: its
// value is the later of a value set and hermes' own last run.
const metaLastAutoPrune = "last_auto_prune"

// metaTopicSchema is the state_meta key apply_telegram_topic_migration sets.
const metaTopicSchema = "telegram_dm_topic_schema_version"

type metaAnswer struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

func (s *Server) getMeta(w http.ResponseWriter, r *http.Request) error {
	key, err := metaKey(r)
	if err != nil {
		return err
	}
	v, ok, err := s.meta(r.Context(), key)
	if err != nil {
		return err
	}
	ans := metaAnswer{Key: key}
	if ok {
		ans.Value = &v
	}
	return respond(w, ans)
}

// meta reads a state_meta value; last_auto_prune also from hermes' own
// record of its auto-prune runs.
func (s *Server) meta(ctx context.Context, key string) (string, bool, error) {
	v, ok, err := s.transcripts(ctx).Meta(ctx, key)
	if err != nil || key != metaLastAutoPrune {
		return v, ok, err
	}
	last, err := s.lastAutoPrune(ctx)
	if err != nil || last.IsZero() {
		return v, ok, err
	}
	return strconv.FormatFloat(float64(last.UnixMicro())/1e6, 'f', -1, 64), true, nil
}

// lastAutoPrune is the later of hermes' last recorded auto-prune and a
// last_auto_prune value set through set_meta (Unix seconds, as Hermes
// writes it).
func (s *Server) lastAutoPrune(ctx context.Context) (time.Time, error) {
	last, err := s.Commands.LastAutoPrune(ctx)
	if err != nil {
		return time.Time{}, err
	}
	v, ok, err := s.transcripts(ctx).Meta(ctx, metaLastAutoPrune)
	if err != nil {
		return time.Time{}, err
	}
	if f, perr := strconv.ParseFloat(strings.TrimSpace(v), 64); ok && perr == nil && f > 0 && f < 1e11 {
		if set := time.UnixMicro(int64(f * 1e6)).UTC(); set.After(last) {
			last = set
		}
	}
	return last, nil
}

// setMetaRequest is PUT /v1/meta/{meta_key}.
type setMetaRequest struct {
	Value *string `json:"value"`
}

func (q setMetaRequest) validate() error {
	if q.Value == nil {
		return fmt.Errorf("%w: value is required", errBadRequest)
	}
	return nil
}

func (s *Server) setMeta(w http.ResponseWriter, r *http.Request) error {
	key, err := metaKey(r)
	if err != nil {
		return err
	}
	req, err := decode[setMetaRequest](r, false)
	if err != nil {
		return err
	}
	pos, err := s.stateCommands.SetMeta(r.Context(), commands.SetMeta{Key: key, Value: *req.Value, CommandID: commandID(r)})
	if err != nil {
		return err
	}
	s.wrote(pos)
	return respond(w, metaAnswer{Key: key, Value: req.Value})
}

func (s *Server) listHandoffs(w http.ResponseWriter, r *http.Request) error {
	if st := r.URL.Query().Get("state"); st != "" && st != events.HandoffStatePending {
		return fmt.Errorf("%w: state must be pending", errBadRequest)
	}
	rows, err := s.transcripts(r.Context()).PendingHandoffs(r.Context())
	if err != nil {
		return err
	}
	return respond(w, map[string][]map[string]any{"sessions": nonNil(rows)})
}

func (s *Server) getHandoff(w http.ResponseWriter, r *http.Request, id sessionID) error {
	state, platform, reason, err := s.transcripts(r.Context()).HandoffState(r.Context(), string(id))
	if err != nil {
		return err
	}
	return respond(w, struct {
		State    *string `json:"state"`
		Platform *string `json:"platform"`
		Error    *string `json:"error"`
	}{state, platform, reason})
}

// handoffRequest is the body of the handoff commands.
type handoffRequest struct {
	Platform string `json:"platform"`
	Error    string `json:"error"`
}

// maxHandoffErrorBytes bounds a handoff's reason as sent (it is kept to
// domain.MaxHandoffError characters).
const maxHandoffErrorBytes = 64 << 10

func (q handoffRequest) validate() error {
	if err := checkText("platform", q.Platform, maxSourceField); err != nil {
		return err
	}
	return checkText("error", q.Error, maxHandoffErrorBytes)
}

func (s *Server) handoffCommand(w http.ResponseWriter, r *http.Request, id sessionID, answer string,
	run func(context.Context, commands.Handoff) (commands.HandoffOutcome, error)) error {
	req, err := decode[handoffRequest](r, true)
	if err != nil {
		return err
	}
	out, err := run(r.Context(), commands.Handoff{SessionID: string(id), Platform: req.Platform, Error: req.Error, CommandID: commandID(r)})
	if err != nil {
		return err
	}
	s.wrote(out.Position)
	if answer == "" {
		return respond(w, struct{}{})
	}
	return respond(w, map[string]bool{answer: out.Changed})
}

func (s *Server) requestHandoff(w http.ResponseWriter, r *http.Request, id sessionID) error {
	return s.handoffCommand(w, r, id, "requested", s.stateCommands.RequestHandoff)
}

func (s *Server) claimHandoff(w http.ResponseWriter, r *http.Request, id sessionID) error {
	return s.handoffCommand(w, r, id, "claimed", s.stateCommands.ClaimHandoff)
}

func (s *Server) completeHandoff(w http.ResponseWriter, r *http.Request, id sessionID) error {
	return s.handoffCommand(w, r, id, "", s.stateCommands.CompleteHandoff)
}

func (s *Server) failHandoff(w http.ResponseWriter, r *http.Request, id sessionID) error {
	return s.handoffCommand(w, r, id, "", s.stateCommands.FailHandoff)
}

// anchorQuery reads message_id and window.
func anchorQuery(r *http.Request) (int64, int, error) {
	v := r.URL.Query().Get("message_id")
	anchor, err := strconv.ParseInt(v, 10, 64)
	if err != nil || anchor < 1 {
		return 0, 0, fmt.Errorf("%w: message_id must be a positive integer", errBadRequest)
	}
	window, err := intQuery(r, "window", 5, -1000, 1000)
	return anchor, window, err
}

func (s *Server) messagesAround(w http.ResponseWriter, r *http.Request, id sessionID) error {
	anchor, window, err := anchorQuery(r)
	if err != nil {
		return err
	}
	a, err := s.transcripts(r.Context()).MessagesAround(r.Context(), string(id), anchor, window)
	if err != nil {
		return err
	}
	return respond(w, a)
}

func (s *Server) anchoredView(w http.ResponseWriter, r *http.Request, id sessionID) error {
	anchor, window, err := anchorQuery(r)
	if err != nil {
		return err
	}
	bookend, err := intQuery(r, "bookend", 3, -1000, 1000)
	if err != nil {
		return err
	}
	keep := []string{"user", "assistant"}
	if q := r.URL.Query(); q.Has("keep_roles") {
		keep = nil // present but empty: Hermes' keep_roles=None
		if v := q.Get("keep_roles"); v != "" {
			keep = strings.Split(v, ",")
			if len(keep) > maxFilterValues {
				return fmt.Errorf("%w: more than %d keep_roles", errBadRequest, maxFilterValues)
			}
			for _, role := range keep {
				if err := checkText("keep_roles", role, maxFilterValue); err != nil {
					return err
				}
			}
		}
	}
	v, err := s.transcripts(r.Context()).AnchoredView(r.Context(), string(id), anchor, window, bookend, keep)
	if err != nil {
		return err
	}
	return respond(w, v)
}

// autoPruneRequest is POST /v1/maintenance/auto-prune (Hermes'
// maybe_auto_prune_and_vacuum).
type autoPruneRequest struct {
	RetentionDays    *int  `json:"retention_days"`
	MinIntervalHours *int  `json:"min_interval_hours"`
	Vacuum           *bool `json:"vacuum"`
}

func (q autoPruneRequest) validate() error {
	if q.RetentionDays != nil && (*q.RetentionDays < 0 || *q.RetentionDays > 100000) {
		return fmt.Errorf("%w: retention_days must be from 0 to 100000", errBadRequest)
	}
	if q.MinIntervalHours != nil && (*q.MinIntervalHours < 0 || *q.MinIntervalHours > 1000000) {
		return fmt.Errorf("%w: min_interval_hours must be from 0 to 1000000", errBadRequest)
	}
	return nil
}

func (s *Server) autoPrune(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[autoPruneRequest](r, true)
	if err != nil {
		return err
	}
	ctx := r.Context()
	retention, interval, vacuum := 90, 24, true
	if req.RetentionDays != nil {
		retention = *req.RetentionDays
	}
	if req.MinIntervalHours != nil {
		interval = *req.MinIntervalHours
	}
	if req.Vacuum != nil {
		vacuum = *req.Vacuum
	}
	type answer struct {
		Skipped  bool   `json:"skipped"`
		Pruned   int    `json:"pruned"`
		Vacuumed bool   `json:"vacuumed"`
		Error    string `json:"error,omitempty"`
	}
	if err := s.syncReadModel(ctx); err != nil {
		return err
	}
	last, err := s.lastAutoPrune(ctx)
	if err != nil {
		return err
	}
	now := s.Commands.Now()
	if !last.IsZero() && now.Sub(last) < time.Duration(interval)*time.Hour {
		return respond(w, answer{Skipped: true})
	}
	run := commands.AutoPruneRun{At: now}
	var errs []error
	if retention > 0 {
		ids, err := s.transcripts(ctx).PrunableSessions(ctx, time.Duration(retention)*24*time.Hour, "", now)
		if err != nil {
			errs = append(errs, err)
		}
		var lastPos uint64
		for _, id := range ids {
			pos, err := s.transcriptCommands.DeleteSession(ctx, commands.DeleteSession{SessionID: id, Reason: events.DeletePruned,
				CommandID: "auto_prune/" + id, Erasure: events.ErasureRetention, RequestedBy: "maybe_auto_prune_and_vacuum"})
			if errors.Is(err, commands.ErrSessionNotFound) {
				continue
			}
			if err != nil {
				errs = append(errs, err)
				break
			}
			lastPos = max(lastPos, pos)
			run.Pruned++
		}
		if run.Pruned > 0 {
			if err := s.erased(ctx, lastPos); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if vacuum && run.Pruned > 0 && len(errs) == 0 && s.Vacuum != nil {
		if err := s.Vacuum(ctx); err != nil {
			errs = append(errs, err)
		} else {
			run.Vacuumed = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		run.Error = truncateForLog(err.Error())
	}
	if err := s.Commands.RecordAutoPrune(ctx, run); err != nil {
		return err
	}
	return respond(w, answer{Pruned: run.Pruned, Vacuumed: run.Vacuumed, Error: run.Error})
}

// chatParam is the {chat_id} path parameter.
func chatParam(r *http.Request) (string, error) { return pathParam(r, "chat_id") }

func (s *Server) topicMigration(w http.ResponseWriter, r *http.Request) error {
	if _, err := decode[emptyRequest](r, true); err != nil {
		return err
	}
	if err := s.applyTopicMigration(r.Context(), commandID(r)); err != nil {
		return err
	}
	return respond(w, struct{}{})
}

// applyTopicMigration is apply_telegram_topic_migration: hermes' state.db
// always has the tables; the schema version is recorded as Hermes does,
// once.
func (s *Server) applyTopicMigration(ctx context.Context, cmdID string) error {
	if v, _, err := s.transcripts(ctx).Meta(ctx, metaTopicSchema); err != nil || v == "2" {
		return err
	}
	if cmdID != "" {
		cmdID += "/" + metaTopicSchema
	}
	pos, err := s.stateCommands.SetMeta(ctx, commands.SetMeta{Key: metaTopicSchema, Value: "2", CommandID: cmdID})
	if err != nil {
		return err
	}
	s.wrote(pos)
	return s.fresh(ctx)
}

// topicModeRequest is PUT /v1/telegram/chats/{chat_id}/topic-mode.
type topicModeRequest struct {
	UserID                    string `json:"user_id"`
	HasTopicsEnabled          *bool  `json:"has_topics_enabled"`
	AllowsUsersToCreateTopics *bool  `json:"allows_users_to_create_topics"`
}

func (q topicModeRequest) validate() error {
	if q.UserID == "" {
		return fmt.Errorf("%w: user_id is required", errBadRequest)
	}
	return checkText("user_id", q.UserID, maxSourceField)
}

func (s *Server) enableTopicMode(w http.ResponseWriter, r *http.Request) error {
	chat, err := chatParam(r)
	if err != nil {
		return err
	}
	req, err := decode[topicModeRequest](r, false)
	if err != nil {
		return err
	}
	if err := s.applyTopicMigration(r.Context(), commandID(r)); err != nil {
		return err
	}
	pos, err := s.stateCommands.EnableTopicMode(r.Context(), commands.EnableTopicMode{Mode: domain.TopicMode{ChatID: chat, UserID: req.UserID,
		HasTopicsEnabled: req.HasTopicsEnabled, AllowsUsersToCreateTopics: req.AllowsUsersToCreateTopics}, CommandID: commandID(r)})
	if err != nil {
		return err
	}
	if err := s.readAfter(r.Context(), pos); err != nil {
		return err
	}
	mode, err := s.transcripts(r.Context()).TopicMode(r.Context(), chat)
	if err != nil {
		return err
	}
	return respond(w, map[string]any{"mode": mode})
}

func (s *Server) disableTopicMode(w http.ResponseWriter, r *http.Request) error {
	chat, err := chatParam(r)
	if err != nil {
		return err
	}
	if _, err := decode[emptyRequest](r, true); err != nil {
		return err
	}
	clear := true
	if r.URL.Query().Has("clear_bindings") {
		if clear, err = boolQuery(r, "clear_bindings"); err != nil {
			return err
		}
	}
	pos, err := s.stateCommands.DisableTopicMode(r.Context(), commands.DisableTopicMode{ChatID: chat, ClearBindings: clear, CommandID: commandID(r)})
	if err != nil {
		return err
	}
	s.wrote(pos)
	return respond(w, struct{}{})
}

func (s *Server) getTopicMode(w http.ResponseWriter, r *http.Request) error {
	chat, err := chatParam(r)
	if err != nil {
		return err
	}
	user, err := textQuery(r, "user_id", maxSourceField)
	if err != nil {
		return err
	}
	mode, err := s.transcripts(r.Context()).TopicMode(r.Context(), chat)
	if err != nil {
		return err
	}
	enabled := mode != nil && mode["enabled"] == int64(1) && (user == "" || mode["user_id"] == user)
	return respond(w, map[string]any{"enabled": enabled, "mode": mode})
}

// bindTopicRequest is PUT /v1/telegram/chats/{chat_id}/topics/{thread_id}.
type bindTopicRequest struct {
	UserID      string `json:"user_id"`
	SessionKey  string `json:"session_key"`
	SessionID   string `json:"session_id"`
	ManagedMode string `json:"managed_mode"`
}

func (q bindTopicRequest) validate() error {
	for _, f := range []struct{ name, v string }{{"user_id", q.UserID}, {"session_key", q.SessionKey}} {
		if f.v == "" {
			return fmt.Errorf("%w: %s is required", errBadRequest, f.name)
		}
		if err := checkText(f.name, f.v, maxSourceField); err != nil {
			return err
		}
	}
	if err := checkText("managed_mode", q.ManagedMode, maxSourceField); err != nil {
		return err
	}
	return domain.ValidateSessionID(q.SessionID)
}

// topicParams are the chat and thread of a topic route.
func topicParams(r *http.Request) (chat, thread string, err error) {
	if chat, err = chatParam(r); err != nil {
		return "", "", err
	}
	thread, err = pathParam(r, "thread_id")
	return chat, thread, err
}

// respondTopicBinding answers the binding of a chat's thread (null when
// none).
func (s *Server) respondTopicBinding(w http.ResponseWriter, r *http.Request, chat, thread string) error {
	b, err := s.transcripts(r.Context()).TopicBinding(r.Context(), chat, thread)
	if err != nil {
		return err
	}
	return respond(w, map[string]any{"binding": b})
}

func (s *Server) bindTopic(w http.ResponseWriter, r *http.Request) error {
	chat, thread, err := topicParams(r)
	if err != nil {
		return err
	}
	req, err := decode[bindTopicRequest](r, false)
	if err != nil {
		return err
	}
	mode := req.ManagedMode
	if mode == "" {
		mode = "auto"
	}
	if err := s.applyTopicMigration(r.Context(), commandID(r)); err != nil {
		return err
	}
	pos, err := s.stateCommands.BindTopic(r.Context(), commands.BindTopic{Binding: events.TopicBound{ChatID: chat, ThreadID: thread,
		UserID: req.UserID, SessionKey: req.SessionKey, SessionID: req.SessionID, ManagedMode: mode}, CommandID: commandID(r)})
	if err != nil {
		return err
	}
	if err := s.readAfter(r.Context(), pos); err != nil {
		return err
	}
	return s.respondTopicBinding(w, r, chat, thread)
}

func (s *Server) getTopicBinding(w http.ResponseWriter, r *http.Request) error {
	chat, thread, err := topicParams(r)
	if err != nil {
		return err
	}
	return s.respondTopicBinding(w, r, chat, thread)
}

func (s *Server) listTopicBindings(w http.ResponseWriter, r *http.Request) error {
	chat, err := chatParam(r)
	if err != nil {
		return err
	}
	rows, err := s.transcripts(r.Context()).TopicBindings(r.Context(), chat)
	if err != nil {
		return err
	}
	return respond(w, map[string]any{"bindings": nonNil(rows)})
}

func (s *Server) topicBindingOfSession(w http.ResponseWriter, r *http.Request) error {
	id := r.URL.Query().Get("session_id")
	if err := domain.ValidateSessionID(id); err != nil {
		return err
	}
	b, err := s.transcripts(r.Context()).TopicBindingOfSession(r.Context(), id)
	if err != nil {
		return err
	}
	return respond(w, map[string]any{"binding": b})
}

func (s *Server) unlinkedTelegramSessions(w http.ResponseWriter, r *http.Request) error {
	user, err := textQuery(r, "user_id", maxSourceField)
	if err != nil {
		return err
	}
	if user == "" {
		return fmt.Errorf("%w: user_id is required", errBadRequest)
	}
	if _, err := textQuery(r, "chat_id", maxSourceField); err != nil {
		return err
	}
	limit, err := intQuery(r, "limit", 10, 0, 1000)
	if err != nil {
		return err
	}
	rows, err := s.transcripts(r.Context()).UnlinkedTelegramSessions(r.Context(), user, limit)
	if err != nil {
		return err
	}
	return respond(w, map[string]any{"sessions": nonNil(rows)})
}
