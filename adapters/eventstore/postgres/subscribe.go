package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"hermes/events"

	"github.com/jackc/pgx/v5"
)

// subscriptionBatch is how many events a subscription reads per query and
// how many it buffers for its consumer: the most it ever reads ahead.
const subscriptionBatch = 256

// Subscribe delivers every event after position after, in order, with no
// gap and no duplicate. The subscription pulls by position ("position >
// the last delivered"), so catch-up and live are the same loop; that read
// cannot skip an event committing later, because positions commit in order
// (doc.go). Once caught up it waits for a commit of this Store, a
// notification of another process's commit (LISTEN), or the poll interval.
// A read that fails because the connection was lost or the server is
// restarting is made again, from the same position, until the server
// answers (for up to a minute without any success): a reconnection loses
// and repeats nothing. It reads only as fast as the consumer drains
// Events, so a slow consumer falls behind without slowing appends. It ends
// on ctx, on its Close, or on the store's Close.
func (s *Store) Subscribe(ctx context.Context, after uint64) (events.Subscription, error) {
	if s.closed() {
		return nil, fmt.Errorf("subscribe: %w", ErrClosed)
	}
	ctx, cancel := context.WithCancel(ctx)
	sub := &subscription{store: s, events: make(chan events.Envelope, subscriptionBatch), cancel: cancel}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
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
	var failingSince time.Time
	backoff := 25 * time.Millisecond
	for {
		// Taken before the read: a commit after the read closes this
		// channel, so the wait below cannot miss it.
		committed := s.commits.wait()
		batch, err := s.readAll(ctx, after, subscriptionBatch)
		if err != nil {
			if ctx.Err() != nil || s.closed() {
				return nil
			}
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if !transient(err) || time.Since(failingSince) > subscriptionRetryBudget {
				return fmt.Errorf("subscription after %d: %w", after, err)
			}
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil
			case <-s.closing:
				return nil
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		failingSince, backoff = time.Time{}, 25*time.Millisecond
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
		if len(batch) == subscriptionBatch {
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

// listen keeps a connection LISTENing on the store's channel and wakes the
// subscriptions on every notification: the commits of other processes
// (the writer of this Store wakes them itself). It connects again when the
// connection is lost, and wakes them then too, since a notification may
// have been sent while nobody listened.
func (s *Store) listen() {
	defer s.bg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.closing
		cancel()
	}()
	backoff := 25 * time.Millisecond
	for ctx.Err() == nil {
		if err := s.listenOnce(ctx, &backoff); err != nil && ctx.Err() == nil {
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

func (s *Store) listenOnce(ctx context.Context, backoff *time.Duration) error {
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return err
	}
	*backoff = 25 * time.Millisecond
	s.commits.notify()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		s.commits.notify()
	}
}
