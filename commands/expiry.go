package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/samber/lo"

	"hermes/domain"
	"hermes/events"
)

// FinalizeReasonExpired is the reason the expiry watcher gives the
// on_session_finalize hooks.
const FinalizeReasonExpired = "session_expired"

// MaxFinalizeRetries is Hermes' _MAX_FINALIZE_RETRIES: after this many
// consecutive failed finalize hooks for one session id, the watcher marks the
// session finalized anyway (forced) so it does not retry forever.
const MaxFinalizeRetries = 3

// entryPruneEvery is how often the watcher prunes the routing entries
// (session_store_max_age_days), in clock time.
const entryPruneEvery = time.Hour

// defaultHookTimeout bounds one call of the finalize hook.
const defaultHookTimeout = 30 * time.Second

// FinalizeRequest is one on_session_finalize call.
type FinalizeRequest struct {
	SessionKey string
	SessionID  string
	Platform   string
	// Reason is FinalizeReasonExpired for the expiry watcher.
	Reason string
}

// FinalizeHook runs the side effects of finalizing an expired session
// (plugin hooks, notifications, agent clean-up). Finalize is called before
// the finalization is recorded, and again on a later pass when it fails or
// when the process died in between: it must tolerate repeats of the same
// request. An error means "not done, try again on the next pass".
type FinalizeHook interface {
	Finalize(ctx context.Context, r FinalizeRequest) error
}

// TranscriptPruner is what the automatic transcript prune needs from the
// transcripts read model and its database file.
type TranscriptPruner interface {
	// PrunableSessions returns the ids of the sessions that have ended and
	// started before now − olderThan, of one source unless source is "".
	PrunableSessions(ctx context.Context, olderThan time.Duration, source string, now time.Time) ([]string, error)
	// Vacuum compacts the transcripts database after rows were deleted
	// (the deletions reach it through the projection, so the caller makes
	// the read model current first when it matters). It may be slow.
	Vacuum(ctx context.Context) error
}

// AutoPruneRun is one run of the automatic transcript prune.
type AutoPruneRun struct {
	At       time.Time
	Pruned   int
	Vacuumed bool
	// Error is what cut the run short, "" when it completed.
	Error string
}

// AutoPruneLog remembers when the transcripts were last auto-pruned, so that
// sessions.min_interval_hours holds across restarts.
type AutoPruneLog interface {
	// LastAutoPrune returns the time of the last recorded run (the zero
	// time when there is none).
	LastAutoPrune(ctx context.Context) (time.Time, error)
	// RecordAutoPrune records a finished run (including one that failed:
	// like Hermes, a failed run still waits the interval).
	RecordAutoPrune(ctx context.Context, run AutoPruneRun) error
}

// ExpiryConfig configures an [ExpiryWatcher].
type ExpiryConfig struct {
	// Lanes lists the lanes to check; nil: the handler's directory.
	Lanes LaneDirectory
	// Hook is called for each expired session before it is marked
	// finalized; nil: no hooks, every expired session is finalized.
	Hook FinalizeHook
	// HookTimeout bounds one Hook call (default 30s).
	HookTimeout time.Duration

	// SessionStoreMaxAge is session_store_max_age_days: routing entries
	// not updated for this long are pruned, hourly; 0 disables it.
	SessionStoreMaxAge time.Duration

	// AutoPrune is sessions.auto_prune: delete ended transcripts older
	// than Retention at most once per AutoPruneMinInterval, and vacuum
	// the database afterwards when VacuumAfterPrune and something was
	// deleted. It needs Pruner and Transcripts.
	AutoPrune            bool
	Retention            time.Duration // sessions.retention_days
	AutoPruneMinInterval time.Duration // sessions.min_interval_hours
	VacuumAfterPrune     bool          // sessions.vacuum_after_prune
	Pruner               TranscriptPruner
	Transcripts          *TranscriptCommands
	// Purge, after an auto-prune erased transcripts, removes the erased
	// content from every file (docs/ERASURE.md); nil: the log's own
	// erasure only.
	Purge func(ctx context.Context) error
	// AutoPruneLog makes the last auto-prune time durable; nil keeps it in
	// memory only, so the first pass after every start may prune.
	AutoPruneLog AutoPruneLog

	// Log receives what the watcher did (nil: nothing is logged).
	Log func(level slog.Level, msg string, args ...any)

	// MayAct, when set, is asked right before each effect of a pass
	// outside the log (each finalize hook, the routing-entry prune, the
	// auto-prune): once it returns an error the pass stops there and
	// returns it. With several nodes it is the leader lease checked by
	// this node's own clock, so a leader paused past its lease that wakes
	// mid-pass runs no hook the next leader runs. Recording the
	// finalizations of hooks that already ran is not held back: those
	// appends are decided on each lane's expected version.
	MayAct func() error
}

