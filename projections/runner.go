package projections

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"hermes/events"
)

// MaxBatch bounds how many events one Apply receives.
const MaxBatch = 2048

// Runner feeds projections from the store: catch-up from each checkpoint,
// then live, in batches. It offers read-your-writes through WaitFor.
type Runner struct {
	store       events.Store
	projections []Projection

	backoff Backoff
	log     *slog.Logger

	// gather is how long a live batch waits for more events while nobody
	// waits for the read models (SetGather), and quietGather how long
	// once no read waited during QuietBatches batches in a row (sinceRead
	// counts them, seenReads is reads at the last batch: follow's
	// goroutine alone uses both). waiting counts those who wait, reads
	// every wait begun, and wake tells the gathering batch that one began.
	gather, quietGather time.Duration
	sinceRead           int
	seenReads           uint64
	waiting             atomic.Int32
	reads               atomic.Uint64
	wake                chan struct{}

	mu      sync.Mutex
	applied map[string]uint64
	// assigned is the last position received and numbered (Assigner).
	assigned uint64
	// barrier picks the events after which a stale read model must not
	// be trusted (SetBarrier); lastBarrier is the last one received.
	barrier     func(events.Event) bool
	lastBarrier uint64
	changed     chan struct{}
	err         error
	// storageErr is the last failure of a projection to write its batch
	// for want of space (events.ErrStorageFull) while it retries; nil when
	// every projection writes.
	storageErr   error
	storageSince time.Time
	retries      uint64
	// hold picks the apply failures after which Run stops without
	// failing the runner (SetHold); held is the last one, until Run
	// starts again.
	hold func(projection string, err error) bool
	held error
}

// NewRunner returns a runner for ps over store.
func NewRunner(store events.Store, ps ...Projection) *Runner {
	return &Runner{
		store:       store,
		projections: ps,
		backoff:     DefaultBackoff,
		log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		applied:     make(map[string]uint64, len(ps)),
		changed:     make(chan struct{}),
		gather:      DefaultGather,
		quietGather: DefaultQuietGather,
		sinceRead:   QuietBatches,
		wake:        make(chan struct{}, 1),
	}
}

// DefaultGather is how long a live batch waits for more events when nobody
// waits for the read models, while reads come (DefaultQuietGather while
// none do): appends answered from their assigned message ids
// (WaitAssigned) then share one read-model transaction, instead of one
// transaction (and one FTS5 segment per index) each. A read that needs the
// batch (WaitFor, WaitFresh) has it applied at once.
const DefaultGather = 20 * time.Millisecond

// DefaultQuietGather is the gather window while nobody reads: the read
// models' transactions then take five times the events, and each event
// costs less to apply (FTS5 writes one segment per transaction and merges
// the more often the smaller they are: transcripts.BenchmarkApplyLive).
// A read that comes then waits for a bigger batch, once: the next
// QuietBatches batches go back to DefaultGather.
const DefaultQuietGather = 100 * time.Millisecond

// QuietBatches is how many batches in a row no read cuts short before the
// runner gathers for the quiet window again.
const QuietBatches = 50

// SetGather replaces both gather windows with d (0: apply each batch as
// soon as it is received); call it before Run.
func (r *Runner) SetGather(d time.Duration) { r.gather, r.quietGather = max(d, 0), max(d, 0) }

// SetQuietGather replaces the gather window while nobody reads (0: apply
// each batch as soon as it is received); call it after SetGather, before
// Run.
func (r *Runner) SetQuietGather(d time.Duration) { r.quietGather = max(d, 0) }

// Backoff is how the runner waits between the attempts to apply a batch
// that failed for want of space: Min, doubling up to Max. After makes the
// timer (time.After by default; tests inject their own clock).
type Backoff struct {
	Min, Max time.Duration
	After    func(time.Duration) <-chan time.Time
}

// DefaultBackoff retries after 250ms, then 500ms, … up to 30s.
var DefaultBackoff = Backoff{Min: 250 * time.Millisecond, Max: 30 * time.Second, After: time.After}

