package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"hermes/events"
	"hermes/projections"
)

// errStorageNotReady: a read model cannot write at start, so recovery waits.
var errStorageNotReady = errors.New("a read model cannot write: storage full")

// recoveryRetry bounds the waits between the attempts of a recovery
// deferred by a full disk.
var recoveryRetry = projections.Backoff{Min: time.Second, Max: 30 * time.Second, After: time.After}

// retryableStorage reports whether a failed recovery is worth retrying once
// space returns: the log refused the write, or a read model cannot write.
func retryableStorage(err error, runner *projections.Runner) bool {
	return errors.Is(err, events.ErrStorageFull) || errors.Is(err, errStorageNotReady) || runner.StorageError() != nil
}

// background is the hooks router and expiry watcher, started once ready.
type background struct {
	mu      sync.Mutex
	stopped bool
	stopFn  func()
}

func (b *background) set(stop func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return false
	}
	b.stopFn = stop
	return true
}

// stop stops them (if started) and keeps them from starting later.
func (b *background) stop() {
	b.mu.Lock()
	stop := b.stopFn
	b.stopped, b.stopFn = true, nil
	b.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// becomeReady starts the background work and turns /readyz ready.
func (rt *runtime) becomeReady(ctx context.Context, bg *background) error {
	stopBackground, err := rt.startBackground(ctx)
	if err != nil {
		return err
	}
	// The sweep of damaged read models and the periodic backups stop with
	// the rest, and are waited for: a backup is finished or removed.
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop := func() {
		stopBackground()
		cancel()
		wg.Wait()
	}
	wg.Go(func() { rt.backupEvery(ctx) })
	wg.Go(func() {
		checkLater(ctx, rt.log, rt.home.lanesDB(), "lanes.db")
		checkLater(ctx, rt.log, rt.home.stateDB(), "state.db")
	})
	wg.Go(func() {
		tick := time.NewTicker(time.Hour)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				sweepBroken(rt.log, time.Now(), rt.cfg.Storage.BrokenRetention, rt.home.lanesDB(), rt.home.stateDB())
			}
		}
	})
	if !bg.set(stop) {
		stop() // the stop began meanwhile
		return nil
	}
	rt.server.SetReady(true)
	return nil
}

// recoverLater retries startup recovery, with backoff, until storage takes
// writes again, then turns ready. Meanwhile the server serves reads and
// refuses writes (507). It returns nil when ready or when ctx ends, and the
// error of a recovery that failed for another reason.
func (rt *runtime) recoverLater(ctx context.Context, bg *background) error {
	wait := recoveryRetry.Min
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-recoveryRetry.After(wait):
		}
		wait = min(wait*2, recoveryRetry.Max)
		if rt.runner.StorageError() != nil {
			continue
		}
		err := rt.recover(ctx)
		if err == nil {
			rt.log.Info("storage takes writes again: recovery done, ready")
			return rt.becomeReady(ctx, bg)
		}
		if ctx.Err() != nil {
			return nil
		}
		if !retryableStorage(err, rt.runner) {
			return err
		}
		rt.log.Warn("recovery still cannot write: storage full", "err", err, "retry_in", wait)
	}
}