// ExpiryWatcher is Hermes' _session_expiry_watcher: an application process
// that, on each pass, finalizes the sessions whose reset policy says they
// expired, prunes stale routing entries hourly and, when enabled, prunes
// ended transcripts. Every rule uses the handler's injected clock, and every
// change goes through the handler's commands, so a lane is re-read and
// re-decided before anything is appended.
type ExpiryWatcher struct {
	h   *Handler
	cfg ExpiryConfig

	// mu makes passes sequential; the fields below belong to it.
	mu sync.Mutex
	// failures counts consecutive failed hooks per session id.
	failures map[string]int
	// lastEntryPrune is the clock time of the last routing-entry prune
	// (zero: none yet, so the first pass prunes).
	lastEntryPrune time.Time
	// lastAutoPrune caches the last auto-prune time once loaded.
	lastAutoPrune       time.Time
	lastAutoPruneLoaded bool
}

// NewExpiryWatcher returns a watcher over h.
func NewExpiryWatcher(h *Handler, cfg ExpiryConfig) *ExpiryWatcher {
	if cfg.Lanes == nil {
		cfg.Lanes = h.directory
	}
	if cfg.HookTimeout <= 0 {
		cfg.HookTimeout = defaultHookTimeout
	}
	return &ExpiryWatcher{h: h, cfg: cfg, failures: map[string]int{}}
}

// PassReport says what one pass did.
type PassReport struct {
	// At is the clock time of the pass.
	At time.Time
	// Expired are the keys found expired and not yet finalized.
	Expired []string
	// Finalized are the keys finalized after their hooks succeeded.
	Finalized []string
	// Forced are the keys finalized without their hooks, which had failed
	// MaxFinalizeRetries times in a row.
	Forced []string
	// Retrying are the keys whose hook failed; the next pass retries.
	Retrying []string
	// EntriesPruned is true when the routing entries were pruned this pass
	// (hourly), and PrunedEntries lists the keys it dropped.
	EntriesPruned bool
	PrunedEntries []string
	// AutoPrune is the transcript prune run of this pass, nil when none
	// was due.
	AutoPrune *AutoPruneRun
}

// expiring is a lane the pass found expired, at a stream version.
type expiring struct {
	key     string
	version uint64
	req     FinalizeRequest
}

