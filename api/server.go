package api

import (
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"hermes/commands"
	"hermes/events"
	"hermes/projections"
	"hermes/projections/sessions"
)

// DefaultMaxBodyBytes bounds request bodies unless configured otherwise.
const DefaultMaxBodyBytes = 1 << 20

// Deps are what the server is given by cmd.
type Deps struct {
	Commands *commands.Handler
	Store    events.Store
	Runner   *projections.Runner
	// Lanes and Transcripts are the read models when Models is nil.
	// Transcripts serves the transcript and search endpoints; nil disables
	// them (404).
	Lanes       *sessions.Projection
	Transcripts TranscriptService
	// Assigned, when not nil, gives the message ids the transcripts read
	// model numbered for an event it has not committed yet: an append is
	// answered once its event is in the log and numbered, without waiting
	// for the read model's transaction (later reads still wait for it).
	// Nil: the answer waits for the read model.
	Assigned AssignedMessages
	// RoomToAck, when not nil, reports whether the disk has room for the
	// read models to record what an append acknowledges before they
	// commit it; when it has not, an append waits for them (as with a nil
	// Assigned), so that a full disk never leaves an acknowledged message
	// out of the reads. Nil: always.
	RoomToAck func() bool
	// Models, when not nil, holds the read models the queries read, so a
	// rebuild on a live home can swap them (readmodels.go); nil: Lanes and
	// Transcripts, never swapped.
	Models *projections.Holder[ReadModels]
	// Rebuild, when not nil, runs a rebuild of the read models while they
	// serve (POST /v1/projections/rebuild; nil: 404).
	Rebuild Rebuilder
	// Clock, when not nil, is the manual test clock exposed at /v1/clock.
	Clock *ManualClock
	// Token, when not empty, is required as a bearer token on /v1.
	Token        string
	MaxBodyBytes int64
	Log          *slog.Logger
	Metrics      *Metrics
	// ResumeFreshness is the window of /v1/recovery/resumable.
	ResumeFreshness time.Duration
	// Restart asks the process for a graceful restart (nil: 503).
	Restart func()
	// Purge, after an erasure, waits until the read models have applied
	// the whole log and removes erased content from every file hermes
	// writes (docs/ERASURE.md); the erasing routes answer only after it
	// returned, however long it takes (a purge goes on when its request
	// ends first). Nil: nothing beyond the log's own erasure.
	Purge func(ctx context.Context) error
	// PurgeStatus, when not nil, reports the purges (GET
	// /v1/erasure/status; nil: 404).
	PurgeStatus func() PurgeStatus
	// LogDamaged, when not nil, says why the event log takes no more
	// writes: damage was found in it (/readyz says damaged; the store
	// itself refuses the writes).
	LogDamaged func() error
	// Context configures the session context prompt of
	// /v1/sessions/{key}/context (connected platforms, home channels,
	// hermes home, privacy.redact_pii).
	Context ContextSettings
	// Browser limits what web pages can make a browser send (browser.go).
	Browser BrowserPolicy

	// BodyReadTimeout bounds the reading of a request body (0: the
	// default); see guardBody.
	BodyReadTimeout time.Duration
	// MaxFollowers bounds the event streams open at once
	// (api.max_followers; 0: DefaultMaxFollowers).
	MaxFollowers int
	// FollowerBufferBytes bounds what one event stream holds for a client
	// that does not keep up (api.follower_buffer_bytes; 0:
	// DefaultFollowerBufferBytes).
	FollowerBufferBytes int
	// FollowerWriteTimeout bounds each write to an event stream (0:
	// DefaultFollowerWriteTimeout).
	FollowerWriteTimeout time.Duration
	// StuckLoopThreshold is recovery.stuck_loop_threshold, for the
	// stuck-loop suspensions of a gateway run's start and of a gateway's
	// own ask (0: DefaultStuckLoopThreshold).
	StuckLoopThreshold int
	// Vacuum, when not nil, compacts state.db after an auto-prune that
	// deleted sessions (POST /v1/maintenance/auto-prune); nil: none.
	Vacuum func(ctx context.Context) error
}

