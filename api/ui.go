package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"hermes/projections/sessions"
)

// uiFiles is the web UI: plain HTML, CSS and JavaScript, no build step.
//
//go:embed ui
var uiFiles embed.FS

// uiAsset is one embedded file, ready to serve.
type uiAsset struct {
	data        []byte
	contentType string
	etag        string
}

// uiAssets are the files of api/ui by name ("index.html", "app.js", …).
var uiAssets = loadUIAssets()

func loadUIAssets() map[string]uiAsset {
	types := map[string]string{
		".html": "text/html; charset=utf-8",
		".js":   "text/javascript; charset=utf-8",
		".css":  "text/css; charset=utf-8",
		".svg":  "image/svg+xml",
	}
	out := map[string]uiAsset{}
	err := fs.WalkDir(uiFiles, "ui", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ct, ok := types[path.Ext(p)]
		if !ok {
			return nil // documentation beside the files is not served
		}
		data, err := uiFiles.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out[strings.TrimPrefix(p, "ui/")] = uiAsset{data: data, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic(fmt.Sprintf("embedded web UI: %v", err))
	}
	return out
}

// uiContentSecurityPolicy allows the page its own files and its own API,
// nothing else: no inline script or style, no other origin, no framing.
const uiContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// uiPages serves the web UI at /ui/, outside /v1 and without the token: the
// files hold no data, and the page asks for the token before it reads any.
func (s *Server) uiPages(r chi.Router) {
	page := s.serve(func(w http.ResponseWriter, r *http.Request) error {
		return serveUIAsset(w, r, "index.html")
	})
	r.Get("/ui", page) // the page names its files by absolute path
	r.Get("/ui/", page)
	r.Get("/ui/{asset}", s.serve(func(w http.ResponseWriter, r *http.Request) error {
		return serveUIAsset(w, r, chi.URLParam(r, "asset"))
	}))
}

func serveUIAsset(w http.ResponseWriter, r *http.Request, name string) error {
	a, ok := uiAssets[name]
	if !ok {
		return fmt.Errorf("%w: no file %q in the web UI", errNotFound, name)
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("ETag", a.etag)
	// The files change with the binary: always revalidate (a 304 when
	// unchanged).
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", uiContentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.data))
	return nil
}

const (
	defaultLanePage = 50
	maxLanePage     = 500
	// recentResetWindow is how far back "recently reset" looks.
	recentResetWindow = 24 * time.Hour
)

// lanesPage is GET /v1/lanes: one page of the live lanes that match,
// most recently active first.
type lanesPage struct {
	Lanes  []Entry `json:"lanes"`
	Total  int     `json:"total"`
	Offset int     `json:"offset"`
	Limit  int     `json:"limit"`
	// Head is the log's last position when the page was read: follow
	// /v1/events from Head+1 to miss nothing.
	Head uint64    `json:"head"`
	Now  Timestamp `json:"now"`
	// Platforms and ChatTypes are the values present among all live lanes
	// (for the filters).
	Platforms []string `json:"platforms"`
	ChatTypes []string `json:"chat_types"`
}

// laneStates are the values of GET /v1/lanes?state=.
var laneStates = []string{"suspended", "resume_pending", "recently_reset", "open_turn"}

func (s *Server) uiRoutes(rt routes) {
	rt.get("/lanes", s.searchLanes)
	s.timelineRoutes(rt)
}

// searchLanes filters the lanes by q (a case-insensitive part of the key,
// the current or previous session id, the display name, chat or user
// name), platform, chat_type and state, and answers a page of them sorted
// by activity. min_position waits until the read model has applied that log
// position (a client following the event stream asks for the lanes as of an
// event it saw).
func (s *Server) searchLanes(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := intQuery(r, "limit", defaultLanePage, 1, maxLanePage)
	if err != nil {
		return err
	}
	offset, err := intQuery(r, "offset", 0, 0, 1<<30)
	if err != nil {
		return err
	}
	state := q.Get("state")
	if state != "" && !slices.Contains(laneStates, state) {
		return fmt.Errorf("%w: state must be one of %s", errBadRequest, strings.Join(laneStates, ", "))
	}
	if len(q.Get("q")) > maxPathParam {
		return fmt.Errorf("%w: q longer than %d bytes", errBadRequest, maxPathParam)
	}
	head, err := s.Store.Head(r.Context())
	if err != nil {
		return fmt.Errorf("log head: %w", err)
	}
	if q.Has("min_position") {
		pos, err := queryUint(r, "min_position", 0)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		if err := s.Runner.WaitFor(ctx, min(pos, head)); err != nil {
			return fmt.Errorf("%w: read model: %v", errUnavailable, err)
		}
	}
	rows, err := s.lanes(r.Context()).List(r.Context(), time.Time{})
	if err != nil {
		return err
	}
	now := s.Commands.Now()
	f := laneFilter{
		text: strings.ToLower(q.Get("q")), platform: q.Get("platform"), chatType: q.Get("chat_type"),
		state: state, resetSince: now.Add(-recentResetWindow),
	}
	out := lanesPage{Lanes: []Entry{}, Offset: offset, Limit: limit, Head: head, Now: Timestamp(now), Platforms: []string{}, ChatTypes: []string{}}
	for _, row := range rows {
		l := row.Lane
		if !slices.Contains(out.Platforms, l.Platform) {
			out.Platforms = append(out.Platforms, l.Platform)
		}
		if !slices.Contains(out.ChatTypes, l.ChatType) {
			out.ChatTypes = append(out.ChatTypes, l.ChatType)
		}
		if !f.matches(row) {
			continue
		}
		if out.Total >= offset && len(out.Lanes) < limit {
			out.Lanes = append(out.Lanes, NewEntry(l, row.Version))
		}
		out.Total++
	}
	slices.Sort(out.Platforms)
	slices.Sort(out.ChatTypes)
	return respond(w, out)
}

type laneFilter struct {
	text, platform, chatType, state string
	resetSince                      time.Time
}

func (f laneFilter) matches(row sessions.Row) bool {
	l := row.Lane
	if f.platform != "" && l.Platform != f.platform || f.chatType != "" && l.ChatType != f.chatType {
		return false
	}
	switch f.state {
	case "suspended":
		if !l.Suspended {
			return false
		}
	case "resume_pending":
		if !l.ResumePending {
			return false
		}
	case "recently_reset":
		if l.PreviousSessionID == "" || l.CreatedAt.Before(f.resetSince) {
			return false
		}
	case "open_turn":
		if !l.TurnOpen() {
			return false
		}
	}
	if f.text == "" {
		return true
	}
	for _, s := range []string{l.SessionKey, l.SessionID, l.PreviousSessionID, l.DisplayName, l.Origin.ChatName, l.Origin.UserName} {
		if strings.Contains(strings.ToLower(s), f.text) {
			return true
		}
	}
	return false
}
