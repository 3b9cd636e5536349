package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"hermes/adapters/hooks"
	"hermes/events"
)

// followErasures is a duty of a node that shares its store with others:
// when an erasure another node appended has reached this node's read
// models, it purges this node's files (the read models and the webhooks'
// poison log), so that no node keeps what an erasure removed until its own
// next purge. The store itself was purged by the erasing node. Erasures
// that arrive together share one purge.
func (rt *runtime) followErasures(ctx context.Context, log *slog.Logger) {
	for ctx.Err() == nil {
		err := rt.followErasuresOnce(ctx, log)
		if ctx.Err() != nil {
			return
		}
		log.Warn("following other nodes' erasures stopped; starting again", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (rt *runtime) followErasuresOnce(ctx context.Context, log *slog.Logger) error {
	self := rt.handler.Node()
	head, err := rt.raw.Head(ctx)
	if err != nil {
		return fmt.Errorf("follow erasures: %w", err)
	}
	sub, err := rt.raw.Subscribe(ctx, head)
	if err != nil {
		return fmt.Errorf("follow erasures: %w", err)
	}
	defer sub.Close()
	for {
		var env events.Envelope
		var ok bool
		select {
		case env, ok = <-sub.Events():
		case <-ctx.Done():
			return nil
		}
		if !ok {
			if err := sub.Err(); err != nil {
				return fmt.Errorf("follow erasures: %w", err)
			}
			return errors.New("follow erasures: the subscription ended")
		}
		if _, erasure := env.Event.(events.Erasure); !erasure || env.Metadata.Node == self {
			continue
		}
		// What is already delivered joins this purge.
		target := env.Position
	more:
		for {
			select {
			case e, ok := <-sub.Events():
				if !ok {
					break more
				}
				target = e.Position
			default:
				break more
			}
		}
		if err := rt.runner.WaitFor(ctx, target); err != nil {
			return fmt.Errorf("follow erasures: wait for the read models: %w", err)
		}
		if err := rt.purgeNodeFiles(ctx); err != nil {
			log.Warn("purge after another node's erasure failed; the next purge does it", "err", err)
		}
	}
}

// purgeNodeFiles is the part of purgeFiles that is this node's own: its
// read models and poison log, not the shared store.
func (rt *runtime) purgeNodeFiles(ctx context.Context) error {
	rt.purgeMu.Lock()
	defer rt.purgeMu.Unlock()
	if err := rt.models.state().Purge(ctx); err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	if err := rt.models.lanes().Purge(ctx); err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	if _, err := hooks.ScrubPoisonLog(ctx, rt.home.HermesDir(), rt.raw); err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	return nil
}
