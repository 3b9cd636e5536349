package sqlite

import (
	"context"
	"fmt"
	"sync"
	"time"

	"hermes/events"
)

// subscriptionBatch is how many events a subscription reads per query and
// how many it buffers for its consumer: the most it ever reads ahead.
const subscriptionBatch = 256

// Subscribe delivers every event after position after, in order, with no
// gap and no duplicate. The subscription pulls by position, so catch-up
// and live are the same loop: from the rows this Store's writer just
// committed when it holds them (tail.go), from the database otherwise.
// Once caught up it waits for a commit of this Store or the poll interval
// (appends of other processes). It reads only as fast as the consumer
// drains Events, so a slow consumer falls behind without slowing appends.
// It ends on ctx, on its Close, or on the store's Close.
func (s *Store) Subscribe(ctx context.Context, after uint64) (events.Subscription, error) {
	if s.closed() {
		return nil, fmt.Errorf("subscribe: %w", ErrClosed)
	}
	ctx, cancel := context.WithCancel(ctx)
	sub := &subscription{
		store:  s,
		events: make(chan events.Envelope, subscriptionBatch),
		cancel: cancel,
	}
	s.subs.Add(1)
	go func() {
		defer s.subs.Done()
		defer cancel()
		defer close(sub.events)
		sub.setErr(sub.run(ctx, after))
	}()
	return sub, nil
}

type subscription struct {
	store  *Store
	events chan events.Envelope
	cancel context.CancelFunc

	mu  sync.Mutex
	err error
}

func (sub *subscription) Events() <-chan events.Envelope { return sub.events }

// Err says why the subscription ended: nil after its Close, a cancelled
// context or the store's Close; otherwise the read error.
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

func (sub *subscription) run(ctx context.Context, after uint64) error {
	s := sub.store
	poll := time.NewTicker(s.cfg.pollInterval)
	defer poll.Stop()
	for {
		// Taken before the read: a commit after the read closes this
		// channel, so the wait below cannot miss it.
		committed := s.commits.wait()
		batch, behind, err := s.readNext(ctx, after)
		if err != nil {
			s.damage.note(err)
			if ctx.Err() != nil || s.closed() {
				return nil
			}
			return fmt.Errorf("subscription after %d: %w", after, err)
		}
		for _, e := range batch {
			select {
			case sub.events <- e:
				after = e.Position
			case <-ctx.Done():
				return nil
			case <-s.closing:
				return nil
			}
		}
		if behind {
			continue
		}
		select {
		case <-committed:
		case <-poll.C:
		case <-ctx.Done():
			return nil
		case <-s.closing:
			return nil
		}
	}
}

// readNext returns the next events after position after: from the
// committed tail when it holds them, from the file otherwise. behind says
// more may follow at once (a full read, or tail rows past a gap).
func (s *Store) readNext(ctx context.Context, after uint64) (batch []events.Envelope, behind bool, err error) {
	if rows, more := s.tail.after(after, subscriptionBatch); len(rows) > 0 {
		batch, err = decodeRows(rows)
		return batch, more || len(batch) == subscriptionBatch, err
	}
	batch, err = s.readAll(ctx, after, subscriptionBatch)
	return batch, len(batch) == subscriptionBatch, err
}
