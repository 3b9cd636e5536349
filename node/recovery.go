package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/samber/lo"

	"hermes/adapters/config"
	"hermes/commands"
	"hermes/events"
	"hermes/projections/sessions"
)

// recover runs startup recovery before /readyz turns ready and before any
// turn is accepted: after an unclean stop, lanes whose turn was open are
// closed and marked resume-pending (restart_interrupted) and counted toward
// the stuck-loop limit; lanes active in the last recovery.recent_seconds
// are marked too; lanes that reached the limit are suspended. Then the
// start is recorded.
func (rt *runtime) recover(ctx context.Context) error {
	prev, err := rt.handler.PreviousRun(ctx)
	if err != nil {
		return err
	}
	clean := !prev.Started || prev.Stopped && prev.Clean
	// The marker stands in for a clean stop only when the log does not say
	// the previous run died: a run that started and never stopped crashed,
	// whatever file is lying around.
	crashed := prev.Started && !prev.Stopped
	purgedAtStop := rt.consumePurgedAtStop() && !crashed
	if rt.consumeCleanShutdownMarker() && !crashed {
		if _, err := rt.handler.RecordGateway(ctx, commands.RecordGateway{Event: events.MarkerHonoured{At: rt.now()}}); err != nil {
			return err
		}
		clean = true
	}
	if !clean {
		if err := rt.recoverInterruptedRun(ctx, prev); err != nil {
			return fmt.Errorf("recovery: %w", err)
		}
	}
	if err := rt.suspendStuckLoops(ctx); err != nil {
		return fmt.Errorf("recovery: %w", err)
	}
	pos, err := rt.handler.RecordGateway(ctx, commands.RecordGateway{Event: events.GatewayStarted{
		PID: os.Getpid(), ProcessStartedAt: processStart.UTC(), PreviousRunClean: clean, At: rt.now(),
	}})
	if err != nil {
		return err
	}
	if err := rt.runner.WaitFor(ctx, pos); err != nil {
		return err
	}
	return rt.recoverErasures(ctx, purgedAtStop)
}

// consumeCleanShutdownMarker honours and removes Hermes' .clean_shutdown.
func (rt *runtime) consumeCleanShutdownMarker() bool {
	path := rt.home.CleanShutdown()
	if _, err := os.Stat(path); err != nil {
		return false
	}
	if err := os.Remove(path); err != nil {
		rt.log.Warn("could not consume .clean_shutdown; treating the previous run as unclean", "err", err)
		return false
	}
	if d, err := os.Open(rt.home.Dir); err == nil {
		d.Sync() // the removal must survive a power loss, or the marker could count twice
		d.Close()
	}
	rt.log.Info("previous run exited cleanly (.clean_shutdown) — skipping session recovery")
	return true
}

// recoverInterruptedRun handles a previous run that did not stop cleanly.
func (rt *runtime) recoverInterruptedRun(ctx context.Context, prev commands.GatewayRun) error {
	if err := rt.caughtUp(ctx); err != nil {
		return err
	}
	open, err := rt.openLanes(ctx)
	if err != nil {
		return err
	}
	if open, err = rt.ownTurns(ctx, open); err != nil {
		return err
	}
	if !prev.Stopped {
		// A crash: the turns open in the log were open when it died, and
		// each counts one interrupted restart for its lane.
		if _, err := rt.handler.RecordGateway(ctx, commands.RecordGateway{Event: events.RunInterrupted{OpenLanes: open, At: rt.now()}}); err != nil {
			return err
		}
	}
	for _, key := range open {
		if _, err := rt.handler.InterruptTurn(ctx, commands.InterruptTurn{Key: key, Reason: events.ResumeRestartInterrupted}); err != nil {
			return err
		}
	}
	if err := rt.caughtUp(ctx); err != nil {
		return err
	}
	var recent []string
	gatewayRuns, err := rt.gatewayRunsRunning(ctx)
	if err != nil {
		return err
	}
	if rt.handler.Node() == "" && !gatewayRuns {
		// With several nodes only the turns this node opened are
		// recovered: a lane is not pinned to a node (one chat's messages
		// may reach any node), so lanes recently active are most likely
		// served by live nodes, and marking them would disturb those. The
		// open turn, tracked exactly, is what a crash cuts.
		recent, err = rt.handler.SuspendRecentlyActive(ctx, commands.SuspendRecentlyActive{MaxAge: rt.cfg.Recovery.Recent})
		if err != nil {
			return err
		}
	}
	rt.log.Warn("previous run did not stop cleanly: recovered", "open_turns", len(open), "recently_active_marked", len(recent))
	return nil
}

