package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"hermes/api"
	"hermes/events"
	"hermes/projections"
	"hermes/projections/sessions"
)

// A rebuild on a live home (POST /v1/projections/rebuild, what `hermes
// projections rebuild` asks a running hermes serve for) is blue/green: the
// new read models are built from the log in a scratch directory while the
// old ones serve, caught up with what was appended meanwhile, then swapped
// in during a short pause:
//
//  1. building: projections.Rebuild from position 0 into the scratch
//     directory (the bulk mode of a catch-up from 0);
//  2. catching up: the new files apply the events appended during 1;
//  3. swapping: the requests in flight finish on the old files and new ones
//     wait; the runner is paused; the new files apply the last events, are
//     purged (WAL truncated) and closed; the old files are closed, their WAL
//     and shared-memory files removed, and the new files renamed over them;
//     they are opened and installed; the runner and the requests go on.
//
// An erasure during 1 starts 1 over (the history copied so far may hold
// what it erased, and the copy cannot be purged half-way): the purge waits
// until the partial files are deleted. An erasure during 2 or 3 is applied
// to the new files and they are purged like the live ones, before the
// erasing request is answered.

// rebuildProgressLog spaces out the progress lines a rebuild logs.
const rebuildProgressLog = 5 * time.Second

// maxCatchUpRounds bounds the catch-ups of phase 2 under a steady write
// load: the swap applies whatever is left, up to maxSwapLag.
const maxCatchUpRounds = 8

// maxSwapLag bounds what the swap may apply with requests held: a
// rebuild further behind after its catch-up rounds fails instead.
const maxSwapLag = 16 * projections.MaxBatch

// liveRebuild runs the rebuilds of a hermes serve, one at a time.
type liveRebuild struct {
	rt      *runtime
	tracker *projections.RebuildTracker
	// buildHook, when not nil, is called with each progress report of
	// phase 1 and the context of the attempt; a test holds the copy there
	// to send an erasure into it. Nil in production.
	buildHook func(ctx context.Context, attempt int, done, total uint64)
	// freeBytes reports the space free for an unprivileged writer on the
	// file system of a path (statfs; tests inject their own).
	freeBytes func(path string) (uint64, error)

	ctx  context.Context // ends when hermes stops
	stop context.CancelFunc
	wg   sync.WaitGroup
	// startMu orders the start of a rebuild with close: none starts after.
	startMu sync.Mutex
	closed  bool
	// waiters are told the outcome of the rebuild running (heal,
	// healing.go); guarded by startMu.
	waiters []chan error

	// mu guards the fields below, and is held while the new read models
	// are written (phases 2 and 3), so that a purge and the rebuild take
	// turns on them.
	mu sync.Mutex
	// cancelBuild and buildDone are set while phase 1 runs: the purge
	// cancels it and waits for buildDone (closed once its files are gone).
	cancelBuild context.CancelFunc
	buildDone   chan struct{}
	erased      bool
	// scratch is the new read models while they catch up (phases 2, 3).
	scratch *ReadModels
}

var _ api.Rebuilder = (*liveRebuild)(nil)

func newLiveRebuild(rt *runtime) *liveRebuild {
	ctx, stop := context.WithCancel(context.Background())
	return &liveRebuild{rt: rt, tracker: projections.NewRebuildTracker(time.Now), freeBytes: statfsFree, ctx: ctx, stop: stop}
}

// StartRebuild implements api.Rebuilder.
func (j *liveRebuild) StartRebuild() (projections.RebuildStatus, error) { return j.start(nil) }

// start starts a rebuild; waiter, when not nil, is told its outcome, or
// the outcome of the rebuild already running (projections.ErrRebuildRunning).
func (j *liveRebuild) start(waiter chan error) (projections.RebuildStatus, error) {
	j.startMu.Lock()
	defer j.startMu.Unlock()
	if j.closed {
		return projections.RebuildStatus{}, errors.New("hermes is stopping: no rebuild starts")
	}
	if waiter != nil {
		j.waiters = append(j.waiters, waiter)
	}
	if err := checkRebuildSpace(j.rt.home, j.freeBytes); err != nil {
		return projections.RebuildStatus{}, err
	}
	run, err := j.tracker.Begin()
	if err != nil {
		return j.tracker.Status(), fmt.Errorf("%w (run %d)", err, j.tracker.Status().Run)
	}
	j.rt.log.Info("rebuild of the read models started while serving", "run", run)
	j.wg.Go(func() {
		err := j.run(j.ctx)
		j.tracker.Finish(err)
		j.startMu.Lock()
		for _, w := range j.waiters {
			w <- err
		}
		j.waiters = nil
		j.startMu.Unlock()
		st := j.tracker.Status()
		if err != nil {
			j.rt.log.Error("rebuild of the read models failed; the old ones serve on", "run", run, "err", err)
			return
		}
		took := st.FinishedAt.Sub(st.StartedAt)
		j.rt.log.Info("rebuild of the read models done", "run", run, "events", st.Total,
			"took", took.Round(time.Millisecond), "events_per_s", fmt.Sprintf("%.0f", float64(st.Total)/max(took.Seconds(), 1e-3)),
			"restarts", st.Restarts)
	})
	return j.tracker.Status(), nil
}