// SetBackoff replaces the retry backoff; call it before Run.
func (r *Runner) SetBackoff(b Backoff) {
	if b.Min <= 0 {
		b.Min = DefaultBackoff.Min
	}
	if b.Max < b.Min {
		b.Max = b.Min
	}
	if b.After == nil {
		b.After = time.After
	}
	r.backoff = b
}

// SetLogger makes the runner log when a projection cannot write for want
// of space, and when it writes again; call it before Run.
func (r *Runner) SetLogger(l *slog.Logger) { r.log = l }

// StorageError is the error of the projection that cannot write its batch
// for want of space (it wraps events.ErrStorageFull) and retries with
// backoff, or nil. Reads are then served from the read models as they are.
func (r *Runner) StorageError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.storageErr
}

// ErrHeld wraps the failure Run returned without failing the runner
// (SetHold).
var ErrHeld = errors.New("projections held")

// SetHold names the apply failures after which Run stops without failing
// the runner (for a node: a read model that met damage, which it rebuilds
// and swaps in): Held reports the failure, WaitFor and WaitAssigned
// callers keep waiting (each until its context ends), WaitFresh serves
// reads as they are, and the next Run goes on from each projection's
// checkpoint. Call it before Run.
func (r *Runner) SetHold(hold func(projection string, err error) bool) { r.hold = hold }

// Held is the failure Run stopped on without failing the runner
// (SetHold), until Run starts again; nil otherwise.
func (r *Runner) Held() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

func (r *Runner) setHeld(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = err
	close(r.changed)
	r.changed = make(chan struct{})
}

// Retries counts the attempts to apply a batch that were retried after a
// storage failure.
func (r *Runner) Retries() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.retries
}

// storageFailed records a projection's storage failure and logs the first
// of a series.
func (r *Runner) storageFailed(name string, err error, wait time.Duration) {
	r.mu.Lock()
	first := r.storageErr == nil
	r.storageErr = fmt.Errorf("%s: %w", name, err)
	if first {
		r.storageSince = time.Now()
	}
	r.retries++
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	if first {
		r.log.Error("read model cannot write: storage full; retrying with backoff, serving reads as they are and refusing writes",
			"projection", name, "err", err, "retry_in", wait)
		return
	}
	r.log.Debug("read model still cannot write; retrying", "projection", name, "err", err, "retry_in", wait)
}

// storageRecovered clears the storage failure once a batch went through.
func (r *Runner) storageRecovered(name string) {
	r.mu.Lock()
	was, since := r.storageErr, r.storageSince
	r.storageErr = nil
	if was != nil {
		close(r.changed)
		r.changed = make(chan struct{})
	}
	r.mu.Unlock()
	if was != nil {
		r.log.Info("read model writes again: storage no longer full", "projection", name, "after", time.Since(since).Round(time.Millisecond))
	}
}

// applyRetrying applies batch to p, retrying with backoff while it fails for
// want of space (the batch's transaction rolled back, so a retry is safe).
// Any other error, or ctx ending, is returned.
func (r *Runner) applyRetrying(ctx context.Context, p Projection, batch []events.Envelope) error {
	wait := r.backoff.Min
	for {
		err := p.Apply(ctx, batch)
		if err == nil {
			r.storageRecovered(p.Name())
			return nil
		}
		if ctx.Err() != nil || !errors.Is(err, events.ErrStorageFull) {
			return err
		}
		r.storageFailed(p.Name(), err, wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.backoff.After(wait):
		}
		wait = min(wait*2, r.backoff.Max)
	}
}

// Projections returns the runner's projections.
func (r *Runner) Projections() []Projection { return r.projections }

