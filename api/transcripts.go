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

	"hermes/commands"
	"hermes/events"
	"hermes/projections/sessions"
	"hermes/projections/transcripts"
)

// TranscriptService is what the transcript and search endpoints need: the
// read model of state.db.
type TranscriptService = *transcripts.Reader

// transcriptIndex lets the transcript commands read the read models of
// their request.
type transcriptIndex struct{ s *Server }

// SessionExists answers from the read model; a session it does not know
// while it is behind this server's writes is looked up again once it has
// them (an append does not wait for the read model first: appendCurrent).
func (x transcriptIndex) SessionExists(ctx context.Context, id string) (bool, error) {
	// Asked before the lookup: the read models may catch up during it.
	behind := x.s.behind()
	ok, err := x.s.transcripts(ctx).SessionExists(ctx, id)
	if err != nil || ok || !behind {
		return ok, err
	}
	if err := x.s.freshRead(ctx); err != nil {
		return false, err
	}
	return x.s.transcripts(ctx).SessionExists(ctx, id)
}

// TitleOwner adapts the reader (ErrNotFound for a free title) to the port
// (""), or no title could ever be set.
func (x transcriptIndex) TitleOwner(ctx context.Context, title string) (string, error) {
	owner, err := x.s.transcripts(ctx).TitleOwner(ctx, title)
	if errors.Is(err, transcripts.ErrNotFound) {
		return "", nil
	}
	return owner, err
}