// ownTurns keeps, among lanes with an open turn, those whose turn this node
// opened (the turn_started event carries the node's name), leaving out the
// turns of gateway processes' runs (gatewayruns.go). On a single node every
// other open turn is its own. The turns of a node that never comes back are
// closed by another node once that node's lease expired (the adoption rule,
// leases.go; see the README, Running on KurrentDB).
func (rt *runtime) ownTurns(ctx context.Context, open []string) ([]string, error) {
	turns, err := rt.handler.OpenTurns(ctx, open)
	if err != nil {
		return nil, err
	}
	return ownRunTurns(turns, rt.handler.Node()), nil
}

// suspendStuckLoops suspends the lanes whose turn was cut by the last
// recovery.stuck_loop_threshold consecutive bad stops, so the user gets a
// clean slate.
func (rt *runtime) suspendStuckLoops(ctx context.Context) error {
	if err := rt.caughtUp(ctx); err != nil {
		return err
	}
	threshold := rt.cfg.Recovery.StuckLoopThreshold
	stuck, err := rt.models.lanes().StuckLanes(ctx, threshold)
	if err != nil {
		return err
	}
	for _, key := range stuck {
		row, err := rt.models.lanes().Lane(ctx, key)
		if errors.Is(err, sessions.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if row.Lane.Suspended {
			continue
		}
		if _, err := rt.handler.SuspendSession(ctx, commands.SuspendSession{Key: key, Reason: events.SuspendStuckLoop}); err != nil {
			return err
		}
		rt.log.Warn("auto-suspended a stuck session: its turn was interrupted by consecutive restarts",
			"session_key", key, "threshold", threshold)
	}
	return nil
}

// caughtUp waits until the read models have applied the whole log.
func (rt *runtime) caughtUp(ctx context.Context) error {
	head, err := rt.raw.Head(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return rt.runner.WaitFor(ctx, head)
}

func (rt *runtime) openLanes(ctx context.Context) ([]string, error) {
	rows, err := rt.models.lanes().OpenTurns(ctx)
	if err != nil {
		return nil, err
	}
	return lo.Map(rows, func(r sessions.Row, _ int) string { return r.Lane.SessionKey }), nil
}

// drainPoll is how often the drain looks for turns that completed.
const drainPoll = 50 * time.Millisecond

// maxStopReserve is the most a stop keeps of agent.shutdown_timeout, after
// the drain, for shutting the HTTP server down and recording the stop.
const maxStopReserve = 10 * time.Second

// drainTimeout is how long a stop waits for open turns:
// agent.restart_drain_timeout, but no more than agent.shutdown_timeout less
// a reserve (a quarter of it, at most 10 s), so the whole stop ends within
// agent.shutdown_timeout. With the defaults (180 s, 60 s): 50 s.
func drainTimeout(a config.Agent) time.Duration {
	reserve := min(maxStopReserve, a.ShutdownTimeout/4)
	return max(0, min(a.RestartDrainTimeout, a.ShutdownTimeout-reserve))
}

// drain stops accepting turns and waits up to timeout (drainTimeout) for
// the open ones to complete; those still open are interrupted and marked
// resume-pending (shutdown_timeout or restart_timeout). It reports whether
// the drain completed. It logs one line when it starts, naming the open
// lanes, one per lane as its turn completes or is interrupted, and one at
// the end.
func (rt *runtime) drain(ctx context.Context, restarting bool, timeout time.Duration) bool {
	ctx = context.WithoutCancel(ctx)
	began := time.Now()
	deadline := began.Add(timeout)
	rt.server.SetDraining(true)
	// failed: the drain could not see the open turns; the stop is then
	// not clean, so the next start recovers instead of trusting it.
	failed := false
	// look reads the open turns once the read models caught up, giving up
	// at the deadline (or after a second, when the deadline is that near:
	// with no time to wait the drain still looks once).
	look := func() []string {
		until := deadline
		if soon := time.Now().Add(time.Second); until.Before(soon) {
			until = soon
		}
		lookCtx, cancel := context.WithDeadline(ctx, until)
		defer cancel()
		if err := rt.caughtUp(lookCtx); err != nil {
			rt.log.Error("drain: read model", "err", err)
			failed = true
			return nil
		}
		open, err := rt.openLanes(lookCtx)
		if err == nil {
			// With several nodes, only the turns this node opened: the
			// others' go on on their nodes.
			open, err = rt.ownTurns(lookCtx, open)
		}
		if err != nil {
			rt.log.Error("drain: open turns", "err", err)
			failed = true
		}
		return open
	}
	open := look()
	if _, err := rt.handler.RecordGateway(ctx, commands.RecordGateway{Event: events.DrainStarted{Restart: restarting, OpenLanes: nonNilKeys(open), At: rt.now()}}); err != nil {
		rt.log.Error("drain: record start", "err", err)
	}
	rt.log.Info("draining: no new turns; waiting for the open ones", "open", len(open), "lanes", open, "timeout", timeout)
	for len(open) > 0 && !failed && time.Now().Before(deadline) {
		time.Sleep(min(drainPoll, time.Until(deadline)))
		still := look()
		if failed {
			break
		}
		for _, key := range open {
			if !slices.Contains(still, key) {
				rt.log.Info("drain: turn completed", "session_key", key)
			}
		}
		open = still
	}
	reason := events.ResumeShutdownTimeout
	if restarting {
		reason = events.ResumeRestartTimeout
	}
	for _, key := range open {
		if _, err := rt.handler.InterruptTurn(ctx, commands.InterruptTurn{Key: key, Reason: reason}); err != nil {
			rt.log.Error("drain: interrupt turn", "session_key", key, "err", err)
			continue
		}
		rt.log.Warn("drain: turn still open, interrupted and marked to resume", "session_key", key, "reason", reason)
	}
	timedOut := len(open) > 0 || failed
	if _, err := rt.handler.RecordGateway(ctx, commands.RecordGateway{Event: events.DrainFinished{TimedOut: timedOut, OpenLanes: nonNilKeys(open), At: rt.now()}}); err != nil {
		rt.log.Error("drain: record finish", "err", err)
	}
	rt.log.Info("drain finished", "timed_out", timedOut, "interrupted", len(open), "took", time.Since(began).Round(time.Millisecond))
	return !timedOut
}

// finish records the stop and, only after a completed drain, writes Hermes'
// .clean_shutdown marker. It waits for the read models until stopBy at most.
func (rt *runtime) finish(ctx context.Context, clean, restarting bool, stopBy time.Time) {
	ctx = context.WithoutCancel(ctx)
	pos, err := rt.handler.RecordGateway(ctx, commands.RecordGateway{Event: events.GatewayStopped{Clean: clean, Restart: restarting, At: rt.now()}})
	if err != nil {
		rt.log.Error("record stop", "err", err)
		return
	}
	waitCtx, cancel := context.WithTimeout(ctx, min(10*time.Second, time.Until(stopBy)))
	defer cancel()
	caughtUp := true
	if err := rt.runner.WaitFor(waitCtx, pos); err != nil {
		rt.log.Warn("read model did not catch up before exit", "err", err)
		caughtUp = false
	}
	if clean {
		rt.purgeAtStop(waitCtx, caughtUp)
		f, err := os.OpenFile(rt.home.CleanShutdown(), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			rt.log.Error("write .clean_shutdown", "err", err)
			return
		}
		f.Sync()
		f.Close()
	}
}

func nonNilKeys(keys []string) []string {
	if keys == nil {
		return []string{}
	}
	return keys
}
