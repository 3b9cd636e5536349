package projections

import (
	"errors"
	"sync"
	"time"
)

// RebuildPhase is where a rebuild on a live home is.
type RebuildPhase string

// The phases of a rebuild, in order; it ends done or failed.
const (
	// RebuildIdle: no rebuild was started by this process.
	RebuildIdle RebuildPhase = "idle"
	// RebuildBuilding: new files are built from position 0 while the old
	// ones serve.
	RebuildBuilding RebuildPhase = "building"
	// RebuildCatchingUp: the new files apply what was appended meanwhile.
	RebuildCatchingUp RebuildPhase = "catching_up"
	// RebuildSwapping: the runner is paused, the last events are applied
	// and the new files replace the old ones.
	RebuildSwapping RebuildPhase = "swapping"
	RebuildDone     RebuildPhase = "done"
	RebuildFailed   RebuildPhase = "failed"
)

// ErrRebuildRunning is returned when a rebuild is asked for while one runs.
var ErrRebuildRunning = errors.New("a rebuild is already running")

// RebuildStatus is a snapshot of a rebuild's progress.
type RebuildStatus struct {
	// Run numbers the rebuilds of this process from 1 (0: none yet).
	Run   int
	Phase RebuildPhase
	// Done and Total are the log positions applied by the new files and
	// the head they are heading for (events on the embedded store).
	Done, Total uint64
	// EventsPerSecond is the average rate of the building phase so far.
	EventsPerSecond float64
	// ETA is the time the building phase still needs at that rate (0 when
	// unknown or past it).
	ETA                   time.Duration
	StartedAt, FinishedAt time.Time
	// Restarts counts the building phases started over because an erasure
	// came in while history was copied (docs/ERASURE.md).
	Restarts int
	// Err is why the rebuild failed.
	Err string
}

// Running reports whether the rebuild has not ended.
func (s RebuildStatus) Running() bool {
	switch s.Phase {
	case RebuildBuilding, RebuildCatchingUp, RebuildSwapping:
		return true
	}
	return false
}

// RebuildTracker follows one rebuild at a time; it is safe for concurrent
// use.
type RebuildTracker struct {
	now func() time.Time

	mu         sync.Mutex
	st         RebuildStatus
	phaseStart time.Time
	phaseFrom  uint64
}

// NewRebuildTracker returns an idle tracker reading time from now.
func NewRebuildTracker(now func() time.Time) *RebuildTracker {
	return &RebuildTracker{now: now, st: RebuildStatus{Phase: RebuildIdle}}
}

// Begin starts a rebuild in the building phase and returns its run number,
// or ErrRebuildRunning.
func (t *RebuildTracker) Begin() (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.st.Running() {
		return 0, ErrRebuildRunning
	}
	now := t.now()
	t.st = RebuildStatus{Run: t.st.Run + 1, Phase: RebuildBuilding, StartedAt: now}
	t.phaseStart, t.phaseFrom = now, 0
	return t.st.Run, nil
}

// Restart records that the building phase starts over from position 0.
func (t *RebuildTracker) Restart() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st.Restarts++
	t.st.Done, t.st.EventsPerSecond, t.st.ETA = 0, 0, 0
	t.phaseStart, t.phaseFrom = t.now(), 0
}

// Enter moves the running rebuild to phase.
func (t *RebuildTracker) Enter(phase RebuildPhase) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st.Phase = phase
	t.phaseStart, t.phaseFrom = t.now(), t.st.Done
}

// Progress records that the new files applied the log up to done of total.
// Its signature is the progress callback of Rebuild and Runner.CatchUp.
func (t *RebuildTracker) Progress(done, total uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st.Done, t.st.Total = done, total
	if t.st.Phase != RebuildBuilding || done <= t.phaseFrom {
		return
	}
	elapsed := t.now().Sub(t.phaseStart).Seconds()
	if elapsed <= 0 {
		return
	}
	t.st.EventsPerSecond = float64(done-t.phaseFrom) / elapsed
	t.st.ETA = 0
	if total > done {
		t.st.ETA = time.Duration(float64(total-done) / t.st.EventsPerSecond * float64(time.Second))
	}
}

// Finish ends the running rebuild: done when err is nil, failed otherwise.
func (t *RebuildTracker) Finish(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st.FinishedAt, t.st.ETA = t.now(), 0
	if err != nil {
		t.st.Phase, t.st.Err = RebuildFailed, err.Error()
		return
	}
	t.st.Phase = RebuildDone
	if t.st.Done < t.st.Total {
		t.st.Done = t.st.Total
	}
}

// Status returns a snapshot.
func (t *RebuildTracker) Status() RebuildStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st
}
