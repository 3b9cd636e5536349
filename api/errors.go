package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"unicode/utf8"

	"hermes/commands"
	"hermes/domain"
	"hermes/events"
	"hermes/projections"
	"hermes/projections/sessions"
	"hermes/projections/transcripts"
)

// Error codes of the API contract.
const (
	CodeInvalidArgument = "invalid_argument"
	CodeUnauthorized    = "unauthorized"
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
	// CodeBusy (409): a turn is open on the lane; the message waits (the
	// gateway queues it) until that turn ends.
	CodeBusy = "busy"
	// CodeTurnNotOpen (409): a write naming a turn that is no longer the
	// lane's open turn (it ended, or its node's run was adopted); nothing
	// was appended.
	CodeTurnNotOpen     = "turn_not_open"
	CodePayloadTooLarge = "payload_too_large"
	CodeUnavailable     = "unavailable"
	CodeInternal        = "internal"
	// CodeInsufficientStorage (507): the disk is full or refuses writes;
	// nothing was appended, retry once space returns.
	CodeInsufficientStorage = "insufficient_storage"
)

// Error codes of the browser rules (browser.go).
const (
	CodeForbidden            = "forbidden"              // 403: a foreign Host or a cross-origin request
	CodeUnsupportedMediaType = "unsupported_media_type" // 415: a body that is not application/json
)

// Errors of the browser rules (browser.go).
var (
	errForbidden            = errors.New("forbidden")
	errUnsupportedMediaType = errors.New("unsupported media type")
)

// Errors raised by the HTTP layer itself.
var (
	errBadRequest   = errors.New("bad request")
	errUnauthorized = errors.New("missing or wrong bearer token")
	errTooLarge     = errors.New("request body too large")
	errDraining     = errors.New("hermes is draining: no new turns are accepted")
	errNotFound     = errors.New("not found")
	errConflict     = errors.New("conflict")
	errUnavailable  = errors.New("unavailable")
)

// ErrorBody is the shape of every error answer.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// statusOf maps an error to its status and code: the one place where that
// happens.
func statusOf(err error) (int, string) {
	switch {
	case errors.Is(err, errUnauthorized):
		return http.StatusUnauthorized, CodeUnauthorized
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge, CodePayloadTooLarge
	case errors.Is(err, errForbidden):
		return http.StatusForbidden, CodeForbidden
	case errors.Is(err, errUnsupportedMediaType):
		return http.StatusUnsupportedMediaType, CodeUnsupportedMediaType
	case errors.Is(err, errBadRequest), errors.Is(err, domain.ErrInvalidArgument),
		errors.Is(err, domain.ErrInvalidSessionID), errors.Is(err, domain.ErrInvalidPolicy),
		errors.Is(err, events.ErrInvalidAppend), errors.Is(err, transcripts.ErrTitleTooLong):
		return http.StatusBadRequest, CodeInvalidArgument
	case errors.Is(err, errNotFound), errors.Is(err, domain.ErrLaneNotFound),
		errors.Is(err, sessions.ErrNotFound), errors.Is(err, events.ErrStreamNotFound),
		errors.Is(err, commands.ErrSessionNotFound), errors.Is(err, transcripts.ErrNotFound),
		errors.Is(err, domain.ErrRunNotFound):
		return http.StatusNotFound, CodeNotFound
	case errors.Is(err, domain.ErrTurnBusy):
		return http.StatusConflict, CodeBusy
	case errors.Is(err, domain.ErrTurnNotOpen):
		return http.StatusConflict, CodeTurnNotOpen
	case errors.Is(err, errConflict), errors.Is(err, commands.ErrConflict),
		errors.Is(err, domain.ErrSuspended), errors.Is(err, events.ErrWrongExpectedVersion),
		errors.Is(err, commands.ErrTitleInUse), errors.Is(err, projections.ErrRebuildRunning),
		errors.Is(err, domain.ErrSessionMoved), errors.Is(err, domain.ErrNotContinuation),
		errors.Is(err, domain.ErrNotStuck), errors.Is(err, domain.ErrNotExpired),
		errors.Is(err, domain.ErrRunEnded), errors.Is(err, domain.ErrTopicTaken):
		return http.StatusConflict, CodeConflict
	case errors.Is(err, events.ErrStorageFull):
		return http.StatusInsufficientStorage, CodeInsufficientStorage
	case errors.Is(err, events.ErrLogDamaged):
		// Nothing was appended; the message names hermes check, restore
		// and --salvage.
		return http.StatusServiceUnavailable, CodeUnavailable
	case errors.Is(err, errDraining), errors.Is(err, errUnavailable),
		errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, CodeUnavailable
	default:
		return http.StatusInternalServerError, CodeInternal
	}
}

// writeError answers with the error shape; unexpected errors are logged in
// full and the client sees only that something went wrong.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := statusOf(err)
	if status == http.StatusInternalServerError {
		err = s.degradedWhileHealing(err)
		status, code = statusOf(err)
	}
	msg := err.Error()
	switch {
	case status == http.StatusInsufficientStorage:
		w.Header().Set("Retry-After", "30")
	case errors.Is(err, errHealing):
		w.Header().Set("Retry-After", "5")
	}
	if status == http.StatusInternalServerError {
		// The error may quote the request: the log line holds a bounded
		// part of it, not the whole input.
		s.log.Error("request failed", "method", r.Method, "path", truncateForLog(r.URL.Path), "err", truncateForLog(msg))
		msg = "internal error"
	}
	var body ErrorBody
	body.Error.Code, body.Error.Message = code, msg
	writeJSON(w, status, body)
}

// maxLogText bounds a string of the request written to the log.
const maxLogText = 512

// truncateForLog cuts s to maxLogText bytes (on a rune boundary), saying
// how much was left out.
func truncateForLog(s string) string {
	if len(s) <= maxLogText {
		return s
	}
	cut := maxLogText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes more)", s[:cut], len(s)-cut)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		slog.Debug("write response", "err", err)
	}
}
