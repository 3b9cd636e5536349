package hermeshome

import (
	"fmt"
	"strings"
	"sync"
)

// Report collects what the reader had to change or leave out, and what it
// found but does not carry into the read model. It is safe for concurrent
// use.
type Report struct {
	mu    sync.Mutex
	notes []Note
}

// Note is one thing the reader did to the source data, or could not do.
type Note struct {
	// Kind is clamped (a value was replaced), skipped (a whole lane,
	// session or message was left out), kept (carried in the log but
	// not in the read model) or info.
	Kind string
	// Where names the source fact: "sessions.json agent:main:…",
	// "state.db session 2026…", "state.db message 17".
	Where string
	// What says what was done and why.
	What string
}

// Note kinds.
const (
	Clamped = "clamped"
	Skipped = "skipped"
	Kept    = "kept"
	Info    = "info"
)

func (n Note) String() string { return fmt.Sprintf("%s: %s: %s", n.Kind, n.Where, n.What) }

// Add records a note.
func (r *Report) Add(kind, where, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, Note{Kind: kind, Where: where, What: fmt.Sprintf(format, args...)})
}

// Notes returns the notes in the order they were added.
func (r *Report) Notes() []Note {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Note(nil), r.notes...)
}

// Count returns how many notes of kind there are.
func (r *Report) Count(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, note := range r.notes {
		if note.Kind == kind {
			n++
		}
	}
	return n
}

// CountWhere returns how many notes of kind are about a fact whose name
// starts with prefix.
func (r *Report) CountWhere(kind, prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, note := range r.notes {
		if note.Kind == kind && strings.HasPrefix(note.Where, prefix) {
			n++
		}
	}
	return n
}
