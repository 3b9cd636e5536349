package api

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"hermes/domain"
)

// handlerFunc is a handler that returns its failure instead of writing it:
// serve turns the error into the error answer, in one place.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// serve adapts a handlerFunc to net/http: a returned error is answered by
// writeError (status and code from statusOf). A handler that has already
// started its answer (a stream) returns nil.
func (s *Server) serve(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	}
}

// current runs h once the read models reflect every write this server made
// (read your writes). Every GET route of /v1 goes through it (routes.get);
// the transcript commands, which check the read model, use it too.
func (s *Server) current(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.freshRead(r.Context()); err != nil {
			return err
		}
		return h(w, r)
	}
}

// admitted runs h only while hermes accepts new turns (refused with
// refusal, which wraps errDraining, otherwise), and holds off the drain
// until h returns.
func (s *Server) admitted(refusal error, h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		release, ok := s.admitTurn()
		if !ok {
			return refusal
		}
		defer release()
		return h(w, r)
	}
}

// routes registers the error-returning handlers of /v1. A read (GET) can
// only be registered through get, which waits for the read models: no
// read handler can forget read-your-writes.
type routes struct {
	s *Server
	r chi.Router
}

func (rt routes) get(pattern string, h handlerFunc) {
	rt.r.Get(pattern, rt.s.serve(rt.s.current(h)))
}

// post, put, patch and delete register commands: each is refused with
// insufficient_storage while a read model cannot write (writable).
func (rt routes) post(pattern string, h handlerFunc) {
	rt.r.Post(pattern, rt.s.serve(rt.s.writable(h)))
}

func (rt routes) put(pattern string, h handlerFunc) { rt.r.Put(pattern, rt.s.serve(rt.s.writable(h))) }

func (rt routes) patch(pattern string, h handlerFunc) {
	rt.r.Patch(pattern, rt.s.serve(rt.s.writable(h)))
}

func (rt routes) delete(pattern string, h handlerFunc) {
	rt.r.Delete(pattern, rt.s.serve(rt.s.writable(h)))
}

// control registers a POST that writes no event (the test clock, a restart
// request): it stays open while storage is full.
func (rt routes) control(pattern string, h handlerFunc) { rt.r.Post(pattern, rt.s.serve(h)) }

// sessionKey is the lane key of a {key} path, percent-decoded once and
// bounded.
type sessionKey string

// sessionID is the session id of a {session_id} path, decoded and
// validated (domain.ValidateSessionID) before it names a stream or a query.
type sessionID string

// withKey parses the {key} path parameter for h.
func withKey(h func(w http.ResponseWriter, r *http.Request, key sessionKey) error) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		key, err := pathParam(r, "key")
		if err != nil {
			return err
		}
		return h(w, r, sessionKey(key))
	}
}

// withSessionID parses the {session_id} path parameter for h.
func withSessionID(h func(w http.ResponseWriter, r *http.Request, id sessionID) error) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathParam(r, "session_id")
		if err != nil {
			return err
		}
		if err := domain.ValidateSessionID(id); err != nil {
			return err
		}
		return h(w, r, sessionID(id))
	}
}

// maxPathParam bounds a path parameter, decoded.
const maxPathParam = 1024

func pathParam(r *http.Request, name string) (string, error) {
	raw := chi.URLParam(r, name)
	v, err := url.PathUnescape(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %s %q is not validly percent-encoded", errBadRequest, name, raw)
	}
	if v == "" {
		return "", fmt.Errorf("%w: empty %s", errBadRequest, name)
	}
	if err := checkText(name, v, maxPathParam); err != nil {
		return "", err
	}
	return v, nil
}

// respond answers v with 200.
func respond(w http.ResponseWriter, v any) error {
	writeJSON(w, http.StatusOK, v)
	return nil
}
