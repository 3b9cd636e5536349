package api

import (
	"context"
	"net/http"
	"sync"

	"hermes/projections"
	"hermes/projections/sessions"
)

// ReadModels are the read models the queries read. A rebuild on a live home
// replaces them as a whole (Deps.Models); a request reads one generation
// from its first query to its end.
type ReadModels struct {
	Lanes       *sessions.Projection
	Transcripts TranscriptService
}

// leaseKey keys a request's *modelsLease in its context.
type leaseKey struct{}

// modelsLease is the generation of read models a request reads: acquired
// at its first query, released when its handler returns, so a swap waits
// for it and never closes a handle under it. Requests that read no model
// (event streams, health) never hold one and never hold up a swap. A
// request that waits for the runner lets its lease go meanwhile (pause):
// a swap may be what the runner waits for (healing.go), and the request's
// next query acquires the generation in place then.
type modelsLease struct {
	holder  *projections.Holder[ReadModels]
	mu      sync.Mutex
	models  ReadModels
	release func()
	ended   bool
}

func (l *modelsLease) get() ReadModels {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A query racing the end cannot acquire after it.
	if l.release == nil && !l.ended {
		l.models, l.release = l.holder.Acquire()
	}
	return l.models
}

// pause releases the lease until the next query.
func (l *modelsLease) pause() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.release != nil {
		l.release()
		l.release = nil
	}
}

func (l *modelsLease) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
	if l.release != nil {
		l.release()
		l.release = nil
	}
}

// pauseModels releases the lease of ctx's request, if it holds one, until
// its next query: called before a wait for the runner.
func (s *Server) pauseModels(ctx context.Context) {
	if l, ok := ctx.Value(leaseKey{}).(*modelsLease); ok && l.holder == s.Models {
		l.pause()
	}
}

// leaseModels gives each request a lease on the read models, released when
// the request's handler returns.
func (s *Server) leaseModels(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := &modelsLease{holder: s.Models}
		defer l.end()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), leaseKey{}, l)))
	})
}

// models returns the read models of ctx's request. Outside a request (no
// lease) it returns the current ones unheld: a swap may close them, so only
// code that cannot run during a swap may do that (none does today).
func (s *Server) models(ctx context.Context) ReadModels {
	if l, ok := ctx.Value(leaseKey{}).(*modelsLease); ok && l.holder == s.Models {
		return l.get()
	}
	m, release := s.Models.Acquire()
	release()
	return m
}

// lanes is the lane read model of ctx's request.
func (s *Server) lanes(ctx context.Context) *sessions.Projection { return s.models(ctx).Lanes }

// transcripts is the transcript reader of ctx's request.
func (s *Server) transcripts(ctx context.Context) TranscriptService {
	return s.models(ctx).Transcripts
}

// AcquireModels returns the read models of holder for code outside the api
// package (cmd's lifecycle, expiry and erasure): inside a request that
// already holds a lease on holder it returns that lease's models, since a
// second acquisition by the same request could wait behind a swap that
// waits for the request; otherwise it acquires them, and release must be
// called once done.
func AcquireModels(ctx context.Context, holder *projections.Holder[ReadModels]) (models ReadModels, release func()) {
	if l, ok := ctx.Value(leaseKey{}).(*modelsLease); ok && l.holder == holder {
		return l.get(), func() {}
	}
	return holder.Acquire()
}
