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

// startBackground starts the singleton duties: the hooks router (when
// webhooks are configured) and the expiry watcher (with auto-prune). On a
// single node they always run; with several nodes on one store (a node id)
// the cluster loop runs them only while this node holds the leader lease,
// and keeps the node's own lease and the adoption rule (leases.go). The
// returned stop cancels everything and waits for it; it may be called more
// than once.
func (rt *runtime) startBackground(ctx context.Context) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }

	var router *hooks.Router
	if len(rt.cfg.Hooks.Webhooks) > 0 {
		router, err = hooks.New(rt.raw, hooksConfig(rt.cfg.Hooks, rt.home.HermesDir(), rt.now, rt.log))
		if err != nil {
			cancel()
			return nil, err
		}
	}
	duties := func(ctx context.Context) { rt.runDuties(ctx, router) }
	if rt.handler.Node() == "" {
		wg.Go(func() { duties(ctx) })
		return stop, nil
	}
	c := &cluster{rt: rt, router: router, duties: duties, ttl: rt.cfg.Node.Lease, log: rt.log.With("component", "cluster")}
	wg.Go(func() { c.run(ctx) })
	return stop, nil
}

// runDuties runs the hooks router (when there is one) and the expiry
// watcher until ctx is done.
func (rt *runtime) runDuties(ctx context.Context, router *hooks.Router) {
	var wg sync.WaitGroup
	defer wg.Wait()
	var hook commands.FinalizeHook
	if router != nil {
		hook = router
		wg.Go(func() {
			for {
				err := router.Run(ctx)
				if err == nil || ctx.Err() != nil {
					return
				}
				rt.log.Error("hooks stopped; restarting from the checkpoint", "err", err, "in", hooksRetry)
				select {
				case <-ctx.Done():
					return
				case <-time.After(hooksRetry):
				}
			}
		})
	}

	log := rt.log.With("component", "expiry")
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