// Pass runs one pass at the handler clock's now. It carries on past
// per-lane failures and returns them joined; passes never overlap.
func (w *ExpiryWatcher) Pass(ctx context.Context) (PassReport, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.h.now()
	rep := PassReport{At: now}
	var errs []error

	due, err := w.expired(ctx, now)
	if err != nil {
		errs = append(errs, err)
	} else {
		w.forgetFailures(due)
	}
	if err := w.finalize(ctx, due, &rep); err != nil {
		errs = append(errs, err)
	}
	if err := ctx.Err(); err != nil {
		return rep, errors.Join(append(errs, err)...)
	}
	if err := w.mayAct(); err != nil {
		return rep, errors.Join(append(errs, err)...)
	}
	if err := w.pruneEntries(ctx, now, &rep); err != nil {
		errs = append(errs, err)
	}
	if err := w.mayAct(); err != nil {
		return rep, errors.Join(append(errs, err)...)
	}
	if err := w.autoPrune(ctx, now, &rep); err != nil {
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// mayAct is ExpiryConfig.MayAct (nil: always allowed).
func (w *ExpiryWatcher) mayAct() error {
	if w.cfg.MayAct == nil {
		return nil
	}
	if err := w.cfg.MayAct(); err != nil {
		return fmt.Errorf("expiry: %w", err)
	}
	return nil
}

// expired lists the lanes whose decided state, at now, says their session
// expired (by the lane's own reset policy; never with live processes) and
// was not finalized yet.
func (w *ExpiryWatcher) expired(ctx context.Context, now time.Time) ([]expiring, error) {
	if w.cfg.Lanes == nil {
		return nil, errors.New("expiry: no lane directory configured")
	}
	keys, err := w.cfg.Lanes.SessionKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("expiry: list lanes: %w", err)
	}
	var due []expiring
	var errs []error
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return due, err
		}
		l, version, err := w.h.Lane(ctx, key)
		if err != nil {
			errs = append(errs, fmt.Errorf("expiry: lane %s: %w", key, err))
			continue
		}
		if l.ExpiryFinalized || !l.Expired(w.h.cfg.rulesFor(l.Platform, l.ChatType), now) {
			continue
		}
		due = append(due, expiring{key: key, version: version, req: FinalizeRequest{
			SessionKey: key,
			SessionID:  l.SessionID,
			Platform:   platformOf(l, key),
			Reason:     FinalizeReasonExpired,
		}})
	}
	return due, errors.Join(errs...)
}

// platformOf is the lane's platform, or field [2] of its key as Hermes
// reads it.
func platformOf(l domain.Lane, key string) string {
	if l.Platform != "" {
		return l.Platform
	}
	if f := strings.Split(key, ":"); len(f) > 2 {
		return f[2]
	}
	return "unknown"
}

// forgetFailures drops the failure counts of sessions no longer due (used
// again, or finalized elsewhere): counts are of consecutive failures. It is
// called only after a complete scan, so a lane that could not be read keeps
// its count.
func (w *ExpiryWatcher) forgetFailures(due []expiring) {
	live := lo.Keyify(lo.Map(due, func(d expiring, _ int) string { return d.req.SessionID }))
	for id := range w.failures {
		if _, ok := live[id]; !ok {
			delete(w.failures, id)
		}
	}
}

