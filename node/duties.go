package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"hermes/adapters/config"
	"hermes/adapters/hooks"
	"hermes/commands"
)

// manualTickPoll is how often, with --clock=manual, the expiry watcher
// looks whether the test clock moved a whole interval.
const manualTickPoll = 50 * time.Millisecond

// hooksRetry is the wait before the hooks router is restarted after it
// stopped on an error (a store or checkpoint failure).
const hooksRetry = 5 * time.Second

// duties is a set of a node's background duties. Every duty is registered
// with start, which owns what each would otherwise do for itself: its
// context (ended by stop), its logger (the node's, with component=<name>),
// and its end (stop cancels every duty of the set and waits for it).
// Nothing starts once stop began, so a duty started late (once a recovery
// deferred by a full disk succeeds) cannot outlive the stop.
type duties struct {
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	stopped bool
}

// newDuties is an empty set whose duties run until ctx ends or stop.
func newDuties(ctx context.Context, log *slog.Logger) *duties {
	ctx, cancel := context.WithCancel(ctx)
	return &duties{log: log, ctx: ctx, cancel: cancel}
}

// start runs duty on a goroutine of its own until its context ends. It
// reports false, and runs nothing, once stop began.
func (d *duties) start(name string, duty func(ctx context.Context, log *slog.Logger)) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return false
	}
	log := d.log.With("component", name)
	d.wg.Go(func() {
		log.Debug("duty started")
		duty(d.ctx, log)
		log.Debug("duty stopped")
	})
	return true
}

// stop ends every duty of the set and waits for them; it may be called
// more than once.
func (d *duties) stop() {
	d.mu.Lock()
	d.stopped = true
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
}

// becomeReady starts the background duties on bg and turns /readyz ready:
// the singleton duties (directly on a single node; with several nodes on
// one store, the cluster loop runs them while this node leads, and keeps
// the node's own lease and the adoption rule, leases.go, and the purge of
// this node's files after other nodes' erasures, erasurefollow.go), the periodic
// backups, the quick check of read models too big to check before ready,
// and the sweep of damaged read models past their retention. When the stop
// began meanwhile it starts nothing and stays not ready.
func (rt *runtime) becomeReady(bg *duties) error {
	// With several nodes, every effect of a singleton duty outside the log
	// first checks, by this node's clock, that it still leads.
	var c *cluster
	var mayAct func() error
	if rt.handler.Node() != "" {
		c = &cluster{rt: rt, ttl: rt.cfg.Node.Lease, log: rt.log.With("component", "cluster")}
		mayAct = c.mayAct
	}
	var router *hooks.Router
	if len(rt.cfg.Hooks.Webhooks) > 0 {
		var err error
		hc := hooksConfig(rt.cfg.Hooks, rt.home.HermesDir(), rt.now, rt.log)
		hc.MayAct = mayAct
		router, err = hooks.New(rt.raw, hc)
		if err != nil {
			return err
		}
	}
	var started bool
	if c == nil {
		started = rt.startSingletons(bg, router, nil)
	} else {
		c.router = router
		started = bg.start("cluster", func(ctx context.Context, _ *slog.Logger) { c.run(ctx) }) &&
			bg.start("erasures", rt.followErasures)
	}
	started = started &&
		bg.start("backup", rt.backupEvery) &&
		bg.start("heal", func(ctx context.Context, log *slog.Logger) {
			lanes := checkLater(ctx, log, rt.home.LanesDB(), "lanes.db", rt.startCheckMax)
			state := checkLater(ctx, log, rt.home.StateDB(), "state.db", rt.startCheckMax)
			if lanes || state {
				select { // run heals them (healing.go)
				case rt.damageFound <- struct{}{}:
				default:
				}
			}
		}) &&
		bg.start("sweep", func(ctx context.Context, log *slog.Logger) {
			tick := time.NewTicker(time.Hour)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					sweepBroken(log, time.Now(), rt.cfg.Storage.BrokenRetention, rt.home.LanesDB(), rt.home.StateDB())
				}
			}
		})
	if !started {
		return nil // the stop began meanwhile
	}
	rt.server.SetReady(true)
	return nil
}

// startSingletons starts on d the duties one node of a store runs: the
// hooks router (when webhooks are configured), the expiry watcher (with
// auto-prune) and the lease duty of the gateway processes' runs. It
// reports false when d is stopping. mayAct (nil on a single node) is
// asked right before each effect of the expiry watcher.
func (rt *runtime) startSingletons(d *duties, router *hooks.Router, mayAct func() error) bool {
	var hook commands.FinalizeHook
	if router != nil {
		hook = router
		if !d.start("hooks", func(ctx context.Context, log *slog.Logger) { rt.runHooks(ctx, log, router) }) {
			return false
		}
	}
	return d.start("expiry", func(ctx context.Context, log *slog.Logger) { rt.watchExpiry(ctx, log, hook, mayAct) }) &&
		d.start("gateway-runs", rt.runGatewayRunLeases)
}

