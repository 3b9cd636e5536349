package kurrentdb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"hermes/events"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

// subscriptionBuffer is how many decoded events a subscription holds for a
// consumer that is behind; past it, gRPC flow control holds the server.
const subscriptionBuffer = 256

// Subscribe delivers every event of hermes' streams after position after,
// in order, with no gap and no duplicate: a catch-up subscription to $all
// filtered on [StreamPrefixes]. When the connection drops it subscribes
// again from the last event delivered (or the last filter checkpoint, which
// the server sends only once everything before it was sent). It ends on
// ctx, on its Close, on the store's Close, or on an error that is not a
// lost connection.
func (s *Store) Subscribe(ctx context.Context, after uint64) (events.Subscription, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("subscribe: %w", ErrClosed)
	}
	ctx, cancel := context.WithCancel(ctx)
	sub := &subscription{events: make(chan events.Envelope, subscriptionBuffer), cancel: cancel}
	go func() {
		defer close(sub.events)
		defer cancel()
		sub.setErr(s.follow(ctx, after, sub.events))
	}()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return sub, nil
}

// follow runs subscriptions from after until ctx ends or an error that a
// new subscription would not cure.
func (s *Store) follow(ctx context.Context, after uint64, out chan<- events.Envelope) error {
	backoff := 20 * time.Millisecond
	for {
		delivered, err := s.followOnce(ctx, &after, out)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !transient(err) && !errors.Is(err, errDropped) {
			return err
		}
		if delivered {
			backoff = 20 * time.Millisecond
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil
		}
		backoff = min(backoff*2, time.Second)
	}
}

// errDropped: the server or the connection ended the subscription.
var errDropped = errors.New("subscription dropped")

// followOnce runs one subscription, advancing *after as it delivers. It
// reports whether it delivered anything.
func (s *Store) followOnce(ctx context.Context, after *uint64, out chan<- events.Envelope) (bool, error) {
	c, release, err := s.acquire()
	if err != nil {
		return false, err
	}
	defer release()
	opts := esdb.SubscribeToAllOptions{
		From:   esdb.Position{Commit: *after, Prepare: *after},
		Filter: &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: s.filterPrefixes()},
	}
	if *after == 0 {
		opts.From = esdb.Start{}
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub, err := c.SubscribeToAll(sctx, opts)
	if err != nil {
		if closedClient(err) {
			s.discard(c)
		}
		return false, fmt.Errorf("subscribe to $all after %d: %w", *after, err)
	}
	defer sub.Close()
	delivered := false
	kr := s.newKeyring(ctx)
	for {
		ev := sub.Recv()
		switch {
		case ev.EventAppeared != nil:
			r := ev.EventAppeared.OriginalEvent()
			if r == nil || r.Position.Commit <= *after {
				continue
			}
			name, ok := s.hermesName(r.StreamID)
			if !ok {
				continue
			}
			env, err := kr.envelope(name, r)
			if err != nil {
				return delivered, err
			}
			select {
			case out <- env:
			case <-ctx.Done():
				return delivered, nil
			}
			*after = env.Position
			delivered = true
		case ev.CheckPointReached != nil:
			*after = max(*after, ev.CheckPointReached.Commit)
		case ev.SubscriptionDropped != nil:
			if ctx.Err() != nil {
				return delivered, nil
			}
			if ev.SubscriptionDropped.Error != nil {
				return delivered, fmt.Errorf("%w: %w", errDropped, ev.SubscriptionDropped.Error)
			}
			return delivered, errDropped
		}
	}
}

type subscription struct {
	events chan events.Envelope
	cancel context.CancelFunc

	mu  sync.Mutex
	err error
}

func (sub *subscription) Events() <-chan events.Envelope { return sub.events }

// Err says why the subscription ended: nil after Close, a cancelled context
// or the store's Close; otherwise the error that ended it.
func (sub *subscription) Err() error {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.err
}

// Close ends the subscription; Events is closed soon after.
func (sub *subscription) Close() { sub.cancel() }

func (sub *subscription) setErr(err error) {
	sub.mu.Lock()
	sub.err = err
	sub.mu.Unlock()
}
