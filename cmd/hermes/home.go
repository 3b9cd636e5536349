package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// homeLayout names the files hermes keeps under its home directory. The
// event log is the only truth; everything else can be rebuilt from it.
type homeLayout struct{ dir string }

func (h homeLayout) hermesDir() string     { return filepath.Join(h.dir, "hermes") }
func (h homeLayout) eventsDB() string      { return filepath.Join(h.dir, "hermes", "events.db") }
func (h homeLayout) lanesDB() string       { return filepath.Join(h.dir, "hermes", "lanes.db") }
func (h homeLayout) stateDB() string       { return filepath.Join(h.dir, "state.db") }
func (h homeLayout) sessionsJSON() string  { return filepath.Join(h.dir, "sessions", "sessions.json") }
func (h homeLayout) restartCounts() string { return filepath.Join(h.dir, ".restart_failure_counts") }
func (h homeLayout) cleanShutdown() string { return filepath.Join(h.dir, ".clean_shutdown") }

// purgedAtStop marks that a clean stop purged every file (erasure.go), so
// the next start need not purge again before it is ready.
func (h homeLayout) purgedAtStop() string { return filepath.Join(h.dir, "hermes", "purged_at_stop") }
func (h homeLayout) gatewayLock() string  { return filepath.Join(h.dir, "gateway.lock") }
func (h homeLayout) spaceReserve() string { return filepath.Join(h.dir, "hermes", "space.reserve") }
func (h homeLayout) whatsappDir() string  { return filepath.Join(h.dir, "whatsapp", "session") }

// ensure creates the home and hermes' own directory, private to the user.
func (h homeLayout) ensure() error {
	for _, d := range []string{h.dir, h.hermesDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	return nil
}

// requireStore fails clearly when the home has no event log yet (for the
// read-only commands).
func (h homeLayout) requireStore() error {
	if _, err := os.Stat(h.eventsDB()); err != nil {
		return fmt.Errorf("no hermes event log at %s (start `hermes serve --home %s` first): %w", h.eventsDB(), h.dir, err)
	}
	return nil
}