func (x transcriptIndex) LaneOfSession(ctx context.Context, id string) (string, error) {
	behind := x.s.behind() // before the lookup, as in SessionExists
	row, err := x.s.lanes(ctx).BySessionID(ctx, id)
	if errors.Is(err, sessions.ErrNotFound) && behind {
		// A session this server just started: see SessionExists.
		if err := x.s.freshRead(ctx); err != nil {
			return "", err
		}
		row, err = x.s.lanes(ctx).BySessionID(ctx, id)
	}
	if errors.Is(err, sessions.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return row.Lane.SessionKey, nil
}

func (x transcriptIndex) SessionTotals(ctx context.Context, id string) (commands.SessionTotals, error) {
	row, err := x.s.transcripts(ctx).Session(ctx, id)
	if err != nil {
		return commands.SessionTotals{}, err
	}
	return commands.SessionTotals{
		InputTokens: row.InputTokens, OutputTokens: row.OutputTokens, CacheReadTokens: row.CacheReadTokens,
		CacheWriteTokens: row.CacheWriteTokens, ReasoningTokens: row.ReasoningTokens, APICallCount: row.APICallCount,
		EstimatedCostUSD: deref(row.EstimatedCostUSD), ActualCostUSD: deref(row.ActualCostUSD),
	}, nil
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func (s *Server) transcriptRoutes(rt routes) {
	if !s.hasTranscripts {
		return
	}
	s.transcriptCommands = s.Commands.Transcripts(transcriptIndex{s: s})
	// The transcript commands check the read model (does the session
	// exist, who holds a title), so the writes wait for it too (current).
	session := func(h func(http.ResponseWriter, *http.Request, sessionID) error) handlerFunc {
		return s.current(withSessionID(h))
	}
	appending := func(h func(http.ResponseWriter, *http.Request, sessionID) error) handlerFunc {
		return s.appendCurrent(withSessionID(h))
	}
	rt.get("/transcripts/recent", s.recentTranscripts)
	rt.get("/transcripts/{session_id}", withSessionID(s.getTranscriptSession))
	rt.patch("/transcripts/{session_id}", session(s.patchTranscriptSession))
	rt.delete("/transcripts/{session_id}", session(s.deleteTranscript))
	rt.post("/transcripts/{session_id}/messages", appending(s.appendMessage))
	rt.get("/transcripts/{session_id}/messages", withSessionID(s.getMessages))
	rt.put("/transcripts/{session_id}/messages", session(s.rewriteMessages))
	rt.post("/transcripts/{session_id}/rewind", session(s.rewind))
	rt.put("/transcripts/{session_id}/title", session(s.setTitle))
	rt.get("/transcripts/{session_id}/lineage", withSessionID(s.lineage))
	rt.get("/transcripts/{session_id}/export", withSessionID(s.exportSession))
	rt.post("/transcripts/{session_id}/clear", session(s.clearTranscript))
	rt.post("/transcripts/{session_id}/end", session(s.endTranscript))
	rt.get("/titles/resolve", s.resolveTitle)
	rt.get("/titles/next", s.nextTitle)
	rt.get("/search", s.search)
	rt.get("/export", s.exportAll)
	rt.get("/stats/tokens", s.tokenStats)
	rt.post("/maintenance/prune-sessions", s.pruneSessions)
	rt.post("/erasure", s.forget)
	rt.get("/erasure/status", s.purgeStatus)
	s.sessionDBRoutes(rt)
}

// erased waits until the read models have the erasure at pos and purges
// the erased content from every file (Deps.Purge): an erasure is answered
// only once its content is unrecoverable.
//
// It waits as long as the work needs, not the 10 s of a read: the purge
// waits for the read models itself, and a big erasure (thousands of
// messages) under load takes longer; answering 503 then would say nothing
// of an erasure that is committed. GET /v1/erasure/status shows the
// purge's progress.
func (s *Server) erased(ctx context.Context, pos uint64) error {
	if s.Purge == nil {
		return s.readAfter(ctx, pos)
	}
	s.wrote(pos)
	s.pauseModels(ctx)
	return s.Purge(ctx)
}

// PurgeStatus is GET /v1/erasure/status: the purges that make erasures
// unrecoverable from every file.
type PurgeStatus struct {
	Purging bool `json:"purging"`
	// Head is the log's head now.
	Head uint64 `json:"head"`
	// Target is the head when the running or last purge started.
	Target uint64 `json:"target_position"`
	// PurgedThrough is the target of the last purge that completed.
	PurgedThrough uint64     `json:"purged_through"`
	StartedAt     *time.Time `json:"started_at"`
	FinishedAt    *time.Time `json:"finished_at"`
	LastError     string     `json:"last_error,omitempty"`
}

func (s *Server) purgeStatus(w http.ResponseWriter, r *http.Request) error {
	head, err := s.Store.Head(r.Context())
	if err != nil {
		return err
	}
	if s.PurgeStatus == nil {
		// Without a purge, an erasure is complete once the read models
		// have it, which the read-your-writes wait of this route saw.
		return respond(w, PurgeStatus{Head: head, Target: head, PurgedThrough: head})
	}
	st := s.PurgeStatus()
	st.Head = head
	return respond(w, st)
}

// forget is POST /v1/erasure: forget a person.
func (s *Server) forget(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[erasureRequest](r, false)
	if err != nil {
		return err
	}
	if err := s.syncReadModel(r.Context()); err != nil {
		return err
	}
	rep, err := s.Commands.Forget(r.Context(), req.command(commandID(r)))
	if err != nil {
		return err
	}
	if err := s.erased(r.Context(), rep.Position); err != nil {
		return err
	}
	return respond(w, map[string]any{"erasure_id": rep.ErasureID, "erased": rep})
}

// syncReadModel is read-your-writes for the transcript commands' checks:
// it waits for everything in the log, not only this server's writes.
func (s *Server) syncReadModel(ctx context.Context) error {
	head, err := s.Store.Head(ctx)
	if err != nil {
		return err
	}
	s.wrote(head)
	return s.fresh(ctx)
}

// readAfter records a write at pos and waits until the read models have
// it, for a write answered from the read model.
func (s *Server) readAfter(ctx context.Context, pos uint64) error {
	s.wrote(pos)
	return s.fresh(ctx)
}

func (s *Server) getTranscriptSession(w http.ResponseWriter, r *http.Request, id sessionID) error {
	row, err := s.transcripts(r.Context()).Session(r.Context(), string(id))
	if err != nil {
		return err
	}
	return respond(w, row)
}

func (s *Server) appendMessage(w http.ResponseWriter, r *http.Request, id sessionID) error {
	req, err := decode[appendMessageRequest](r, false)
	if err != nil {
		return err
	}
	res, err := s.transcriptCommands.AppendMessage(r.Context(), commands.AppendMessage{
		SessionID: string(id), Message: req.event(), TurnID: req.TurnID, CommandID: commandID(r),
	})
	if err != nil {
		return err
	}
	ids, err := s.appendedIDs(r.Context(), res)
	if err != nil {
		return err
	}
	return respond(w, struct {
		ID       int64  `json:"id"`
		Position uint64 `json:"position"`
	}{ids.FirstID, res.MessagePosition})
}

// appendCurrent is current for the append, the path every message takes:
// it does not wait for the read models' transaction. The append command
// asks the read models whether the session exists and which lane it is
// on; while they are behind this server's writes, a session they do not
// know is looked up again once they have them (transcriptIndex), and a
// session they still know is trusted unless an event that deletes
// sessions was received and not applied yet (then it waits, as current).
// Without Deps.Assigned, or room on the disk (Deps.RoomToAck), it is
// current.
func (s *Server) appendCurrent(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !s.acksEarly() {
			return s.current(h)(w, r)
		}
		if err := s.waitAssigned(r.Context(), s.written.Load()); err != nil {
			return err
		}
		if pos, pending := s.Runner.PendingBarrier(); pending {
			if err := s.freshAt(r.Context(), pos); err != nil {
				return err
			}
		}
		return h(w, r)
	}
}

// assignWait bounds how long an append waits for the runner to number an
// event.
const assignWait = 10 * time.Second

// waitAssigned waits, up to assignWait, until the runner has numbered the
// event at pos. The bound's timer is made only when it has not yet: the
// wait before an append almost never waits.
func (s *Server) waitAssigned(ctx context.Context, pos uint64) error {
	if s.Runner.Assigned(pos) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, assignWait)
	defer cancel()
	s.pauseModels(ctx)
	if err := s.Runner.WaitAssigned(ctx, pos); err != nil {
		return fmt.Errorf("%w: read model: %v", errUnavailable, err)
	}
	return nil
}