// RebuildStatus implements api.Rebuilder.
func (j *liveRebuild) RebuildStatus() projections.RebuildStatus { return j.tracker.Status() }

// close stops a running rebuild (its scratch files are deleted) and waits
// for it.
func (j *liveRebuild) close() {
	j.startMu.Lock()
	j.closed = true
	j.startMu.Unlock()
	j.stop()
	j.wg.Wait()
}

func (j *liveRebuild) run(ctx context.Context) error {
	logDone := make(chan struct{})
	defer close(logDone)
	go j.logProgress(logDone)
	scratch, err := os.MkdirTemp(j.rt.home.HermesDir(), RebuildScratchPrefix)
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	defer os.RemoveAll(scratch)
	began := time.Now()
	dir, err := j.build(ctx, scratch)
	if err != nil {
		return err
	}
	st := j.tracker.Status()
	j.rt.log.Info("rebuild: history copied; catching up", "position", st.Done, "took", time.Since(began).Round(time.Millisecond))
	j.tracker.Enter(projections.RebuildCatchingUp)
	began = time.Now()
	models, err := j.catchUp(ctx)
	if err != nil {
		return err
	}
	j.rt.log.Info("rebuild: caught up; swapping", "position", j.tracker.Status().Done, "took", time.Since(began).Round(time.Millisecond))
	return j.swap(ctx, dir, models)
}

func (j *liveRebuild) logProgress(done <-chan struct{}) {
	t := time.NewTicker(rebuildProgressLog)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			st := j.tracker.Status()
			j.rt.log.Info("rebuild progress", "run", st.Run, "phase", st.Phase, "position", st.Done, "of", st.Total,
				"events_per_s", fmt.Sprintf("%.0f", st.EventsPerSecond), "eta", st.ETA.Round(time.Second))
		}
	}
}

// build is phase 1: it rebuilds the read models from position 0 into a new
// directory under scratch and returns it; an erasure meanwhile starts it
// over.
func (j *liveRebuild) build(ctx context.Context, scratch string) (string, error) {
	for attempt := 1; ; attempt++ {
		dir := filepath.Join(scratch, fmt.Sprintf("models-%d", attempt))
		buildCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		j.mu.Lock()
		j.cancelBuild, j.buildDone, j.erased = cancel, done, false
		j.mu.Unlock()
		progress := j.tracker.Progress
		if hook := j.buildHook; hook != nil {
			progress = func(done, total uint64) {
				hook(buildCtx, attempt, done, total)
				j.tracker.Progress(done, total)
			}
		}
		err := projections.Rebuild(buildCtx, j.rt.raw, ScratchOpener(nil), dir, progress)
		cancel()
		j.mu.Lock()
		erased := j.erased
		j.cancelBuild, j.buildDone = nil, nil
		if erased {
			if rmErr := os.RemoveAll(dir); rmErr != nil {
				err = errors.Join(err, fmt.Errorf("rebuild: delete the files an erasure interrupted: %w", rmErr))
				erased = false
			}
		} else if err == nil {
			// The new files are registered for purge in the same critical
			// section that ends phase 1: an erasure never finds them
			// neither being copied nor registered (purge).
			err = j.openScratch(dir)
		}
		j.mu.Unlock()
		close(done)
		if erased && ctx.Err() == nil {
			j.tracker.Restart()
			j.rt.log.Info("rebuild starts over: an erasure came in while history was copied", "attempt", attempt+1)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("rebuild: %w", err)
		}
		return dir, nil
	}
}

// openScratch opens the read models phase 1 built in dir and registers
// them for purge; j.mu is held.
func (j *liveRebuild) openScratch(dir string) error {
	m, err := openReadModels(filepath.Join(dir, "lanes.db"), filepath.Join(dir, "state.db"), sessions.Exports{}, nil)
	if err != nil {
		return fmt.Errorf("rebuild: open the new read models: %w", err)
	}
	j.scratch = &m
	return nil
}