// CatchUp applies everything up to the store's head at the time of the call,
// reporting progress (the slowest projection's position, head) to progress
// when it is not nil. The projections catch up side by side, each on its
// own goroutine (and core).
func (r *Runner) CatchUp(ctx context.Context, progress func(done, total uint64)) error {
	head, err := r.store.Head(ctx)
	if err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	var mu sync.Mutex
	report := func() {
		if progress == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		progress(r.Applied(), head)
	}
	feeds, err := r.sharedFeed(ctx, head)
	if err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	errs := make(chan error, len(r.projections))
	for i, p := range r.projections {
		var feed <-chan batchOrErr
		if feeds != nil {
			feed = feeds[i]
		}
		// Labelled so that a CPU profile splits by projection (the
		// goroutines a projection starts inherit the label).
		go pprof.Do(ctx, pprof.Labels("projection", p.Name()), func(ctx context.Context) {
			errs <- r.catchUp(ctx, p, head, feed, report)
		})
	}
	var first error
	for range r.projections {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// BulkMinEvents is the smallest catch-up from position 0 for which the
// runner puts a [BulkLoader] in bulk mode.
var BulkMinEvents uint64 = 10_000

// batchOrErr is one batch read for a shared catch-up, or why none could be.
type batchOrErr struct {
	batch []events.Envelope
	err   error
}

// sharedFeed returns one channel of batches per projection, all fed by
// one reader, when every projection starts from the same checkpoint (a
// rebuild, a first start): each event is then read and decoded once
// instead of once per projection. Otherwise (nil) each projection reads
// for itself. Each channel holds a few batches, so the projections run
// at their own pace; the reader stops when ctx is done.
func (r *Runner) sharedFeed(ctx context.Context, head uint64) ([]chan batchOrErr, error) {
	if len(r.projections) < 2 {
		return nil, nil
	}
	var from uint64
	for i, p := range r.projections {
		pos, err := p.Checkpoint(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name(), err)
		}
		if i > 0 && pos != from {
			return nil, nil
		}
		from = pos
	}
	feeds := make([]chan batchOrErr, len(r.projections))
	for i := range feeds {
		feeds[i] = make(chan batchOrErr, 4)
	}
	go pprof.Do(ctx, pprof.Labels("projection", "shared-reader"), func(ctx context.Context) {
		defer func() {
			for _, f := range feeds {
				close(f)
			}
		}()
		send := func(b batchOrErr) bool {
			for _, f := range feeds {
				select {
				case f <- b:
				case <-ctx.Done():
					return false
				}
			}
			return true
		}
		for pos := from; pos < head; {
			batch, err := r.store.ReadAll(ctx, pos, MaxBatch)
			if err != nil {
				send(batchOrErr{err: err})
				return
			}
			if len(batch) == 0 || !send(batchOrErr{batch: batch}) {
				return
			}
			pos = batch[len(batch)-1].Position
		}
	})
	return feeds, nil
}

func (r *Runner) catchUp(ctx context.Context, p Projection, head uint64, feed <-chan batchOrErr, report func()) error {
	if feed != nil {
		// Whatever happens, the shared reader must not wait on this
		// projection's feed (after applyFeed it is closed and empty).
		defer func() {
			for range feed {
			}
		}()
	}
	pos, err := p.Checkpoint(ctx)
	if err != nil {
		return fmt.Errorf("catch up %s: %w", p.Name(), err)
	}
	b, bulk := p.(BulkLoader)
	bulk = bulk && pos == 0 && head >= BulkMinEvents
	if bulk {
		if err := b.BeginBulk(ctx); err != nil {
			return fmt.Errorf("catch up %s: %w", p.Name(), err)
		}
	}
	if feed != nil {
		pos, err = r.applyFeed(ctx, p, pos, feed, report)
	} else {
		pos, err = r.applyUpTo(ctx, p, pos, head, report)
	}
	if bulk && (err == nil || ctx.Err() == nil) {
		if endErr := b.EndBulk(ctx); endErr != nil {
			err = errors.Join(err, fmt.Errorf("catch up %s: %w", p.Name(), endErr))
		}
	}
	if err != nil {
		if errors.Is(err, events.ErrStorageFull) {
			// Run retries from the checkpoint; until then the server
			// says why it is not ready.
			r.storageFailed(p.Name(), err, r.backoff.Min)
		}
		return err
	}
	r.setApplied(p.Name(), pos)
	if c, ok := p.(Caught); ok {
		if err := c.CaughtUp(ctx); err != nil {
			return fmt.Errorf("catch up %s: %w", p.Name(), err)
		}
	}
	return nil
}

// applyFeed applies the batches of a shared feed and returns the position
// reached. It drains the feed after an error, so that the reader is never
// left waiting on it.
func (r *Runner) applyFeed(ctx context.Context, p Projection, pos uint64, feed <-chan batchOrErr, report func()) (uint64, error) {
	var err error
	for b := range feed {
		if err != nil {
			continue
		}
		if b.err != nil {
			err = fmt.Errorf("catch up %s: %w", p.Name(), b.err)
			continue
		}
		if applyErr := p.Apply(ctx, b.batch); applyErr != nil {
			err = fmt.Errorf("catch up %s: %w", p.Name(), applyErr)
			continue
		}
		pos = b.batch[len(b.batch)-1].Position
		r.setApplied(p.Name(), pos)
		report()
	}
	if err == nil {
		err = ctx.Err()
	}
	return pos, err
}

// applyUpTo applies the log from pos to head in batches and returns the
// position reached.
func (r *Runner) applyUpTo(ctx context.Context, p Projection, pos, head uint64, report func()) (uint64, error) {
	for pos < head {
		batch, err := r.store.ReadAll(ctx, pos, MaxBatch)
		if err != nil {
			return pos, fmt.Errorf("catch up %s: %w", p.Name(), err)
		}
		if len(batch) == 0 {
			break
		}
		if err := p.Apply(ctx, batch); err != nil {
			return pos, fmt.Errorf("catch up %s: %w", p.Name(), err)
		}
		pos = batch[len(batch)-1].Position
		r.setApplied(p.Name(), pos)
		report()
	}
	return pos, nil
}

// Run feeds every projection live until ctx is done (nil) or a projection
// fails (the error; WaitFor callers get it too). One subscription, from
// the lowest checkpoint, feeds them all: each event is read and decoded
// once, and each projection skips what it has already applied.
//
// A failure SetHold picks stops Run with an error wrapping ErrHeld and
// leaves the runner waiting for the next Run.
func (r *Runner) Run(ctx context.Context) error {
	r.setHeld(nil)
	err := r.follow(ctx)
	if err == nil || errors.Is(err, context.Canceled) {
		return nil
	}
	var failed *projectionFailure
	if r.hold != nil && errors.As(err, &failed) && r.hold(failed.projection, failed.err) {
		r.setHeld(err)
		return fmt.Errorf("%w: %w", ErrHeld, err)
	}
	r.fail(err)
	return err
}

// projectionFailure is a projection's failure to apply a batch in follow.
type projectionFailure struct {
	projection string
	err        error
}

func (f *projectionFailure) Error() string { return f.projection + ": apply: " + f.err.Error() }
func (f *projectionFailure) Unwrap() error { return f.err }

func (r *Runner) follow(ctx context.Context) error {
	from := uint64(0)
	caught := make([]bool, len(r.projections))
	for i, p := range r.projections {
		pos, err := p.Checkpoint(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
		r.setApplied(p.Name(), pos)
		if i == 0 || pos < from {
			from = pos
		}
	}
	sub, err := r.store.Subscribe(ctx, from)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer sub.Close()
	received := make(chan events.Envelope, MaxBatch)
	// receive ends with follow, whatever ends it (an apply error too).
	rctx, stopReceiving := context.WithCancel(ctx)
	defer stopReceiving()
	go r.receive(rctx, sub, from, received)
	batch := make([]events.Envelope, 0, MaxBatch)
	for {
		clear(batch) // no message content kept past its batch
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return ctx.Err()
		case env, ok := <-received:
			if !ok {
				if err := sub.Err(); err != nil {
					return fmt.Errorf("subscription: %w", err)
				}
				return ctx.Err()
			}
			batch = append(batch, env)
		}
		batch = fill(batch, received)
		window := r.gather
		if r.sinceRead >= QuietBatches {
			window = r.quietGather
		}
		if len(batch) < MaxBatch && window > 0 && r.waiting.Load() == 0 {
			batch = r.gatherMore(ctx, batch, received, window)
			batch = fill(batch, received)
		}
		if reads := r.reads.Load(); reads != r.seenReads {
			r.seenReads, r.sinceRead = reads, 0
		} else {
			r.sinceRead = min(r.sinceRead+1, QuietBatches)
		}
		last := batch[len(batch)-1].Position
		for i, p := range r.projections {
			if err := r.applyRetrying(ctx, p, batch); err != nil {
				if ctx.Err() != nil {
					// Cancelled mid-batch: the transaction rolled back and
					// the checkpoint did not move, so nothing is lost.
					return ctx.Err()
				}
				return &projectionFailure{projection: p.Name(), err: err}
			}
			r.setApplied(p.Name(), last)
			if caught[i] || len(received) > 0 {
				continue
			}
			if head, err := r.store.Head(ctx); err == nil && head <= last {
				caught[i] = true
				if c, ok := p.(Caught); ok {
					if err := c.CaughtUp(ctx); err != nil {
						return fmt.Errorf("%s: %w", p.Name(), err)
					}
				}
			}
		}
	}
}

// receive takes the subscription's events as they come, lets every
// [Assigner] number them, and passes them on to follow's batches; it
// closes out when the subscription ends or ctx is done. Assigning here,
// apart from the batches, keeps an append's answer from waiting for the
// batch before it to be applied.
func (r *Runner) receive(ctx context.Context, sub events.Subscription, after uint64, out chan<- events.Envelope) {
	defer close(out)
	got := make([]events.Envelope, 0, MaxBatch)
	for {
		clear(got) // no message content kept past its batch
		got = got[:0]
		select {
		case <-ctx.Done():
			return
		case env, ok := <-sub.Events():
			if !ok {
				return
			}
			got = append(got, env)
		}
		got = fill(got, sub.Events())
		for _, p := range r.projections {
			if a, ok := p.(Assigner); ok {
				a.Assign(after, got)
			}
		}
		for _, env := range got {
			select {
			case out <- env:
			case <-ctx.Done():
				return
			}
		}
		// Said after they are passed on: whoever sees them assigned and
		// then waits for the read models finds them in the next batch.
		after = got[len(got)-1].Position
		r.setAssigned(after, r.lastBarrierIn(got))
	}
}

// fill adds to batch what in holds now, up to MaxBatch, without waiting.
func fill(batch []events.Envelope, in <-chan events.Envelope) []events.Envelope {
	for len(batch) < MaxBatch {
		select {
		case env, ok := <-in:
			if !ok {
				return batch
			}
			batch = append(batch, env)
		default:
			return batch
		}
	}
	return batch
}

// gatherMore waits up to window for more events to apply with batch, and
// stops early when someone waits for the read models (WaitFor,
// WaitFresh), the batch is full, the feed ends or ctx is done.
func (r *Runner) gatherMore(ctx context.Context, batch []events.Envelope, in <-chan events.Envelope, window time.Duration) []events.Envelope {
	timer := time.NewTimer(window)
	defer timer.Stop()
	for len(batch) < MaxBatch {
		select {
		case env, ok := <-in:
			if !ok {
				return batch
			}
			batch = append(batch, env)
		case <-r.wake:
			if r.waiting.Load() > 0 {
				return batch
			}
		case <-timer.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

// waitBegins notes a caller waiting for the read models, so that the
// batch being gathered is applied now; the returned function ends it.
func (r *Runner) waitBegins() func() {
	r.waiting.Add(1)
	r.reads.Add(1)
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return func() { r.waiting.Add(-1) }
}

// lastBarrierIn returns the position of the last barrier event in got (0
// for none).
func (r *Runner) lastBarrierIn(got []events.Envelope) uint64 {
	if r.barrier == nil {
		return 0
	}
	for i := len(got) - 1; i >= 0; i-- {
		if r.barrier(got[i].Event) {
			return got[i].Position
		}
	}
	return 0
}

// SetBarrier names the events after which a read model behind the log
// must not be trusted for a decision (for the transcripts: the events
// that delete sessions); call it before Run. See PendingBarrier.
func (r *Runner) SetBarrier(is func(events.Event) bool) { r.barrier = is }

// PendingBarrier returns the position of the last barrier event received
// and not applied by every projection yet (false when there is none): a
// read model behind the log then lacks only events that add (a session it
// does not know yet), never one that removes.
func (r *Runner) PendingBarrier() (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastBarrier, r.lastBarrier > r.minApplied()
}

func (r *Runner) setAssigned(pos, barrier uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastBarrier = max(r.lastBarrier, barrier)
	if pos <= r.assigned {
		return
	}
	r.assigned = pos
	close(r.changed)
	r.changed = make(chan struct{})
}

// Assigned reports, without waiting, whether WaitAssigned(pos) would
// return at once without an error.
func (r *Runner) Assigned(pos uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.assignedLocked(pos)
}

// assignedLocked says whether the event at pos was numbered (or applied by
// every projection); r.mu is held.
func (r *Runner) assignedLocked(pos uint64) bool {
	return r.assigned >= pos || r.minApplied() >= pos
}

// WaitAssigned blocks until the runner has received the event at pos and
// let every [Assigner] number it (or every projection applied it), the
// runner failed, or ctx is done. It does not hurry the batch being
// gathered: an append waits here for its message id, not for the read
// models' transaction.
func (r *Runner) WaitAssigned(ctx context.Context, pos uint64) error {
	for {
		r.mu.Lock()
		done, err, changed := r.assignedLocked(pos), r.err, r.changed
		r.mu.Unlock()
		if done {
			return nil
		}
		if err != nil {
			return fmt.Errorf("projections stopped: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for position %d: %w", pos, ctx.Err())
		case <-changed:
		}
	}
}

func (r *Runner) setApplied(name string, pos uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pos <= r.applied[name] && r.applied[name] != 0 {
		return
	}
	r.applied[name] = pos
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *Runner) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
	close(r.changed)
	r.changed = make(chan struct{})
}

// Applied returns the position every projection has applied (the minimum).
func (r *Runner) Applied() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.minApplied()
}

func (r *Runner) minApplied() uint64 {
	var lowest uint64
	for i, p := range r.projections {
		a := r.applied[p.Name()]
		if i == 0 || a < lowest {
			lowest = a
		}
	}
	return lowest
}

// WaitFor blocks until every projection has applied position pos (read your
// writes), the runner failed, or ctx is done.
func (r *Runner) WaitFor(ctx context.Context, pos uint64) error {
	waiting := false
	for {
		r.mu.Lock()
		done, err, changed := r.minApplied() >= pos, r.err, r.changed
		r.mu.Unlock()
		if done {
			return nil
		}
		if err != nil {
			return fmt.Errorf("projections stopped: %w", err)
		}
		if !waiting {
			waiting = true
			defer r.waitBegins()()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for position %d: %w", pos, ctx.Err())
		case <-changed:
		}
	}
}

// WaitFresh is WaitFor for reads: it returns at once, without error, while
// a projection cannot write for want of space (StorageError) or the runner
// is held (Held), so reads are served from the read models as they are
// rather than waiting for space or for the rebuild.
func (r *Runner) WaitFresh(ctx context.Context, pos uint64) error {
	waiting := false
	for {
		r.mu.Lock()
		done, err, degraded, changed := r.minApplied() >= pos, r.err, r.storageErr != nil || r.held != nil, r.changed
		r.mu.Unlock()
		if done || degraded {
			return nil
		}
		if err != nil {
			return fmt.Errorf("projections stopped: %w", err)
		}
		if !waiting {
			waiting = true
			defer r.waitBegins()()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for position %d: %w", pos, ctx.Err())
		case <-changed:
		}
	}
}

// Lag is how far the slowest projection is behind the store's head, in
// position units: events on the SQLite store, bytes of log on KurrentDB
// (whose positions are byte offsets). Zero means caught up on both.
func (r *Runner) Lag(ctx context.Context) (uint64, error) {
	head, err := r.store.Head(ctx)
	if err != nil {
		return 0, err
	}
	applied := r.Applied()
	if applied >= head {
		return 0, nil
	}
	return head - applied, nil
}