// AssignedMessages gives the ids numbered for a message event the read
// model has not committed yet (transcripts.Projection).
type AssignedMessages interface {
	AssignedMessages(position uint64) (transcripts.MessageRange, bool)
}

// appendedIDs returns the row ids of an appended message: the ids the
// read model numbered when it received the event (Deps.Assigned), else
// (not numbered: a read model swapped in meanwhile, an import before it)
// the ids in the file once the read model has the position. Either way,
// later reads of this server wait for the read model (written).
func (s *Server) appendedIDs(ctx context.Context, res commands.Appended) (transcripts.MessageRange, error) {
	s.wrote(res.Position)
	if s.acksEarly() {
		if err := s.waitAssigned(ctx, res.MessagePosition); err != nil {
			return transcripts.MessageRange{}, err
		}
		if ids, ok := s.Assigned.AssignedMessages(res.MessagePosition); ok {
			return ids, nil
		}
	}
	if err := s.fresh(ctx); err != nil {
		return transcripts.MessageRange{}, err
	}
	return s.transcripts(ctx).MessageIDs(ctx, res.MessagePosition)
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

func (s *Server) getMessages(w http.ResponseWriter, r *http.Request, id sessionID) error {
	if _, err := s.transcripts(r.Context()).Session(r.Context(), string(id)); err != nil {
		return err
	}
	format := r.URL.Query().Get("format")
	ancestors, err := boolQuery(r, "include_ancestors")
	if err != nil {
		return err
	}
	inactive, err := boolQuery(r, "include_inactive")
	if err != nil {
		return err
	}
	switch format {
	case "conversation":
		msgs, err := s.transcripts(r.Context()).Conversation(r.Context(), string(id), ancestors)
		if err != nil {
			return err
		}
		return respond(w, struct {
			Messages []transcripts.ChatMessage `json:"messages"`
		}{nonNil(msgs)})
	case "", "raw":
		msgs, err := s.transcripts(r.Context()).Messages(r.Context(), string(id), inactive)
		if err != nil {
			return err
		}
		return respond(w, struct {
			Messages []transcripts.Message `json:"messages"`
		}{nonNil(msgs)})
	default:
		return fmt.Errorf("%w: format must be raw or conversation", errBadRequest)
	}
}

func (s *Server) rewriteMessages(w http.ResponseWriter, r *http.Request, id sessionID) error {
	req, err := decode[rewriteRequest](r, false)
	if err != nil {
		return err
	}
	pos, err := s.transcriptCommands.RewriteTranscript(r.Context(), commands.RewriteTranscript{
		SessionID: string(id), Messages: req.events(), CommandID: commandID(r),
	})
	if err != nil {
		return err
	}
	if err := s.readAfter(r.Context(), pos); err != nil {
		return err
	}
	ids := []int64{}
	if rng, err := s.transcripts(r.Context()).MessageIDs(r.Context(), pos); err == nil {
		ids = rng.IDs()
	}
	return respond(w, struct {
		IDs []int64 `json:"ids"`
	}{ids})
}

func (s *Server) rewind(w http.ResponseWriter, r *http.Request, id sessionID) error {
	req, err := decode[rewindRequest](r, true)
	if err != nil {
		return err
	}
	if err := s.syncReadModel(r.Context()); err != nil {
		return err
	}
	if _, err := s.transcripts(r.Context()).Session(r.Context(), string(id)); err != nil {
		return err
	}
	target, err := s.transcripts(r.Context()).RewindTarget(r.Context(), string(id), req.n())
	if errors.Is(err, transcripts.ErrNoUserMessages) {
		return fmt.Errorf("%w: session %s has no user message to rewind to", errNotFound, id)
	}
	if err != nil {
		return err
	}
	active, err := s.transcripts(r.Context()).Messages(r.Context(), string(id), false)
	if err != nil {
		return err
	}
	flipped := 0
	for _, m := range active {
		if m.ID >= target.TargetID {
			flipped++
		}
	}
	pos, err := s.transcriptCommands.Rewind(r.Context(), commands.Rewind{
		SessionID: string(id), TargetMessageID: target.TargetID, TurnsUndone: target.TurnsUndone, CommandID: commandID(r),
	})
	if err != nil {
		return err
	}
	s.wrote(pos)
	return respond(w, struct {
		RewoundCount int    `json:"rewound_count"`
		TurnsUndone  int    `json:"turns_undone"`
		TargetText   string `json:"target_text"`
		TargetID     int64  `json:"target_id"`
	}{flipped, target.TurnsUndone, target.TargetText, target.TargetID})
}

func (s *Server) setTitle(w http.ResponseWriter, r *http.Request, id sessionID) error {
	req, err := decode[titleRequest](r, false)
	if err != nil {
		return err
	}
	title, err := transcripts.SanitizeTitle(*req.Title)
	if err != nil {
		return err
	}
	pos, err := s.transcriptCommands.SetTitle(r.Context(), commands.SetTitle{
		SessionID: string(id), Title: title, Sync: s.syncReadModel, CommandID: commandID(r),
	})
	if err != nil {
		return err
	}
	s.wrote(pos)
	return respond(w, struct {
		SessionID string  `json:"session_id"`
		Title     *string `json:"title"`
	}{string(id), nullable(title)})
}

func (s *Server) patchTranscriptSession(w http.ResponseWriter, r *http.Request, id sessionID) error {
	req, err := decode[metadataRequest](r, false)
	if err != nil {
		return err
	}
	c := req.command(id, commandID(r))
	c.Sync = s.syncReadModel
	pos, err := s.transcriptCommands.UpdateMetadata(r.Context(), c)
	if err != nil {
		return err
	}
	if err := s.readAfter(r.Context(), pos); err != nil {
		return err
	}
	return s.getTranscriptSession(w, r, id)
}

func (s *Server) deleteTranscript(w http.ResponseWriter, r *http.Request, id sessionID) error {
	if _, err := decode[emptyRequest](r, true); err != nil {
		return err
	}
	pos, err := s.transcriptCommands.DeleteSession(r.Context(), commands.DeleteSession{
		SessionID: string(id), Reason: events.DeleteRequested, CommandID: commandID(r),
	})
	if err == nil {
		err = s.erased(r.Context(), pos)
	}
	return s.transcriptDone(w, id, pos, err, "deleted")
}

func (s *Server) clearTranscript(w http.ResponseWriter, r *http.Request, id sessionID) error {
	if _, err := decode[emptyRequest](r, true); err != nil {
		return err
	}
	pos, err := s.transcriptCommands.ClearTranscript(r.Context(), commands.ClearTranscript{SessionID: string(id), CommandID: commandID(r)})
	if err == nil {
		err = s.erased(r.Context(), pos)
	}
	return s.transcriptDone(w, id, pos, err, "cleared")
}

func (s *Server) endTranscript(w http.ResponseWriter, r *http.Request, id sessionID) error {
	req, err := decode[endRequest](r, false)
	if err != nil {
		return err
	}
	pos, err := s.transcriptCommands.EndSession(r.Context(), commands.EndSession{SessionID: string(id), Reason: req.Reason, CommandID: commandID(r)})
	return s.transcriptDone(w, id, pos, err, "ended")
}

// transcriptDone records a transcript command's append and answers
// {"session_id": id, done: true}.
func (s *Server) transcriptDone(w http.ResponseWriter, id sessionID, pos uint64, err error, done string) error {
	if err != nil {
		return err
	}
	s.wrote(pos)
	return respond(w, map[string]any{"session_id": string(id), done: true})
}

func (s *Server) resolveTitle(w http.ResponseWriter, r *http.Request) error {
	title, err := titleQuery(r)
	if err != nil {
		return err
	}
	id, err := s.transcripts(r.Context()).ResolveTitle(r.Context(), title)
	if err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("%w: no session titled %q", errNotFound, title)
	}
	return respond(w, map[string]string{"session_id": id})
}

