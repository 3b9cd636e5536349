package api

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"hermes/commands"
	"hermes/domain"
)

// ContextSettings are the configured inputs of the session context prompt:
// connected platforms, home channels, the hermes home shown for local
// delivery, privacy.redact_pii and the plugin platforms flagged pii_safe.
// The zero value lists no platform but local and redacts nothing.
type ContextSettings = domain.ContextSettings

// contextRoutes serves the session context prompt and reset notices.
func (s *Server) contextRoutes(rt routes) {
	rt.get("/sessions/{key}/context", withKey(s.sessionContext))
	rt.post("/sessions/{key}/notice/ack", withKey(s.acknowledgeNotice))
}

// contextResponse is the answer of GET /v1/sessions/{key}/context.
type contextResponse struct {
	SessionKey string `json:"session_key"`
	SessionID  string `json:"session_id"`
	// Prompt is the "## Current Session Context" section of the system
	// prompt. It is the same for every message of the lane, so it caches.
	Prompt string `json:"prompt"`
	// Notice is the user notice of a pending auto-reset ("◐ Session
	// automatically reset (…)"), null when none is due.
	Notice *string `json:"notice"`
	// Note is the system note(s) for the agent's next turn, null when none:
	// the context note of a pending auto-reset (Hermes, Era B, puts it in
	// front of the prompt, note + "\n\n" + prompt), then the resume
	// recovery note or the pending-tool-output note, joined by a blank line.
	Note *string `json:"note"`
	// Message is the incoming message as the agent receives it: the sender
	// prefix of shared sessions, the back-fill block, and the recovery or
	// pending-tool-output note in front.
	Message string `json:"message"`
	// ResetReason is the auto-reset whose notice and context note are
	// pending: deliver them, then POST notice/ack. Null when nothing is
	// pending.
	ResetReason *string `json:"reset_reason"`
	// Version is the lane's stream version the answer was computed at.
	Version uint64 `json:"version"`
}

// sessionContext answers GET /v1/sessions/{key}/context: what the agent and
// the user are told about the lane before its next turn. It changes
// nothing: the pending notice stays pending until POST notice/ack, so a
// crash between reading and delivering it loses nothing.
//
// Query parameters (all optional):
//   - message: the incoming message text; absent or empty is the startup
//     auto-resume turn (the recovery note then asks to report the restore,
//     or to continue the task on webhook and api_server).
//   - sender: the display name of the message's author, used for the
//     "[name] " prefix in shared multi-user sessions; default the lane
//     origin's user_name.
//   - channel_context: a back-fill block of recent channel messages, put
//     before "[New message]" and never prefixed.
func (s *Server) sessionContext(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	q := r.URL.Query()
	message, channelContext := q.Get("message"), q.Get("channel_context")
	lane, version, err := s.Commands.Lane(r.Context(), string(key))
	if err != nil {
		return err
	}
	if !lane.Exists() {
		return fmt.Errorf("%w: %s", domain.ErrLaneNotFound, key)
	}
	tail, err := s.transcriptTail(r.Context(), lane.SessionID)
	if err != nil {
		return err
	}

	cfg := s.Commands.Config()
	sender := lane.Origin
	if q.Has("sender") {
		sender.UserName = q.Get("sender")
	}
	inbound := domain.InboundText(message, sender, cfg.Keys, channelContext)
	turn := lane.TurnNote(inbound, tail, cfg.ResumeFreshness, s.Commands.Now())

	out := contextResponse{
		SessionKey: string(key),
		SessionID:  lane.SessionID,
		Prompt:     domain.SessionContextPrompt(lane.Origin, cfg.Keys, s.Context),
		Message:    turn.Message,
		Version:    version,
	}
	var notes []string
	if reset, ok := s.Commands.PendingResetNotice(lane); ok {
		out.Notice = nullable(reset.Notice)
		out.ResetReason = nullable(reset.Reason)
		notes = append(notes, reset.Note)
	}
	if turn.Note != "" {
		notes = append(notes, turn.Note)
	}
	out.Note = nullable(strings.Join(notes, "\n\n"))
	return respond(w, out)
}

// transcriptTail reads the last replayed row of a session's transcript
// (role neither session_meta nor system). Without a transcript read model
// the tail is unknown, which counts as fresh and not ending on tool output.
// The read model is current: the route is a read (routes.get).
func (s *Server) transcriptTail(ctx context.Context, sessionID string) (domain.TranscriptTail, error) {
	if !s.hasTranscripts {
		return domain.TranscriptTail{}, nil
	}
	msgs, err := s.transcripts(ctx).Messages(ctx, sessionID, false)
	if err != nil {
		return domain.TranscriptTail{}, err
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role == "" || m.Role == "session_meta" || m.Role == "system" {
			continue
		}
		return domain.TranscriptTail{LastAt: epochTime(m.Timestamp), LastRole: m.Role}, nil
	}
	return domain.TranscriptTail{}, nil
}

// epochTime converts a transcript timestamp (seconds since the epoch) to a
// time.
func epochTime(sec float64) time.Time {
	whole, frac := math.Modf(sec)
	return time.Unix(int64(whole), int64(math.Round(frac*1e9))).UTC()
}

// acknowledgeNotice answers POST /v1/sessions/{key}/notice/ack with the
// entry: the pending auto-reset notice and context note were delivered and
// are consumed (was_auto_reset and auto_reset_reason cleared). Idempotent:
// with nothing pending it appends nothing. The optional body
// {"session_id": "..."} acknowledges only the notice of that session, so an
// acknowledgement that races a newer reset leaves the newer notice pending.
func (s *Server) acknowledgeNotice(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	req, err := decode[ackNoticeRequest](r, true)
	if err != nil {
		return err
	}
	res, err := s.Commands.AcknowledgeNotice(r.Context(), commands.AcknowledgeNotice{Key: string(key), SessionID: req.SessionID, CommandID: commandID(r)})
	return s.laneDone(w, res, err)
}
