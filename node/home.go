package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"hermes/adapters/gatewaylock"
)

// Home names the files hermes keeps under its home directory. The event
// log is the only truth; everything else can be rebuilt from it.
type Home struct{ Dir string }

// HermesDir is hermes' own directory under the home.
func (h Home) HermesDir() string { return filepath.Join(h.Dir, "hermes") }

// EventsDB is the embedded event log.
func (h Home) EventsDB() string { return filepath.Join(h.Dir, "hermes", "events.db") }

// LanesDB is the lane read model.
func (h Home) LanesDB() string { return filepath.Join(h.Dir, "hermes", "lanes.db") }

// StateDB is the transcript read model, where Python Hermes keeps its own.
func (h Home) StateDB() string { return filepath.Join(h.Dir, "state.db") }

// SessionsJSON is the compatibility export of the lanes.
func (h Home) SessionsJSON() string { return filepath.Join(h.Dir, "sessions", "sessions.json") }

// RestartCounts is the compatibility export of the stuck-loop counts.
func (h Home) RestartCounts() string { return filepath.Join(h.Dir, ".restart_failure_counts") }

// CleanShutdown is Hermes' marker of a clean stop.
func (h Home) CleanShutdown() string { return filepath.Join(h.Dir, ".clean_shutdown") }

// PurgedAtStop marks that a clean stop purged every file (erasure.go), so
// the next start need not purge again before it is ready.
func (h Home) PurgedAtStop() string { return filepath.Join(h.Dir, "hermes", "purged_at_stop") }

// GatewayLock is the lock file one process at a time holds.
func (h Home) GatewayLock() string { return filepath.Join(h.Dir, "gateway.lock") }

// SpaceReserve is the file deleted when a start meets a full disk
// (storage.go).
func (h Home) SpaceReserve() string { return filepath.Join(h.Dir, "hermes", "space.reserve") }

// WhatsAppDir is where the WhatsApp bridge writes its alias files.
func (h Home) WhatsAppDir() string { return filepath.Join(h.Dir, "whatsapp", "session") }

// ServeAddr is where a running hermes serve records its listen address
// for the CLI (removed when it stops).
func (h Home) ServeAddr() string { return filepath.Join(h.HermesDir(), "serve.addr") }

// Ensure creates the home and hermes' own directory, private to the user.
func (h Home) Ensure() error {
	for _, d := range []string{h.Dir, h.HermesDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	return nil
}

// RequireStore fails clearly when the home has no event log yet (for the
// read-only commands).
func (h Home) RequireStore() error {
	if _, err := os.Stat(h.EventsDB()); err != nil {
		return fmt.Errorf("no hermes event log at %s (start `hermes serve --home %s` first): %w", h.EventsDB(), h.Dir, err)
	}
	return nil
}

// HomeLock is the home's gateway lock held by this process.
type HomeLock struct{ l *gatewaylock.Lock }

// Release gives the lock up.
func (h HomeLock) Release() { h.l.Release() }

// processStart is when this process started (for the PID record).
var processStart = time.Now()

// Lock makes this process the only hermes on the home.
func (h Home) Lock() (HomeLock, error) {
	l, err := gatewaylock.Acquire(h.GatewayLock(), gatewaylock.Holder{
		PID:       os.Getpid(),
		StartedAt: processStart.UTC(),
		Command:   strings.Join(os.Args, " "),
	})
	if err != nil {
		return HomeLock{}, fmt.Errorf("%w", err)
	}
	return HomeLock{l}, nil
}