func (s *Server) nextTitle(w http.ResponseWriter, r *http.Request) error {
	title, err := titleQuery(r)
	if err != nil {
		return err
	}
	next, err := s.transcripts(r.Context()).NextTitle(r.Context(), title)
	if err != nil {
		return err
	}
	return respond(w, map[string]string{"title": next})
}

// titleQuery is the required title parameter of /v1/titles, bounded like
// a title sent in a body (a longer one cannot be held by any session, and
// SQLite refuses a LIKE pattern past 50,000 bytes).
func titleQuery(r *http.Request) (string, error) {
	title, err := textQuery(r, "title", maxTitleBytes)
	if err == nil && title == "" {
		err = fmt.Errorf("%w: title is required", errBadRequest)
	}
	return title, err
}

// textQuery is a text parameter: at most max bytes of valid UTF-8 without
// NUL ("" when absent).
func textQuery(r *http.Request, name string, max int) (string, error) {
	v := r.URL.Query().Get(name)
	return v, checkText(name, v, max)
}

// Bounds of the search filters: how many values, and each value's length.
const (
	maxFilterValues = 100
	maxFilterValue  = maxSourceField
)

// listQuery reads a filter given as repeated parameters or a comma list;
// absent is nil (no filter), present but empty is an empty filter.
func listQuery(r *http.Request, name string) ([]string, error) {
	vals, ok := r.URL.Query()[name]
	if !ok {
		return nil, nil
	}
	out := []string{}
	for _, v := range vals {
		for part := range strings.SplitSeq(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				if err := checkText(name, part, maxFilterValue); err != nil {
					return nil, err
				}
				out = append(out, part)
			}
		}
		if len(out) > maxFilterValues {
			return nil, fmt.Errorf("%w: more than %d values of %s", errBadRequest, maxFilterValues, name)
		}
	}
	return out, nil
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