// finalize runs the hooks of the due lanes, then records the finalization
// of every lane whose hook succeeded (or failed for the last time) as one
// batch (Handler.decideBatch: one transaction on the SQLite store). A pass
// stopped while the hooks run still records the lanes whose hooks ran, so
// they are not run again.
func (w *ExpiryWatcher) finalize(ctx context.Context, due []expiring, rep *PassReport) error {
	if len(due) == 0 {
		return nil
	}
	w.log(slog.LevelInfo, fmt.Sprintf("Session expiry: %d sessions to finalize (%s)", len(due), platformCounts(due)))
	var errs []error
	var ready []expiring
	var forced []bool
	for _, d := range due {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if err := w.mayAct(); err != nil {
			errs = append(errs, err)
			break
		}
		rep.Expired = append(rep.Expired, d.key)
		force := false
		if err := w.runHook(ctx, d.req); err != nil {
			if ctx.Err() != nil {
				errs = append(errs, ctx.Err())
				break
			}
			w.failures[d.req.SessionID]++
			n := w.failures[d.req.SessionID]
			if n < MaxFinalizeRetries {
				w.log(slog.LevelWarn, "session finalize hook failed; retrying on the next pass",
					"session_key", d.key, "session_id", d.req.SessionID, "attempt", n, "max", MaxFinalizeRetries, "err", err)
				rep.Retrying = append(rep.Retrying, d.key)
				continue
			}
			w.log(slog.LevelWarn, fmt.Sprintf("Session finalize for %s failed %d times; Marking as finalized to prevent infinite retry loop.", d.req.SessionID, n),
				"session_key", d.key, "session_id", d.req.SessionID, "err", err)
			force = true
		}
		ready = append(ready, d)
		forced = append(forced, force)
	}
	if len(ready) == 0 {
		return errors.Join(errs...)
	}
	// The id names this decision (the lane at this version), not the
	// session: a session switched back to later is a new incarnation that
	// may expire and be finalized again.
	targets := make([]sweepTarget, len(ready))
	for i, d := range ready {
		targets[i] = sweepTarget{key: d.key, commandID: fmt.Sprintf("finalize_expiry/%s@%d", d.req.SessionID, d.version)}
	}
	outcomes, err := w.h.decideBatch(context.WithoutCancel(ctx), "finalize_expiry", targets, func(i int, l domain.Lane, now time.Time) []events.Event {
		return l.FinalizeExpiry(w.h.cfg.rulesFor(l.Platform, l.ChatType), forced[i], now)
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("expiry: %w", err))
	}
	for i, o := range outcomes {
		d := ready[i]
		if o.err != nil {
			errs = append(errs, fmt.Errorf("expiry: %w", o.err))
			continue
		}
		if err != nil && o.events == nil {
			continue // not answered: the batch failed before this lane
		}
		delete(w.failures, d.req.SessionID)
		if !hasEvent[events.ExpiryFinalized](o.events) {
			continue // used again since, or finalized by someone else
		}
		if forced[i] {
			rep.Forced = append(rep.Forced, d.key)
		} else {
			rep.Finalized = append(rep.Finalized, d.key)
		}
	}
	return errors.Join(errs...)
}

func (w *ExpiryWatcher) runHook(ctx context.Context, r FinalizeRequest) (err error) {
	if w.cfg.Hook == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.HookTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("finalize hook panicked: %v", p)
		}
	}()
	return w.cfg.Hook.Finalize(ctx, r)
}

// platformCounts renders "telegram:2, discord:1", most first.
func platformCounts(due []expiring) string {
	counts := lo.CountValuesBy(due, func(d expiring) string { return d.req.Platform })
	names := lo.Keys(counts)
	sort.Slice(names, func(i, j int) bool {
		if counts[names[i]] != counts[names[j]] {
			return counts[names[i]] > counts[names[j]]
		}
		return names[i] < names[j]
	})
	return strings.Join(lo.Map(names, func(p string, _ int) string { return fmt.Sprintf("%s:%d", p, counts[p]) }), ", ")
}

// pruneEntries prunes the routing entries when an hour of clock time has
// passed since the last prune (the first pass always prunes).
func (w *ExpiryWatcher) pruneEntries(ctx context.Context, now time.Time, rep *PassReport) error {
	if !w.lastEntryPrune.IsZero() && now.Sub(w.lastEntryPrune) < entryPruneEvery {
		return nil
	}
	if w.cfg.SessionStoreMaxAge > 0 {
		pruned, err := w.h.PruneOldEntries(ctx, PruneOldEntries{MaxAge: w.cfg.SessionStoreMaxAge})
		rep.PrunedEntries = pruned
		if err != nil {
			// Not recorded as done: the next pass tries again.
			return fmt.Errorf("expiry: %w", err)
		}
		rep.EntriesPruned = true
		if len(pruned) > 0 {
			w.log(slog.LevelInfo, "pruned stale session entries", "count", len(pruned), "max_age", w.cfg.SessionStoreMaxAge)
		}
	}
	w.lastEntryPrune = now
	return nil
}

