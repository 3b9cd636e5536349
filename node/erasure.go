package node

import (
	"context"
	"fmt"
	"os"

	"hermes/api"
	"hermes/commands"
)

// purge makes erased content unrecoverable from every file hermes writes
// under the home (docs/ERASURE.md): it waits until both read models have
// applied the whole log (so they dropped the erased rows, zeroed by
// secure_delete), checkpoints and truncates the WAL of the log and of both
// read models, rewrites sessions.json, and drops the erased bodies from the
// webhooks' poison log, and deletes the damaged read models moved aside
// (heal.go) and the logs a restore kept aside (backup.go): they cannot be
// erased in, so they go. It is idempotent.
func (rt *runtime) purge(ctx context.Context) error {
	if err := rt.purgeLive(ctx); err != nil {
		return err
	}
	if err := dropPreRestoreLogs(rt.log, rt.home); err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	return dropBrokenCopies(rt.log, rt.home.LanesDB(), rt.home.StateDB())
}

// purgeForRequest is the purge an erasing request waits for
// (api.Deps.Purge): run by the purger, so that it completes when the
// request ends first.
func (rt *runtime) purgeForRequest(ctx context.Context) error {
	if rt.purges == nil {
		return rt.purge(ctx)
	}
	return rt.purges.purge(ctx)
}

// purgeStatus is api.Deps.PurgeStatus.
func (rt *runtime) purgeStatus() api.PurgeStatus {
	if rt.purges == nil {
		return api.PurgeStatus{}
	}
	return rt.purges.state()
}

// purgeLive is purge of the files in use, keeping the moved-aside copies.
func (rt *runtime) purgeLive(ctx context.Context) error {
	head, err := rt.raw.Head(ctx)
	if err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	if err := rt.runner.WaitFor(ctx, head); err != nil {
		return fmt.Errorf("purge: wait for the read models: %w", err)
	}
	if err := rt.purgeFiles(ctx); err != nil {
		return err
	}
	if rt.rebuilds != nil {
		// The new read models of a rebuild running meanwhile.
		return rt.rebuilds.purge(ctx)
	}
	return nil
}

// purgeFiles is purge once the read models have applied the erasures.
func (rt *runtime) purgeFiles(ctx context.Context) error {
	// The embedded and PostgreSQL stores rewrite erased events in place
	// and purge their files; KurrentDB destroyed the erased content's keys
	// in the erasure's append and scavenges its nodes (docs/ERASURE.md).
	if rt.eraser != nil {
		if err := rt.eraser.Purge(ctx); err != nil {
			return fmt.Errorf("purge: %w", err)
		}
	} else {
		// Said at every purge (each erasure, each start): on a store that
		// cannot erase, an erasure is not complete, and the operator must
		// know it. Every store hermes ships erases.
		rt.log.Warn("this event store cannot erase: what an erasure removed from the read models stays in the store's log (docs/ERASURE.md)")
	}
	return rt.purgeNodeFiles(ctx)
}

// recoverErasures finishes the person erasures a crash interrupted (their
// intent is on the log, their completion is not), then purges: an erasure
// acknowledged or not before a crash is complete in every file before
// hermes serves again.
//
// After a clean stop that purged every file (purgedAtStop), nothing erased
// can be left anywhere, and the start skips the purge: it rewrites
// sessions.json and checkpoints every file, most of a start's time.
func (rt *runtime) recoverErasures(ctx context.Context, purgedAtStop bool) error {
	n, err := rt.handler.ResumeErasures(ctx)
	if err != nil {
		return fmt.Errorf("recovery: %w", err)
	}
	if n > 0 {
		rt.log.Warn("finished person erasures interrupted by the previous run", "erasures", n)
		return rt.purge(ctx)
	}
	if purgedAtStop {
		// The stop scrubbed the free space of the files too: the first
		// purge of this run need not read every page again.
		if rt.purged != nil {
			rt.purged.MarkPurged()
		}
		rt.models.state().MarkPurged()
		return nil
	}
	// The last run did not purge at its stop (a crash, or read models
	// behind the log): an erasure it committed may never have reached a
	// read model moved aside since (a damaged file cannot be erased in),
	// so the moved-aside copies go too, whatever storage.broken_retention
	// says: the stricter rule for people's data wins over keeping damage to
	// look at.
	return rt.purge(ctx)
}

// purgeAtStop purges every file at a clean stop, after the stop is on the
// read models, and marks it so the next start can skip its purge. A purge
// that fails leaves no mark: the next start purges. So does a stop whose
// read models did not catch up (caughtUp false): an erasure they have not
// applied yet is purged by nothing else once they apply it at the next
// start.
func (rt *runtime) purgeAtStop(ctx context.Context, caughtUp bool) {
	if err := rt.purgeFiles(ctx); err != nil {
		rt.log.Warn("purge at stop failed; the next start purges", "err", err)
		return
	}
	if !caughtUp {
		rt.log.Warn("read models behind the log at stop; the next start purges")
		return
	}
	f, err := os.OpenFile(rt.home.PurgedAtStop(), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		rt.log.Warn("mark the purge at stop", "err", err)
		return
	}
	f.Sync()
	f.Close()
}

// purgeMarker is a store that can be told its files were purged at the
// last stop (sqlite.Store), so that its first purge need not read every
// page again.
type purgeMarker interface{ MarkPurged() }

// consumePurgedAtStop reports and removes the mark of purgeAtStop: it
// counts once, for the start right after that stop.
func (rt *runtime) consumePurgedAtStop() bool {
	path := rt.home.PurgedAtStop()
	if _, err := os.Stat(path); err != nil {
		return false
	}
	if err := os.Remove(path); err != nil {
		rt.log.Warn("could not consume the purge mark; purging at start", "err", err)
		return false
	}
	return true
}

// Forget erases a person on a home no node serves (it takes the gateway
// lock; a running node does the same at POST /v1/erasure): it finishes
// the erasures a crash interrupted, erases the person, and returns once the
// content is unrecoverable from every file under the home.
func Forget(ctx context.Context, c Config, f commands.Forget) (commands.ForgetReport, error) {
	s, log := settingsOf(c), c.Log
	if err := s.home.RequireStore(); err != nil {
		return commands.ForgetReport{}, err
	}
	lock, err := s.home.Lock()
	if err != nil {
		return commands.ForgetReport{}, fmt.Errorf("cannot forget offline on %s (is hermes serve running? then use POST /v1/erasure): %w", s.home.Dir, err)
	}
	defer lock.Release()
	rt := newRuntime(s, log)
	if err := rt.open(ctx, nil); err != nil {
		return commands.ForgetReport{}, err
	}
	defer rt.close()
	rt.store = rt.raw
	rt.handler = commands.NewHandler(rt.store, WriteSideConfig(s.cfg), commands.WithClock(rt.now), commands.WithDirectory(rt.models.lanes()))
	if _, err := rt.handler.ResumeErasures(ctx); err != nil {
		return commands.ForgetReport{}, err
	}
	rep, err := rt.handler.Forget(ctx, f)
	if err != nil {
		return commands.ForgetReport{}, err
	}
	if err := rt.runner.CatchUp(ctx, nil); err != nil {
		return commands.ForgetReport{}, err
	}
	if err := rt.purgeFiles(ctx); err != nil {
		return commands.ForgetReport{}, err
	}
	return rep, nil
}