// maxSearchQuery bounds q of a search.
const maxSearchQuery = 4096

func (s *Server) search(w http.ResponseWriter, r *http.Request) error {
	q, err := textQuery(r, "q", maxSearchQuery)
	if err != nil {
		return err
	}
	limit, err := intQuery(r, "limit", 20, 1, 500)
	if err != nil {
		return err
	}
	offset, err := intQuery(r, "offset", 0, 0, 1_000_000)
	if err != nil {
		return err
	}
	order := r.URL.Query().Get("order")
	switch order {
	case "", "rank":
		order = transcripts.OrderRank
	case transcripts.OrderRecent:
	default:
		return fmt.Errorf("%w: order must be rank or recent", errBadRequest)
	}
	var filters [3][]string
	for i, name := range []string{"source", "exclude_source", "role"} {
		if filters[i], err = listQuery(r, name); err != nil {
			return err
		}
	}
	results, err := s.transcripts(r.Context()).Search(r.Context(), transcripts.SearchQuery{
		Query: q, Sources: filters[0], ExcludeSources: filters[1], Roles: filters[2], Limit: limit, Offset: offset,
		Order: order,
	})
	if err != nil {
		return err
	}
	return respond(w, struct {
		Results []transcripts.SearchResult `json:"results"`
	}{nonNil(results)})
}

