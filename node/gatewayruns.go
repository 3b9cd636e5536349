package node

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"hermes/api"
	"hermes/commands"
)

// gatewayRunTick is how often, by the runtime's clock, the lease duty looks
// at the gateway processes' runs.
const gatewayRunTick = 5 * time.Second

// runGatewayRunLeases is the lease duty of the gateway processes that run
// on hermes (Hermes' GatewayRunner through the Python client): each tick a
// run whose lease expired by hermes' clock, and a full lease after this
// start (a gateway cannot beat while hermes is down), is recorded lost, and
// the turns of runs that ended get crash recovery
// (commands.Handler.RecoverGatewayRuns). It runs with the singleton duties
// (the leader's, with several nodes) until ctx is done.
func (rt *runtime) runGatewayRunLeases(ctx context.Context, log *slog.Logger) {
	// The grace counts from when this node began to serve (a gateway can
	// beat from then on), not from when the duty's goroutine got to run:
	// on a loaded machine that can be after the clock moved past a lease.
	started := rt.servingSince
	ticks := rt.ticks(ctx, gatewayRunTick)
	for {
		out, err := rt.gatewayRunRound(ctx, started)
		if err != nil && ctx.Err() == nil {
			log.Warn("gateway run leases: round failed; retrying next tick", "err", err)
		}
		for _, o := range out {
			if o.Appended {
				log.Warn("a gateway run died without a word (its lease expired): recovered its turns",
					"gateway", o.Ended.Gateway, "run_id", o.Ended.RunID, "lease_until", o.Ended.LeaseUntil, "cut", o.Interrupted)
			} else {
				log.Info("closed the open turns of an ended gateway run", "lanes", o.Interrupted)
			}
		}
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ticks:
			if !ok {
				return
			}
		}
	}
}

// gatewayRunRound is one round of the lease duty.
func (rt *runtime) gatewayRunRound(ctx context.Context, started time.Time) ([]commands.GatewayRunOutcome, error) {
	m, release := api.AcquireModels(ctx, rt.models.requests)
	defer release()
	runs, err := m.Lanes.RunningGatewayRuns(ctx)
	if err != nil {
		return nil, err
	}
	var gateways []string
	for _, r := range runs {
		gateways = append(gateways, r.Gateway)
	}
	slices.Sort(gateways)
	return rt.handler.RecoverGatewayRuns(ctx, openTurnKeys{m}, commands.RecoverGatewayRuns{
		Gateways:  slices.Compact(gateways),
		NotBefore: func(lease time.Duration) time.Time { return started.Add(lease) },
	})
}

// openTurnKeys lists the lanes with an open turn from the lane read model.
type openTurnKeys struct{ m api.ReadModels }

func (o openTurnKeys) OpenTurnKeys(ctx context.Context) ([]string, error) {
	rows, err := o.m.Lanes.OpenTurns(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r.Lane.SessionKey
	}
	return keys, nil
}

// gatewayRunsRunning reports whether a gateway process has a run open in
// the log: its conversations are then its own, and hermes' unclean start
// leaves their recently active lanes alone (the gateway applies that rule
// at its own unclean start, as Hermes does).
func (rt *runtime) gatewayRunsRunning(ctx context.Context) (bool, error) {
	m, release := api.AcquireModels(ctx, rt.models.requests)
	defer release()
	runs, err := m.Lanes.RunningGatewayRuns(ctx)
	return len(runs) > 0, err
}

// ownRunTurns keeps, among open turns, those hermes' own run owns: not a
// gateway process's (their run's end cuts them, not hermes' restarts), and
// with several nodes only this node's.
func ownRunTurns(turns []commands.OpenTurn, node string) []string {
	var own []string
	for _, t := range turns {
		if t.GatewayRun == "" && (node == "" || t.Node == node) {
			own = append(own, t.Key)
		}
	}
	return own
}