// autoPrune deletes ended transcripts older than the retention, at most once
// per AutoPruneMinInterval (Hermes' maybe_auto_prune_and_vacuum).
func (w *ExpiryWatcher) autoPrune(ctx context.Context, now time.Time, rep *PassReport) error {
	if !w.cfg.AutoPrune {
		return nil
	}
	if w.cfg.Pruner == nil || w.cfg.Transcripts == nil {
		return errors.New("expiry: sessions.auto_prune is on but no transcript pruner is configured")
	}
	if !w.lastAutoPruneLoaded {
		if w.cfg.AutoPruneLog != nil {
			last, err := w.cfg.AutoPruneLog.LastAutoPrune(ctx)
			if err != nil {
				return fmt.Errorf("expiry: last auto-prune: %w", err)
			}
			w.lastAutoPrune = last
		}
		w.lastAutoPruneLoaded = true
	}
	if !w.lastAutoPrune.IsZero() && now.Sub(w.lastAutoPrune) < w.cfg.AutoPruneMinInterval {
		return nil
	}
	run := AutoPruneRun{At: now}
	var errs []error
	ids, err := w.cfg.Pruner.PrunableSessions(ctx, w.cfg.Retention, "", now)
	if err != nil {
		errs = append(errs, fmt.Errorf("list prunable sessions: %w", err))
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		_, err := w.cfg.Transcripts.DeleteSession(ctx, DeleteSession{SessionID: id, Reason: events.DeletePruned, CommandID: "auto_prune/" + id,
			Erasure: events.ErasureRetention, RequestedBy: "expiry watcher"})
		if errors.Is(err, ErrSessionNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			break
		}
		run.Pruned++
	}
	if run.Pruned > 0 && w.cfg.Purge != nil {
		if err := w.cfg.Purge(ctx); err != nil {
			errs = append(errs, fmt.Errorf("purge erased content: %w", err))
		}
	}
	if run.Pruned > 0 && w.cfg.VacuumAfterPrune && len(errs) == 0 {
		if err := w.cfg.Pruner.Vacuum(ctx); err != nil {
			errs = append(errs, fmt.Errorf("vacuum: %w", err))
		} else {
			run.Vacuumed = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		run.Error = err.Error()
	}
	rep.AutoPrune = &run
	w.lastAutoPrune = now
	if w.cfg.AutoPruneLog != nil && ctx.Err() == nil {
		if err := w.cfg.AutoPruneLog.RecordAutoPrune(ctx, run); err != nil {
			errs = append(errs, fmt.Errorf("record auto-prune: %w", err))
		}
	}
	w.log(slog.LevelInfo, "auto-pruned ended sessions", "pruned", run.Pruned, "vacuumed", run.Vacuumed, "retention", w.cfg.Retention, "error", run.Error)
	if len(errs) > 0 {
		return fmt.Errorf("expiry: auto-prune: %w", errors.Join(errs...))
	}
	return nil
}

func (w *ExpiryWatcher) log(level slog.Level, msg string, args ...any) {
	if w.cfg.Log != nil {
		w.cfg.Log(level, msg, args...)
	}
}

// Run runs a pass on each tick until ctx is done or tick is closed. A failed
// pass is logged and the next tick tries again. It returns nil.
func (w *ExpiryWatcher) Run(ctx context.Context, tick <-chan time.Time) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-tick:
			if !ok {
				return nil
			}
			rep, err := w.Pass(ctx)
			if err != nil && ctx.Err() == nil {
				w.log(slog.LevelError, "expiry pass failed", "err", err)
			}
			if n := len(rep.Finalized) + len(rep.Forced); n > 0 {
				w.log(slog.LevelInfo, "expiry pass", "finalized", len(rep.Finalized), "forced", len(rep.Forced), "retrying", len(rep.Retrying))
			}
		}
	}
}

// ClockTicks turns an injected clock into ticks for [ExpiryWatcher.Run]: it
// looks at now every poll of real time and sends now once the clock has
// moved at least interval past the last tick (or the start). It is what
// serve uses with a manual test clock; with the system clock a
// time.Ticker does the same. The channel is closed when ctx is done.
func ClockTicks(ctx context.Context, now func() time.Time, interval, poll time.Duration) <-chan time.Time {
	out := make(chan time.Time)
	last := now()
	go func() {
		defer close(out)
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			cur := now()
			if cur.Sub(last) < interval {
				continue
			}
			select {
			case out <- cur:
				last = cur
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
