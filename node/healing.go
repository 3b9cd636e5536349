package node

import (
	"errors"
	"fmt"
	"os"
	"time"

	"hermes/projections"
)

// Healing while serving. A read model that meets damage while it applies
// the log (SQLite reports the file corrupt: a page flipped on disk, a
// file truncated under it) no longer takes the process down. The runner
// holds (projections.Runner.SetHold): commands are refused with 503 and
// /readyz says healing (api/healing.go), reads are served as they are, and
// requests already waiting for the read models wait on. The node records
// the damage for the next start (<file>.damaged, heal.go: a crash before
// the swap rebuilds the file before ready) and starts the live rebuild
// (rebuild.go), which builds both read models from the log beside the
// damaged ones and swaps them in; the runner then goes on from the new
// files' checkpoints and the waiting requests are answered. A rebuild
// that fails is tried again after healRetry (doubling up to healRetryMax).
// Damage the background quick check finds (checkLater) starts the same
// rebuild, without holding anything: the runner still applies.

// healRetry and healRetryMax space out the attempts to heal.
const (
	healRetry    = 5 * time.Second
	healRetryMax = 2 * time.Minute
)

// holdOnDamage is the runner's hold (projections.Runner.SetHold): damage
// to a read model's file is held for a live rebuild, recorded for the next
// start; any other failure stops hermes as before.
func (rt *runtime) holdOnDamage(projection string, err error) bool {
	if !damaged(err) {
		return false
	}
	path, what := rt.fileOf(projection)
	if path != "" {
		if werr := os.WriteFile(damagedMarker(path), []byte(err.Error()+"\n"), 0o600); werr != nil {
			rt.log.Warn("record the damage for the next start", "read_model", what, "err", werr)
		}
	}
	rt.log.Error("read model damaged while serving: rebuilding the read models from the event log; commands refused until the swap",
		"read_model", what, "err", err)
	return true
}

// fileOf is the file and the name of the read model a projection writes.
func (rt *runtime) fileOf(projection string) (path, what string) {
	switch projection {
	case rt.models.lanesFeed.Name():
		return rt.home.LanesDB(), "lanes.db"
	case rt.models.stateFeed.Name():
		return rt.home.StateDB(), "state.db"
	}
	return "", projection
}

// heal starts a live rebuild to replace read models that met damage, or
// joins the rebuild running, and returns where its outcome is sent once.
func (j *liveRebuild) heal() <-chan error {
	out := make(chan error, 1)
	if _, err := j.start(out); err != nil && !errors.Is(err, projections.ErrRebuildRunning) {
		j.startMu.Lock()
		j.dropWaiter(out)
		j.startMu.Unlock()
		out <- fmt.Errorf("heal: %w", err)
	}
	return out
}

// dropWaiter removes w from the rebuild's waiters; j.startMu is held.
func (j *liveRebuild) dropWaiter(w chan error) {
	for i, x := range j.waiters {
		if x == w {
			j.waiters = append(j.waiters[:i], j.waiters[i+1:]...)
			return
		}
	}
}

// healer runs the heals of one serve: Run's loop calls start when the
// runner holds, and reads done for the outcome.
type healer struct {
	rt      *runtime
	done    <-chan error
	attempt int
	retry   <-chan time.Time
}

// start begins a heal unless one is under way.
func (h *healer) start() {
	if h.done != nil || h.retry != nil {
		return
	}
	h.attempt++
	h.done = h.rt.rebuilds.heal()
}

// failed schedules the next attempt after a failed heal.
func (h *healer) failed(err error) {
	wait := min(healRetry<<min(h.attempt-1, 8), healRetryMax)
	h.rt.log.Error("read models not healed; trying again", "attempt", h.attempt, "retry_in", wait, "err", err)
	h.done = nil
	h.retry = time.After(wait)
}

// retried starts the attempt failed scheduled.
func (h *healer) retried() {
	h.retry = nil
	h.start()
}

// healed ends a heal that swapped the new read models in.
func (h *healer) healed() {
	h.rt.log.Info("read models healed: rebuilt from the event log and swapped in; commands accepted again", "attempts", h.attempt)
	h.done, h.attempt = nil, 0
}