// catchUp is phase 2: it applies to the new read models (opened by build)
// what was appended since phase 1, a few rounds, while the old ones serve.
func (j *liveRebuild) catchUp(ctx context.Context) (ReadModels, error) {
	j.mu.Lock()
	scratch := *j.scratch
	j.mu.Unlock()
	var err error
	var lag uint64
	for range maxCatchUpRounds {
		j.mu.Lock()
		runner := projections.NewRunner(j.rt.raw, scratch.Projections()...)
		err = runner.CatchUp(ctx, j.tracker.Progress)
		if err == nil {
			lag, err = runner.Lag(ctx)
		}
		j.mu.Unlock()
		if err != nil {
			j.dropScratch()
			return ReadModels{}, fmt.Errorf("rebuild: catch up: %w", err)
		}
		if lag <= projections.MaxBatch {
			break
		}
	}
	if lag > maxSwapLag {
		// The swap applies the rest with every request held: it must not
		// start that far behind. The old read models keep serving.
		j.dropScratch()
		return ReadModels{}, fmt.Errorf("rebuild: writes outpace the catch-up (%d events behind after %d rounds); the current read models keep serving, try again when writes are calmer", lag, maxCatchUpRounds)
	}
	return scratch, nil
}

// dropScratch closes the new read models after a failure (the scratch
// directory is removed by run).
func (j *liveRebuild) dropScratch() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.scratch != nil {
		j.scratch.Close()
	}
	j.scratch = nil
}

// swap is phase 3. It takes the generation in use (liveModels.exclusive:
// the requests' read models, then the runner's), then j.mu, and swaps.
func (j *liveRebuild) swap(ctx context.Context, dir string, scratch ReadModels) error {
	j.tracker.Enter(projections.RebuildSwapping)
	begin := time.Now()
	old, install := j.rt.models.exclusive()
	paused := time.Now()
	j.mu.Lock()
	var steps swapSteps
	next, err := j.swapFiles(ctx, dir, scratch, old, &steps)
	j.scratch = nil
	j.mu.Unlock()
	install(next)
	if err != nil {
		return err
	}
	// The exports (sessions.json, the restart counts) come from the new
	// lanes.db from now on.
	if err := j.rt.models.lanesFeed.CaughtUp(ctx); err != nil {
		j.rt.log.Warn("rebuild: exports after the swap", "err", err)
	}
	j.rt.log.Info("rebuild: new read models swapped in", "waited_for_requests", paused.Sub(begin).Round(time.Microsecond),
		"paused", time.Since(paused).Round(time.Microsecond), "last_events", steps.catchUp.Round(time.Microsecond),
		"purge", steps.purge.Round(time.Microsecond), "close", steps.close.Round(time.Microsecond), "move_and_open", steps.open.Round(time.Microsecond))
	return nil
}

// swapSteps is how long each step of a swap took (logged).
type swapSteps struct{ catchUp, purge, close, open time.Duration }

// swapFiles does the swap with every reader and the runner held off, and
// returns the generation to install: the new one, or the old one after a
// failure that left the old files in place.
func (j *liveRebuild) swapFiles(ctx context.Context, dir string, scratch ReadModels, old liveSet, steps *swapSteps) (liveSet, error) {
	mark := time.Now()
	lap := func(d *time.Duration) {
		now := time.Now()
		*d, mark = now.Sub(mark), now
	}
	if err := projections.NewRunner(j.rt.raw, scratch.Projections()...).CatchUp(ctx, j.tracker.Progress); err != nil {
		scratch.Close()
		return old, fmt.Errorf("rebuild: final catch-up: %w", err)
	}
	lap(&steps.catchUp)
	// No WAL frame of the new files may keep a page an erasure rewrote.
	if err := scratch.purge(ctx); err != nil {
		scratch.Close()
		return old, fmt.Errorf("rebuild: purge the new read models: %w", err)
	}
	lap(&steps.purge)
	if err := scratch.Close(); err != nil {
		return old, fmt.Errorf("rebuild: close the new read models: %w", err)
	}
	// From here the old files are closed: on failure, whatever is in place
	// is reopened (the runner's next batch fails on a closed file
	// otherwise, and the restart that follows rebuilds before ready).
	closeErr := old.close()
	if closeErr != nil {
		j.rt.log.Warn("rebuild: close the old read models", "err", closeErr)
	}
	lap(&steps.close)
	var moveErr error
	for _, m := range []struct{ from, to string }{
		{filepath.Join(dir, "lanes.db"), j.rt.home.LanesDB()},
		{filepath.Join(dir, "state.db"), j.rt.home.StateDB()},
	} {
		if moveErr = replaceDB(m.from, m.to); moveErr != nil {
			break
		}
	}
	if moveErr == nil {
		// The files that damage found while serving was recorded for
		// (heal.go) are gone: the next start need not rebuild them.
		for _, p := range []string{j.rt.home.LanesDB(), j.rt.home.StateDB()} {
			os.Remove(damagedMarker(p))
		}
	}
	next, err := j.rt.openLiveSet()
	lap(&steps.open)
	if err != nil {
		return old, errors.Join(moveErr, fmt.Errorf("rebuild: open the read models after the swap: %w", err))
	}
	if moveErr != nil {
		return next, fmt.Errorf("rebuild: the old read models serve on: %w", moveErr)
	}
	return next, nil
}