func (s *Server) lineage(w http.ResponseWriter, r *http.Request, id sessionID) error {
	l, err := s.transcripts(r.Context()).Lineage(r.Context(), string(id))
	if err != nil {
		return err
	}
	return respond(w, l)
}

func (s *Server) recentTranscripts(w http.ResponseWriter, r *http.Request) error {
	limit, err := intQuery(r, "limit", 20, 1, 1000)
	if err != nil {
		return err
	}
	rows, err := s.transcripts(r.Context()).Recent(r.Context(), limit)
	if err != nil {
		return err
	}
	return respond(w, struct {
		Sessions []transcripts.RecentSession `json:"sessions"`
	}{nonNil(rows)})
}

func (s *Server) exportSession(w http.ResponseWriter, r *http.Request, id sessionID) error {
	out, err := s.transcripts(r.Context()).ExportSession(r.Context(), string(id))
	if err != nil {
		return err
	}
	return respond(w, out)
}

func (s *Server) exportAll(w http.ResponseWriter, r *http.Request) error {
	source, err := textQuery(r, "source", maxSourceField)
	if err != nil {
		return err
	}
	out, err := s.transcripts(r.Context()).ExportAll(r.Context(), source)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.Encode(struct {
		Sessions []transcripts.SessionExport `json:"sessions"`
	}{nonNil(out)})
	return nil
}

func (s *Server) tokenStats(w http.ResponseWriter, r *http.Request) error {
	stats, err := s.transcripts(r.Context()).TokenStats(r.Context())
	if err != nil {
		return err
	}
	return respond(w, struct {
		Models []transcripts.ModelUsage `json:"models"`
	}{nonNil(stats)})
}

func (s *Server) pruneSessions(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[pruneSessionsRequest](r, false)
	if err != nil {
		return err
	}
	if err := s.syncReadModel(r.Context()); err != nil {
		return err
	}
	ids, err := s.transcripts(r.Context()).PrunableSessions(r.Context(), time.Duration(*req.OlderThanDays)*24*time.Hour, req.Source, s.Commands.Now())
	if err != nil {
		return err
	}
	deleted := 0
	var last uint64
	for _, id := range ids {
		pos, err := s.transcriptCommands.DeleteSession(r.Context(), commands.DeleteSession{SessionID: id, Reason: events.DeletePruned})
		if errors.Is(err, commands.ErrSessionNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		last = max(last, pos)
		deleted++
	}
	if deleted > 0 {
		if err := s.erased(r.Context(), last); err != nil {
			return err
		}
	}
	return respond(w, map[string]int{"deleted": deleted})
}