// runHooks runs the hooks router until ctx is done, restarting it from its
// checkpoint after it stopped on an error.
func (rt *runtime) runHooks(ctx context.Context, log *slog.Logger, router *hooks.Router) {
	for {
		err := router.Run(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		log.Error("hooks stopped; restarting from the checkpoint", "err", err, "in", hooksRetry)
		select {
		case <-ctx.Done():
			return
		case <-time.After(hooksRetry):
		}
	}
}

// watchExpiry runs the expiry watcher, with auto-prune, until ctx is done;
// hook (when not nil) is told of each finalized session.
func (rt *runtime) watchExpiry(ctx context.Context, log *slog.Logger, hook commands.FinalizeHook, mayAct func() error) {
	s := rt.cfg.Sessions
	watcher := commands.NewExpiryWatcher(rt.handler, commands.ExpiryConfig{
		Lanes:                rt.models.lanes(),
		Hook:                 hook,
		SessionStoreMaxAge:   time.Duration(rt.cfg.SessionStoreMaxAgeDays) * 24 * time.Hour,
		AutoPrune:            s.AutoPrune,
		Retention:            time.Duration(s.RetentionDays) * 24 * time.Hour,
		AutoPruneMinInterval: time.Duration(s.MinIntervalHours) * time.Hour,
		VacuumAfterPrune:     s.VacuumAfterPrune,
		Pruner:               transcriptPruner{rt},
		Purge:                rt.purge,
		Transcripts:          rt.handler.Transcripts(pruneIndex{rt.models.reader()}),
		AutoPruneLog:         rt.handler,
		MayAct:               mayAct,
		Log:                  func(level slog.Level, msg string, args ...any) { log.Log(context.Background(), level, msg, args...) },
	})
	watcher.Run(ctx, rt.ticks(ctx, rt.cfg.Expiry.Interval))
}

// ticks ticks every interval of the runtime's clock until ctx is done: a
// time.Ticker on the system clock, commands.ClockTicks on a manual one.
func (rt *runtime) ticks(ctx context.Context, interval time.Duration) <-chan time.Time {
	if rt.manualClock {
		return commands.ClockTicks(ctx, rt.now, interval, manualTickPoll)
	}
	t := time.NewTicker(interval)
	out := make(chan time.Time)
	go func() {
		defer t.Stop()
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				select {
				case out <- now:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

func hooksConfig(c config.Hooks, dir string, now func() time.Time, log *slog.Logger) hooks.Config {
	out := hooks.Config{
		Dir:         dir,
		StartAtHead: c.StartAtHead,
		MaxInFlight: c.MaxInFlight,
		Now:         now,
		Log:         log.With("component", "hooks"),
	}
	for _, w := range c.Webhooks {
		out.Webhooks = append(out.Webhooks, hooks.WebhookConfig{
			Name: w.Name, URL: w.URL, EventTypes: w.EventTypes, Secret: w.Secret,
			MaxRetries: w.MaxRetries, Backoff: w.Backoff, MaxBackoff: w.MaxBackoff, Timeout: w.Timeout,
		})
	}
	return out
}

// transcriptPruner is the expiry watcher's view of state.db.
type transcriptPruner struct{ rt *runtime }

func (p transcriptPruner) PrunableSessions(ctx context.Context, olderThan time.Duration, source string, now time.Time) ([]string, error) {
	return p.rt.models.reader().PrunableSessions(ctx, olderThan, source, now)
}

// Vacuum waits for the deletions to reach state.db, then compacts it.
func (p transcriptPruner) Vacuum(ctx context.Context) error {
	if err := p.rt.caughtUp(ctx); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return p.rt.models.state().Vacuum(ctx)
}

// pruneIndex is the transcript index the auto-prune deletions check
// against (DeleteSession only asks whether a session exists).
type pruneIndex struct{ r liveReader }

func (x pruneIndex) SessionExists(ctx context.Context, id string) (bool, error) {
	return x.r.SessionExists(ctx, id)
}

func (x pruneIndex) TitleOwner(ctx context.Context, title string) (string, error) {
	return x.r.TitleOwner(ctx, title)
}

func (pruneIndex) LaneOfSession(context.Context, string) (string, error) { return "", nil }

// SessionTotals is never asked by the deletions the auto-prune makes.
func (pruneIndex) SessionTotals(context.Context, string) (commands.SessionTotals, error) {
	return commands.SessionTotals{}, errors.New("the auto-prune index has no session totals")
}
