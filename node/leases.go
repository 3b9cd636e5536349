package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"hermes/adapters/hooks"
	"hermes/commands"
	"hermes/domain"
	"hermes/events"
)

// releaseTimeout bounds the release of the leader lease at a stop.
const releaseTimeout = 5 * time.Second

// cluster is what a node among several on one store (a node id) runs in the
// background, every third of node.lease_seconds (ttl) of its clock:
//
//   - its own lease, on its gateway stream (lease.acquired, then
//     lease.renewed with until = now + ttl): the proof it is alive;
//   - the leader lease (stream lease-leader): while it holds it, the
//     singleton duties run (webhook delivery, the expiry watcher,
//     auto-prune); the lease events carry the webhook checkpoint;
//   - the adoption rule: the runs of other nodes whose lease expired, with
//     turns still open, are ended in their place
//     (commands.Handler.AdoptDeadRuns).
//
// See the README, Running on KurrentDB.
type cluster struct {
	rt     *runtime
	router *hooks.Router
	ttl    time.Duration
	log    *slog.Logger

	// singletons are the singleton duties while this node leads.
	singletons *duties
	// mu guards lease, which the duties read (mayAct).
	mu sync.Mutex
	// lease is the leader lease as this node last saw it.
	lease domain.Lease
}

// errNotLeader: the duty's effect was held back, this node no longer
// leads by its own clock.
var errNotLeader = errors.New("not the leader by this node's clock")

// leaderLease is the leader lease as this node last saw it.
func (c *cluster) leaderLease() domain.Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lease
}

// mayAct is what a singleton duty asks right before each of its effects:
// nil while this node holds the leader lease, with the margin, by its own
// clock now. A leader paused past its lease wakes with its clock past the
// lease it last saw, so it acts no more, before its next round even runs.
func (c *cluster) mayAct() error {
	l := c.leaderLease()
	if now := c.rt.now(); !l.HeldBy(c.rt.handler.Node(), now, c.margin()) {
		return fmt.Errorf("%w: lease held by %q until %s, now %s", errNotLeader, l.Holder, l.Until.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	}
	return nil
}

// margin is how long before its lease's end a holder stops acting as
// holder: the clock skew between nodes the rule tolerates.
func (c *cluster) margin() time.Duration { return c.ttl / 3 }

// run runs a round at once and then on each tick until ctx is done, then
// stops the duties and releases the leader lease.
func (c *cluster) run(ctx context.Context) {
	defer c.release()
	ticks := c.rt.ticks(ctx, c.ttl/3)
	for {
		c.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
	}
}

func (c *cluster) round(ctx context.Context) {
	if err := c.rt.handler.RenewNodeLease(ctx, c.ttl); err != nil {
		if errors.Is(err, commands.ErrRunAdopted) {
			c.log.Error("another node adopted this node's run (its lease had expired): restarting", "err", err)
			c.lead(ctx, false)
			c.rt.requestRestart()
			return
		}
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("node lease not renewed; retrying next round", "err", err)
	}
	c.claimLeader(ctx)
	c.adopt(ctx)
}

// claimLeader keeps or takes the leader lease and starts or stops the
// duties to match. When the claim fails (the store is unreachable), the
// duties go on until the margin before the lease's end.
func (c *cluster) claimLeader(ctx context.Context) {
	var delivered uint64
	if c.router != nil {
		cp, err := c.router.Checkpoint()
		if err != nil {
			c.log.Warn("hooks checkpoint", "err", err)
		}
		delivered = cp
	}
	lease, err := c.rt.handler.ClaimLease(ctx, commands.ClaimLease{Stream: events.LeaderLease, TTL: c.ttl, Delivered: delivered})
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("leader lease not claimed; retrying next round", "err", err)
	} else {
		c.mu.Lock()
		c.lease = lease
		c.mu.Unlock()
	}
	c.lead(ctx, c.leaderLease().HeldBy(c.rt.handler.Node(), c.rt.now(), c.margin()))
}

// lead starts the duties when leading and they are not running, and stops
// them when not leading.
func (c *cluster) lead(ctx context.Context, leading bool) {
	running := c.singletons != nil
	lease := c.leaderLease()
	switch {
	case leading && !running:
		if c.router != nil {
			// Resume where the previous holders recorded they were.
			if err := hooks.AdvanceCheckpoint(c.rt.home.HermesDir(), lease.Delivered); err != nil {
				c.log.Error("leader: cannot move the hooks checkpoint; not running the duties", "err", err)
				return
			}
		}
		c.singletons = newDuties(ctx, c.rt.log)
		c.rt.startSingletons(c.singletons, c.router, c.mayAct)
		c.log.Info("leader: running webhooks, the expiry watcher and auto-prune", "until", lease.Until, "delivered", lease.Delivered)
	case !leading && running:
		c.singletons.stop()
		c.singletons = nil
		c.log.Info("no longer leader: duties stopped", "holder", lease.Holder, "until", lease.Until)
	}
}

// release stops the duties and gives the leader lease up with the final
// webhook checkpoint, so another node takes over at its next round.
func (c *cluster) release() {
	if c.singletons == nil {
		return
	}
	c.lead(context.Background(), false)
	var delivered uint64
	if c.router != nil {
		delivered, _ = c.router.Checkpoint()
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := c.rt.handler.ReleaseLease(ctx, events.LeaderLease, delivered); err != nil {
		c.log.Warn("leader lease not released; another node takes it when it expires", "err", err)
		return
	}
	c.log.Info("leader lease released", "delivered", delivered)
}

// adopt applies the adoption rule to the turns open in this node's read
// model, then suspends the lanes whose stuck-loop count the adoption made
// reach the threshold.
func (c *cluster) adopt(ctx context.Context) {
	open, err := c.rt.openLanes(ctx)
	if err != nil {
		c.log.Warn("adoption: open turns", "err", err)
		return
	}
	if len(open) == 0 {
		return
	}
	turns, err := c.rt.handler.OpenTurns(ctx, open)
	if err != nil {
		c.log.Warn("adoption: open turns", "err", err)
		return
	}
	adopted, err := c.rt.handler.AdoptDeadRuns(ctx, commands.AdoptDeadRuns{Turns: turns, TTL: c.ttl})
	if err != nil && ctx.Err() == nil {
		c.log.Warn("adoption", "err", err)
	}
	if len(adopted) == 0 {
		return
	}
	for _, a := range adopted {
		c.log.Warn("adopted a dead node's run: its lease expired; its open turns are closed and marked to resume",
			"dead_node", a.Node, "recorded", a.Recorded, "interrupted", a.Interrupted)
	}
	if err := c.rt.suspendStuckLoops(ctx); err != nil && ctx.Err() == nil {
		c.log.Warn("adoption: stuck loops", "err", err)
	}
}