// Server is the HTTP API.
type Server struct {
	Deps
	log *slog.Logger

	ready    atomic.Bool
	draining atomic.Bool
	// turnGate makes "not draining, so start the turn" atomic with the
	// drain: turn starts hold it shared, SetDraining(true) exclusively, so
	// once the drain looks for open turns no new one can appear.
	turnGate           sync.RWMutex
	transcriptCommands *commands.TranscriptCommands
	// stateCommands keep the SessionDB state of a gateway (gatewaystate.go).
	stateCommands *commands.StateCommands
	// written is the highest position appended through this server: queries
	// wait until the projections have applied it (read your writes).
	written atomic.Uint64
	// followers counts the open event streams (follow.go).
	followers atomic.Int64
	// hasTranscripts: the read models include the transcript reader (the
	// transcript routes exist).
	hasTranscripts bool
	// streamsDone is closed by CloseStreams.
	streamsDone  chan struct{}
	closeStreams sync.Once
}

// New returns a server over deps.
func New(deps Deps) *Server {
	if deps.MaxBodyBytes <= 0 {
		deps.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if deps.MaxFollowers <= 0 {
		deps.MaxFollowers = DefaultMaxFollowers
	}
	if deps.FollowerBufferBytes <= 0 {
		deps.FollowerBufferBytes = DefaultFollowerBufferBytes
	}
	if deps.FollowerWriteTimeout <= 0 {
		deps.FollowerWriteTimeout = DefaultFollowerWriteTimeout
	}
	if deps.Models == nil {
		deps.Models = projections.NewHolder(ReadModels{Lanes: deps.Lanes, Transcripts: deps.Transcripts})
	}
	m, release := deps.Models.Acquire()
	release()
	s := &Server{Deps: deps, log: deps.Log, streamsDone: make(chan struct{}), hasTranscripts: m.Transcripts != nil}
	if is, ok := deps.Store.(*instrumentedStore); ok {
		is.full.setLogger(s.log)
	}
	if deps.Metrics != nil {
		deps.Metrics.observeStorage(s)
	}
	return s
}

// CloseStreams ends every event stream, open or opened later, so that a
// shutdown does not wait for followers (http.Server.RegisterOnShutdown).
// Their clients resume with Last-Event-ID.
func (s *Server) CloseStreams() {
	s.closeStreams.Do(func() { close(s.streamsDone) })
}

// SetReady marks recovery and catch-up done (/readyz).
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// SetDraining stops (or resumes) accepting new turns; it returns once every
// turn start already admitted has been recorded.
func (s *Server) SetDraining(draining bool) {
	s.turnGate.Lock()
	defer s.turnGate.Unlock()
	s.draining.Store(draining)
}

// admitTurn holds off the drain while a turn start is being recorded; ok is
// false when hermes is draining.
func (s *Server) admitTurn() (release func(), ok bool) {
	s.turnGate.RLock()
	if s.Draining() {
		s.turnGate.RUnlock()
		return nil, false
	}
	return s.turnGate.RUnlock, true
}

// Draining reports whether new turns are refused.
func (s *Server) Draining() bool { return s.draining.Load() }

// Handler returns the router.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.guardBody)
	r.Use(routeOnEscapedPath)
	r.Use(s.recoverer)
	if s.Metrics != nil {
		r.Use(s.Metrics.middleware)
	}
	r.Use(s.browserGuard()) // Host, cross-origin and Content-Type rules, on every route
	r.Use(noSniff)
	// Without the token: the probes, and the web UI's files, which hold no
	// data (the page asks for the token and sends it to /v1).
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	s.uiPages(r) // the web UI at /ui/ (ui.go)
	r.Group(func(r chi.Router) {
		r.Use(s.auth)
		if s.Metrics != nil {
			r.Method(http.MethodGet, "/metrics", s.Metrics.Handler())
		}
		r.Get("/openapi.json", serveOpenAPI)
	})
	r.Route("/v1", func(r chi.Router) {
		r.Use(s.auth)
		r.Use(s.limitBody)
		r.Use(s.checkIdempotencyKey)
		r.Use(s.leaseModels)
		rt := routes{s: s, r: r}
		s.laneRoutes(rt)
		s.entryStateRoutes(rt)
		s.eventRoutes(rt)
		s.transcriptRoutes(rt)
		s.queueRoutes(rt)
		s.contextRoutes(rt)
		s.uiRoutes(rt) // the lane search and timeline the web UI reads (ui.go)
		s.gatewayRoutes(rt)
		if s.Clock != nil {
			rt.control("/clock", s.setClock)
		}
		rt.control("/admin/restart", s.restart)
		s.rebuildRoutes(rt)
	})
	r.NotFound(s.serve(func(w http.ResponseWriter, r *http.Request) error {
		return fmt.Errorf("%w: no route %s %s", errNotFound, r.Method, r.URL.Path)
	}))
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		var body ErrorBody
		body.Error.Code, body.Error.Message = CodeInvalidArgument, "method not allowed"
		writeJSON(w, http.StatusMethodNotAllowed, body)
	})
	return r
}

