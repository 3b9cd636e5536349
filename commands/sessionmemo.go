package commands

import "sync"

// Every appended message first checks that its transcript session exists,
// a read of state.db that cost 8% of the server's CPU with one appender.
// With one writer (WithSoleWriter) a session seen to exist keeps existing
// until this process deletes it, so the answer is remembered.

// maxKnownSessions bounds sessionMemo; past it the memo starts afresh.
const maxKnownSessions = 1 << 14

// sessionMemo remembers transcript sessions found to exist (true) and
// those this process deleted (false: asked of the read model again, and
// never remembered as existing, however stale the read model's answer).
type sessionMemo struct {
	mu    sync.Mutex
	known map[string]bool
}

// exists says whether id was found to exist and not deleted since.
func (m *sessionMemo) exists(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.known[id]
}

// found remembers that the read model has id, unless this process deleted
// it (the read model may not have applied the delete yet).
func (m *sessionMemo) found(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if exists, seen := m.known[id]; seen && !exists {
		return
	}
	m.reserve()
	m.known[id] = true
}

// deleted forgets id before its deletion is appended.
func (m *sessionMemo) deleted(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reserve()
	m.known[id] = false
}

func (m *sessionMemo) reserve() {
	if m.known == nil || len(m.known) >= maxKnownSessions {
		m.known = make(map[string]bool)
	}
}
