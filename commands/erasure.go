package commands

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"hermes/domain"
	"hermes/events"
)

// DeleteErased is the reason of the transcript.deleted a person erasure
// appends for each transcript of the person's lanes.
const DeleteErased = "erased"

// Forget erases a person (POST /v1/erasure, hermes forget): every
// transcript of every lane keyed on the person, and the person's names and
// ids in the origins and queued items of those lanes (docs/ERASURE.md).
type Forget struct {
	Platform  string
	UserID    string
	UserIDAlt string
	// Reason and RequestedBy are recorded with the erasure (not content).
	Reason      string
	RequestedBy string
	// CommandID makes a retried request the same erasure; empty: a new one.
	CommandID string
}

// ForgetReport is what a person erasure erased.
type ForgetReport struct {
	ErasureID   string `json:"erasure_id"`
	Lanes       int    `json:"lanes"`
	Transcripts int    `json:"transcripts"`
	QueuedItems int    `json:"queued_items"`
	Origins     int    `json:"origins"`
	// Position is the last position the erasure appended.
	Position uint64 `json:"-"`
}

func (c Forget) validate() error {
	switch {
	case c.Platform == "":
		return fmt.Errorf("%w: platform is required", domain.ErrInvalidArgument)
	case c.UserID == "" && c.UserIDAlt == "":
		return fmt.Errorf("%w: user_id or user_id_alt is required", domain.ErrInvalidArgument)
	}
	return nil
}

// Forget appends the durable intent (erasure.requested, the only event
// that names the person), erases each matching lane and its transcripts,
// then appends erasure.completed, which erases the intent's ids. Every
// append has ids derived from the erasure id, so running it again (a
// retried request, or ResumeErasures after a crash) finishes the same
// erasure without doing anything twice.
func (h *Handler) Forget(ctx context.Context, c Forget) (ForgetReport, error) {
	if err := c.validate(); err != nil {
		return ForgetReport{}, err
	}
	if c.Reason == "" {
		c.Reason = events.ErasurePerson
	}
	erasureID := "er_" + h.entropy() + h.entropy()
	if c.CommandID != "" {
		erasureID = "er_" + eventID(c.CommandID, events.ErasureStream, 0)[:16]
	}
	req := events.ErasureRequested{ErasureID: erasureID, Platform: c.Platform, UserID: c.UserID, UserIDAlt: c.UserIDAlt,
		Reason: c.Reason, RequestedBy: c.RequestedBy, At: h.now()}
	if _, err := h.appendTo(ctx, events.ErasureStream, "forget/"+erasureID, "request", req); err != nil {
		return ForgetReport{}, err
	}
	return h.runErasure(ctx, req)
}

// ResumeErasures finishes the person erasures whose intent is on the log
// and whose completion is not (a crash in the middle): run at start-up,
// before serving. It returns how many it finished.
func (h *Handler) ResumeErasures(ctx context.Context) (int, error) {
	envs, err := readAll(ctx, h.store, events.ErasureStream)
	if err != nil || len(envs) == 0 {
		return 0, err
	}
	done := map[string]bool{}
	for _, env := range envs {
		if e, ok := env.Event.(events.ErasureCompleted); ok {
			done[e.ErasureID] = true
		}
	}
	n := 0
	for _, env := range envs {
		req, ok := env.Event.(events.ErasureRequested)
		if !ok || done[req.ErasureID] {
			continue
		}
		if _, err := h.runErasure(ctx, req); err != nil {
			return n, fmt.Errorf("resume erasure %s: %w", req.ErasureID, err)
		}
		n++
	}
	return n, nil
}

func (h *Handler) runErasure(ctx context.Context, req events.ErasureRequested) (ForgetReport, error) {
	rep := ForgetReport{ErasureID: req.ErasureID}
	if h.directory == nil {
		return rep, errors.New("forget: no lane directory")
	}
	keys, err := h.directory.SessionKeys(ctx)
	if err != nil {
		return rep, fmt.Errorf("forget: list lanes: %w", err)
	}
	commandID := "forget/" + req.ErasureID
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		match, err := h.personLane(ctx, key, req)
		if err != nil {
			return rep, err
		}
		if match.origins == 0 {
			continue
		}
		rep.Lanes++
		rep.Origins += match.origins
		erasedTranscripts := []string{}
		if match.keyed {
			rep.QueuedItems += match.queued
			for _, sid := range match.sessions {
				pos, erased, err := h.eraseTranscriptOf(ctx, sid, req, commandID)
				if err != nil {
					return rep, err
				}
				if erased {
					rep.Transcripts++
					erasedTranscripts = append(erasedTranscripts, sid)
				}
				rep.Position = max(rep.Position, pos)
			}
		}
		erasure := events.LaneErased{ErasureID: req.ErasureID, QueueTexts: match.keyed, Sessions: match.sessions,
			Transcripts: erasedTranscripts, Reason: req.Reason, RequestedBy: req.RequestedBy, At: h.now()}
		res, err := h.execute(ctx, key, "forget", commandID, func(domain.Lane, time.Time) ([]events.Event, error) {
			return []events.Event{erasure}, nil
		})
		if err != nil {
			return rep, err
		}
		rep.Position = max(rep.Position, res.Position)
		for _, chat := range match.chats {
			pos, err := h.eraseTopicsOf(ctx, chat, req, commandID)
			if err != nil {
				return rep, err
			}
			rep.Position = max(rep.Position, pos)
		}
	}
	done := events.ErasureCompleted{ErasureID: req.ErasureID, Lanes: rep.Lanes, Transcripts: rep.Transcripts,
		QueuedItems: rep.QueuedItems, Origins: rep.Origins, At: h.now()}
	res, err := h.appendTo(ctx, events.ErasureStream, commandID, "complete", done)
	if err != nil {
		return rep, err
	}
	rep.Position = max(rep.Position, res.LastPosition())
	return rep, nil
}