// noSniff tells browsers to take every answer for the type it declares
// (JSON, event streams, errors), never to sniff it into HTML or script.
func noSniff(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.writeError(w, r, fmt.Errorf("panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// auth requires the configured bearer token, compared in constant time.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.Token == "" {
		return next
	}
	want := []byte("Bearer " + s.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hermes"`)
			s.writeError(w, r, errUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.MaxBodyBytes {
			s.writeError(w, r, fmt.Errorf("%w: %d bytes, the limit is %d", errTooLarge, r.ContentLength, s.MaxBodyBytes))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// routeOnEscapedPath makes chi match the escaped path, always. Left to
// itself chi routes on r.URL.RawPath when net/url kept one (the path had an
// escape such as %2F that the default encoding would not produce) and on
// the decoded r.URL.Path otherwise, so a path parameter arrived escaped or
// not depending on the rest of the path, and pathParam decoded some keys
// twice: "a%2541" became the key "aA", "100%25" was refused.
func routeOnEscapedPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.RoutePath == "" {
			rctx.RoutePath = r.URL.EscapedPath()
		}
		next.ServeHTTP(w, r)
	})
}

// wrote records a position this server appended.
func (s *Server) wrote(pos uint64) {
	for {
		cur := s.written.Load()
		if pos <= cur || s.written.CompareAndSwap(cur, pos) {
			return
		}
	}
}

// fresh waits until the projections reflect every write this server made,
// for a command that decides or answers from the read models. While a read
// model cannot write for want of space it does not wait: it answers
// insufficient storage unless the read models already have every write.
func (s *Server) fresh(ctx context.Context) error {
	if err := s.freshRead(ctx); err != nil {
		return err
	}
	pos := s.written.Load()
	if s.Runner.Applied() < pos {
		if err := s.Runner.StorageError(); err != nil {
			return fmt.Errorf("%w: the log has position %d but a read model cannot record it (%v); retry once space is freed", events.ErrStorageFull, pos, err)
		}
	}
	return nil
}

// acksEarly reports whether an append is answered before the read models
// commit it (Deps.Assigned, Deps.RoomToAck): never while a read model
// cannot write.
func (s *Server) acksEarly() bool {
	return s.Assigned != nil && s.Runner.StorageError() == nil && (s.RoomToAck == nil || s.RoomToAck())
}

// behind reports whether the read models lack a write this server made.
func (s *Server) behind() bool { return s.Runner.Applied() < s.written.Load() }

// freshRead waits, for a query, until the projections reflect every write
// this server made; while a read model cannot write for want of space it
// does not wait and the query is answered from the read models as they are.
func (s *Server) freshRead(ctx context.Context) error {
	return s.freshAt(ctx, s.written.Load())
}

// freshAt is freshRead up to the position pos.
func (s *Server) freshAt(ctx context.Context, pos uint64) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Runner.WaitFresh(ctx, pos); err != nil {
		return fmt.Errorf("%w: read model: %v", errUnavailable, err)
	}
	return nil
}

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 200

// commandID is the client's Idempotency-Key, so a retried request is
// applied once. checkIdempotencyKey refuses an oversized one up front.
func commandID(r *http.Request) string { return r.Header.Get("Idempotency-Key") }

func (s *Server) checkIdempotencyKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header.Get("Idempotency-Key")) > maxIdempotencyKey {
			s.writeError(w, r, fmt.Errorf("%w: Idempotency-Key longer than %d bytes", errBadRequest, maxIdempotencyKey))
			return
		}
		next.ServeHTTP(w, r)
	})
}
