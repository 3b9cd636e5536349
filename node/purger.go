package node

import (
	"context"
	"sync"
	"time"

	"hermes/api"
)

// purger runs the purges the erasing requests ask for on a context of the
// node's, not the request's: an erasure committed to the log is purged
// from every file even when its client gave up waiting (or the answer
// would have come too late for it), and a client can watch the progress
// (GET /v1/erasure/status). Requests that arrive while a purge runs are
// served together by the next one, which starts after them and so covers
// every erasure they committed.
type purger struct {
	ctx  context.Context
	run  func(context.Context) error
	head func(context.Context) (uint64, error)

	mu      sync.Mutex
	waiting []chan error
	running bool
	status  api.PurgeStatus
}

func newPurger(ctx context.Context, run func(context.Context) error, head func(context.Context) (uint64, error)) *purger {
	return &purger{ctx: ctx, run: run, head: head}
}

// purge asks for a purge that starts after this call and waits for it
// until ctx ends; the purge goes on when ctx ends first.
func (p *purger) purge(ctx context.Context) error {
	done := make(chan error, 1)
	p.mu.Lock()
	p.waiting = append(p.waiting, done)
	if !p.running {
		p.running = true
		go p.loop()
	}
	p.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *purger) loop() {
	for {
		p.mu.Lock()
		batch := p.waiting
		p.waiting = nil
		if len(batch) == 0 {
			p.running = false
			p.status.Purging = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		// The log's head when the purge starts: it covers every erasure
		// committed up to there.
		head, err := p.head(p.ctx)
		started := time.Now().UTC()
		p.mu.Lock()
		p.status.Purging, p.status.StartedAt, p.status.Target = true, &started, head
		p.mu.Unlock()
		if err == nil {
			err = p.run(p.ctx)
		}
		finished := time.Now().UTC()
		p.mu.Lock()
		p.status.FinishedAt = &finished
		if err == nil {
			p.status.PurgedThrough, p.status.LastError = head, ""
		} else {
			p.status.LastError = err.Error()
		}
		p.mu.Unlock()
		for _, done := range batch {
			done <- err
		}
	}
}

// state is the purges' progress for GET /v1/erasure/status.
func (p *purger) state() api.PurgeStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}