// purge removes erased content from the new read models of a running
// rebuild (part of runtime.purge, after the live files are purged): during
// phase 1 it starts the copy over and waits until its files are deleted;
// later it applies the log to them and purges them.
func (j *liveRebuild) purge(ctx context.Context) error {
	j.mu.Lock()
	if j.cancelBuild != nil {
		j.erased = true
		j.cancelBuild()
		done := j.buildDone
		j.mu.Unlock()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("purge: wait for the rebuild to drop its copy: %w", ctx.Err())
		}
	}
	defer j.mu.Unlock()
	if j.scratch == nil {
		return nil
	}
	if err := projections.NewRunner(j.rt.raw, j.scratch.Projections()...).CatchUp(ctx, nil); err != nil {
		return fmt.Errorf("purge: the rebuild's read models: %w", err)
	}
	if err := j.scratch.purge(ctx); err != nil {
		return fmt.Errorf("purge: the rebuild's read models: %w", err)
	}
	return nil
}

// RebuildScratchPrefix names the scratch directories of rebuilds under
// <home>/hermes.
const RebuildScratchPrefix = "rebuild-"

// dropRebuildLeftovers deletes the scratch directories a rebuild left when
// its process died: they may hold content erased since. The caller holds
// the gateway lock, so no rebuild of this home runs.
func dropRebuildLeftovers(log *slog.Logger, h Home) {
	matches, _ := filepath.Glob(filepath.Join(h.HermesDir(), RebuildScratchPrefix+"*"))
	for _, m := range matches {
		if err := os.RemoveAll(m); err != nil {
			log.Warn("delete the leftovers of an interrupted rebuild", "dir", m, "err", err)
			continue
		}
		log.Info("deleted the leftovers of an interrupted rebuild", "dir", m)
	}
}

// rebuildHeadroom is added to the size of the read models in use for the
// space a rebuild needs: the new files are about as large as the old ones
// (smaller when the old ones carry free pages), plus SQLite's temporary
// files while the full-text indexes are built.
const rebuildHeadroom = 64 << 20

// checkRebuildSpace refuses a rebuild (events.ErrStorageFull, 507) when the
// home's file system cannot hold new read models beside the ones in use.
func checkRebuildSpace(h Home, freeBytes func(string) (uint64, error)) error {
	size := dbBytes(h.LanesDB()) + dbBytes(h.StateDB())
	need := uint64(size) + uint64(size)/5 + rebuildHeadroom
	free, err := freeBytes(h.HermesDir())
	if err != nil {
		return fmt.Errorf("rebuild: free space of %s: %w", h.HermesDir(), err)
	}
	if free < need {
		return fmt.Errorf("%w: a rebuild needs about %d MiB beside the read models in use (%d MiB), %d MiB are free",
			events.ErrStorageFull, need>>20, size>>20, free>>20)
	}
	return nil
}

// statfsFree is the space free for an unprivileged writer on path's file
// system.
func statfsFree(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// CheckRebuildSpace refuses a rebuild of h's read models (wrapping
// events.ErrStorageFull) when its file system cannot hold new ones beside
// those in use.
func CheckRebuildSpace(h Home) error { return checkRebuildSpace(h, statfsFree) }

// RebuildOffline rebuilds h's read models from store into a scratch
// directory and swaps them into place, reporting to tracker (begun by the
// caller, who also finishes it) and telling clamps of the values the new
// read models clamp. The caller holds the home's lock: no node serves it.
func RebuildOffline(ctx context.Context, h Home, store events.Store, tracker *projections.RebuildTracker, clamps projections.ClampReporter) error {
	scratch, err := os.MkdirTemp(h.HermesDir(), RebuildScratchPrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	err = projections.Rebuild(ctx, store, ScratchOpener(clamps), filepath.Join(scratch, "models"), tracker.Progress)
	if err != nil {
		return err
	}
	tracker.Enter(projections.RebuildSwapping)
	for _, m := range []struct{ from, to string }{
		{filepath.Join(scratch, "models", "lanes.db"), h.LanesDB()},
		{filepath.Join(scratch, "models", "state.db"), h.StateDB()},
	} {
		if err := replaceDB(m.from, m.to); err != nil {
			return err
		}
	}
	return nil
}

// replaceDB moves a rebuilt SQLite file over the live one, removing the
// live one's WAL and shared-memory files first (the server is stopped).
func replaceDB(from, to string) error {
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(to + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("replace %s: %w", to, err)
		}
	}
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("replace %s: %w", to, err)
	}
	return nil
}