// personMatch is what a lane's history says about a person.
type personMatch struct {
	origins  int  // origins naming the person
	keyed    bool // the lane's key is built on the person (a DM, an isolated group lane)
	sessions []string
	queued   int
	// chats are the Telegram chats of the origins naming the person (their
	// topic streams name the person's user id).
	chats []string
}

func (h *Handler) personLane(ctx context.Context, key string, req events.ErasureRequested) (personMatch, error) {
	envs, err := readAll(ctx, h.store, events.LaneStream(key))
	if err != nil {
		return personMatch{}, fmt.Errorf("forget: read lane %s: %w", key, err)
	}
	var m personMatch
	seen := map[string]bool{}
	addSession := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			m.sessions = append(m.sessions, id)
		}
	}
	for _, env := range envs {
		var o events.Source
		switch e := env.Event.(type) {
		case events.SessionCreated:
			o = e.Origin
			addSession(e.SessionID)
		case events.SessionAutoReset:
			o = e.Origin
			addSession(e.SessionID)
		case events.SessionReset:
			addSession(e.SessionID)
		case events.LaneImported:
			o = e.Origin
			addSession(e.SessionID)
		case events.QueueItemAdded:
			m.queued++
			continue
		default:
			continue
		}
		if !namesPerson(o, req) {
			continue
		}
		if o.Platform == "telegram" && o.ChatID != "" && !slices.Contains(m.chats, o.ChatID) {
			m.chats = append(m.chats, o.ChatID)
		}
		m.origins++
		participant := o.UserIDAlt
		if participant == "" {
			participant = o.UserID
		}
		if o.ChatType == domain.ChatDM || (participant != "" && strings.HasSuffix(key, ":"+participant)) {
			m.keyed = true
		}
	}
	if !m.keyed {
		m.queued = 0
	}
	return m, nil
}

func namesPerson(o events.Source, req events.ErasureRequested) bool {
	if o.Platform != req.Platform {
		return false
	}
	for _, id := range []string{req.UserID, req.UserIDAlt} {
		if id != "" && (o.UserID == id || o.UserIDAlt == id) {
			return true
		}
	}
	return false
}

// eraseTranscriptOf deletes and erases one transcript of a forgotten lane,
// if its stream exists; an already erased one is erased again (no-op).
func (h *Handler) eraseTranscriptOf(ctx context.Context, sessionID string, req events.ErasureRequested, commandID string) (uint64, bool, error) {
	stream := events.TranscriptStream(sessionID)
	if _, err := h.store.ReadStream(ctx, stream, 1, 1, events.Forwards); isNotFound(err) {
		return 0, false, nil
	} else if err != nil {
		return 0, false, fmt.Errorf("forget: read %s: %w", stream, err)
	}
	h.sessions.deleted(sessionID)
	now := h.now()
	res, err := h.appendTo(ctx, stream, commandID, "erase_transcript",
		events.TranscriptDeleted{SessionID: sessionID, Reason: DeleteErased, At: now},
		events.TranscriptErased{SessionID: sessionID, Scope: events.EraseTranscript, Reason: req.Reason,
			RequestedBy: req.RequestedBy, ErasureID: req.ErasureID, At: now})
	if err != nil {
		return 0, false, err
	}
	return res.LastPosition(), true, nil
}

// eraseTopicsOf erases the person's user id from a Telegram chat's topic
// stream (topic mode, bindings), if the chat has one.
func (h *Handler) eraseTopicsOf(ctx context.Context, chatID string, req events.ErasureRequested, commandID string) (uint64, error) {
	stream := events.TelegramStream(chatID)
	if _, err := h.store.ReadStream(ctx, stream, 1, 1, events.Forwards); isNotFound(err) {
		return 0, nil
	} else if err != nil {
		return 0, fmt.Errorf("forget: read %s: %w", stream, err)
	}
	res, err := h.appendTo(ctx, stream, commandID, "erase_topics", events.TopicsErased{ChatID: chatID, ErasureID: req.ErasureID,
		Reason: req.Reason, RequestedBy: req.RequestedBy, At: h.now()})
	if err != nil {
		return 0, err
	}
	return res.LastPosition(), nil
}

// appendTo appends es to stream with ids derived from commandID, whatever
// the stream's version (a retry de-duplicates).
func (h *Handler) appendTo(ctx context.Context, stream, commandID, command string, es ...events.Event) (events.AppendResult, error) {
	proposed := make([]events.Proposed, len(es))
	for i, e := range es {
		proposed[i] = events.Proposed{
			ID:       eventID(commandID+"/"+command, stream, i),
			Event:    e,
			Metadata: events.Metadata{SchemaVersion: events.SchemaVersionOf(e.EventType()), Command: command, CommandID: commandID},
		}
	}
	res, err := h.store.Append(ctx, stream, events.AnyVersion(), proposed)
	if err != nil {
		return events.AppendResult{}, fmt.Errorf("%s %s: %w", command, stream, err)
	}
	return res, nil
}

// readAll reads a whole stream (none when it does not exist).
func readAll(ctx context.Context, log streamReader, stream string) ([]events.Envelope, error) {
	const page = 1024
	var out []events.Envelope
	for from := uint64(1); ; {
		envs, err := log.ReadStream(ctx, stream, from, page, events.Forwards)
		if isNotFound(err) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, envs...)
		if len(envs) < page {
			return out, nil
		}
		from = envs[len(envs)-1].Version + 1
	}
}
