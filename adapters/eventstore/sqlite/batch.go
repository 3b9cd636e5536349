package sqlite

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"time"

	"hermes/events"
	"hermes/projections/storage"
)

var _ events.BatchAppender = (*Store)(nil)

// maxBatchTxBytes bounds one transaction of AppendBatch: a sweep of every
// lane of a big home (about 700 bytes a lane) is split past it, so that
// one call never holds the write lock, or the rows of the transaction, for
// unboundedly long. 10,000 lanes fit in one transaction many times over.
var maxBatchTxBytes = 64 << 20

const (
	// batchChunk is how many appends the caller encodes before handing them
	// to the writer, and batchQueue how many such chunks may wait for it:
	// the writer inserts one chunk while the caller produces the next.
	batchChunk = 256
	batchQueue = 16
)

// maxBatchHold and maxBatchGap bound how long a transaction of AppendBatch
// holds the write lock while the caller is slow to produce appends (lanes
// read from the store one by one, say): past maxBatchHold, the transaction
// is committed as soon as the caller has nothing ready for maxBatchGap, and
// the appends queued meanwhile are served before the next one begins. A
// caller that keeps up fills one transaction (up to maxBatchTxBytes).
var (
	maxBatchHold = 100 * time.Millisecond
	maxBatchGap  = 5 * time.Millisecond
)

// AppendBatch implements events.BatchAppender. The appends are encoded on
// the caller's goroutine as the sequence yields them, in chunks, while the
// writer inserts the chunks already handed over into one open transaction,
// committed with one fsync at the end (more only past maxBatchTxBytes, or
// when the caller falls behind for longer than maxBatchHold). The batch is
// a job of the writer of its own rather than mixed into the group commits
// of concurrent Appends. Within the transaction each append is checked and
// applied on its own, as in a group commit: one stream's conflict or
// refusal answers that stream alone.
func (s *Store) AppendBatch(ctx context.Context, appends iter.Seq[events.StreamAppend]) ([]events.BatchResult, error) {
	if s.w == nil {
		return nil, fmt.Errorf("append batch: %w", ErrReadOnly)
	}
	if err := s.damage.refusal(); err != nil {
		return nil, fmt.Errorf("append batch: %w", err)
	}
	var out []events.BatchResult
	var reqs []*request
	var index []int // reqs[k] answers out[index[k]]
	jobCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	job := &batchJob{ctx: jobCtx, chunks: make(chan []*request, batchQueue)}
	o := op{reply: make(chan error, 1), run: job.run}
	started := false
	var stopped error
	chunk := make([]*request, 0, batchChunk)
	// send hands the chunk to the writer, and the job with the first one.
	send := func() error {
		if len(chunk) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("append batch: %w", err)
		}
		if !started {
			select {
			case s.w.ops <- o:
				started = true
			case <-s.closing:
				return fmt.Errorf("append batch: %w", ErrClosed)
			case <-ctx.Done():
				return fmt.Errorf("append batch: %w", ctx.Err())
			}
		}
		select {
		case job.chunks <- chunk:
		case <-s.closing:
			return fmt.Errorf("append batch: %w", ErrClosed)
		case <-ctx.Done():
			return fmt.Errorf("append batch: %w", ctx.Err())
		}
		chunk = make([]*request, 0, batchChunk)
		return nil
	}
	parts, stop, wait := readAhead(appends)
	// A panic below must not leave the reading goroutine blocked.
	defer stop()
read:
	for part := range parts {
		for _, a := range part {
			out = append(out, events.BatchResult{})
			r, err := newRequest(ctx, a.Stream, a.Expected, a.Proposed)
			if err != nil {
				out[len(out)-1].Err = err
				continue
			}
			reqs = append(reqs, r)
			index = append(index, len(out)-1)
			if chunk = append(chunk, r); len(chunk) == batchChunk {
				if stopped = send(); stopped != nil {
					break read
				}
			}
		}
	}
	stop()
	panicked := wait()
	if panicked != nil {
		// Nothing of the open transaction is committed for a caller that
		// will never see the outcome.
		cancel()
	} else if stopped == nil {
		stopped = send()
	}
	if started {
		close(job.chunks)
		// The writer runs a job it took to the end (it answers every
		// request it was handed, a cancelled one with its context's
		// error), so this wait is bounded by its last transaction.
		<-o.reply
	}
	if panicked != nil {
		panic(panicked)
	}
	for k, r := range reqs {
		if r.answered {
			out[index[k]] = events.BatchResult{Result: r.res, Err: r.err}
		}
	}
	return out, stopped
}

// readAhead reads appends on a goroutine of its own, batchChunk at a time,
// into parts, so that the caller's sequence produces the next chunk (a
// sweep decides its lanes) while AppendBatch encodes the one before and
// the writer inserts the one before that. stop makes it stop reading (the
// sequence's yield returns false); wait returns once the sequence has
// returned, with its panic if it panicked (for AppendBatch to re-panic on
// the caller's goroutine): the sequence never runs after AppendBatch
// returns.
func readAhead(appends iter.Seq[events.StreamAppend]) (parts <-chan []events.StreamAppend, stop func(), wait func() any) {
	ch := make(chan []events.StreamAppend, 2)
	stopped := make(chan struct{})
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		defer close(ch)
		part := make([]events.StreamAppend, 0, batchChunk)
		for a := range appends {
			select {
			case <-stopped:
				return // a writer error or a cancelled context: decide no more
			default:
			}
			if part = append(part, a); len(part) == batchChunk {
				select {
				case ch <- part:
				case <-stopped:
					return
				}
				part = make([]events.StreamAppend, 0, batchChunk)
			}
		}
		if len(part) > 0 {
			select {
			case ch <- part:
			case <-stopped:
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(stopped) }) }
	wait = func() any {
		for range ch {
		}
		return <-done
	}
	return ch, stop, wait
}

// batchJob is one AppendBatch on the writer: the chunks of requests the
// caller hands over, applied in transactions of the writer's connection.
type batchJob struct {
	ctx    context.Context
	chunks chan []*request
	// tx are the requests in the open transaction; txBytes their size and
	// opened when it began.
	tx      []*request
	txBytes int
	opened  time.Time
}

// run is the job on the writer's goroutine: it takes the chunks until the
// caller closes them, applying each in the open transaction (begun by the
// first chunk), and commits at the end, past maxBatchTxBytes, or when the
// caller falls behind (maxBatchHold); between transactions it serves the
// appends queued meanwhile. Every request it took is answered (r.answered)
// when it returns.
func (j *batchJob) run(w *writer) error {
	defer func() { w.answered = 0 }()
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	defer wait.Stop()
	for {
		var chunk []*request
		more := true
		if j.tx == nil {
			select {
			case chunk, more = <-j.chunks:
			case r := <-w.reqs:
				w.groupCommit(r)
				continue
			}
		} else {
			wait.Reset(max(time.Until(j.opened.Add(maxBatchHold)), maxBatchGap))
			select {
			case chunk, more = <-j.chunks:
			case <-wait.C:
				j.commit(w)
				continue
			}
		}
		if !more {
			j.commit(w)
			return nil
		}
		j.take(w, chunk)
	}
}

// take applies chunk, committing first where the transaction would pass
// maxBatchTxBytes (never inside an append: one bigger than the bound has a
// transaction of its own).
func (j *batchJob) take(w *writer, chunk []*request) {
	for len(chunk) > 0 {
		n, size := 0, j.txBytes
		for n < len(chunk) && ((j.tx == nil && n == 0) || size+chunk[n].size <= maxBatchTxBytes) {
			size += chunk[n].size
			n++
		}
		if n == 0 {
			j.commit(w)
			continue
		}
		j.apply(w, chunk[:n])
		chunk = chunk[n:]
	}
}

// apply applies chunk in the open transaction, beginning one if none is.
func (j *batchJob) apply(w *writer, chunk []*request) {
	if err := j.ctx.Err(); err != nil {
		// Nothing more of the batch is written: what the open transaction
		// holds is undone too (the caller has given up on its outcome).
		if j.tx != nil {
			w.rollbackTx()
			j.failTx(err)
		}
		fail(chunk, err)
		return
	}
	if err := w.damage.refusal(); err != nil {
		if j.tx != nil {
			w.rollbackTx()
			j.failTx(err)
		}
		fail(chunk, err)
		return
	}
	if j.tx == nil {
		if err := w.beginTx(); err != nil {
			w.damage.note(err)
			fail(chunk, storage.Classify(err))
			return
		}
		j.opened = time.Now()
	}
	j.tx = append(j.tx, chunk...)
	for _, r := range chunk {
		j.txBytes += r.size
	}
	if err := w.apply(chunk); err != nil {
		w.rollbackTx()
		w.damage.note(err)
		j.failTx(storage.Classify(err))
	}
}

// commit commits the open transaction, if any, and answers its requests.
func (j *batchJob) commit(w *writer) {
	if j.tx == nil {
		return
	}
	if err := j.ctx.Err(); err != nil {
		w.rollbackTx()
		j.failTx(err)
		return
	}
	commit := w.commitTx
	if len(j.tx) > batchChunk {
		commit = w.commitDeferringCheckpoint
	}
	if err := commit(); err != nil {
		w.damage.note(err)
		j.failTx(storage.Classify(err))
		return
	}
	w.collect(j.tx)
	for _, r := range j.tx {
		r.answered = true
	}
	j.tx, j.txBytes = nil, 0
	w.publish()
}

// failTx answers the requests of the transaction just undone with err.
func (j *batchJob) failTx(err error) {
	fail(j.tx, err)
	j.tx, j.txBytes = nil, 0
}

// fail answers reqs with err: nothing of them is in the log.
func fail(reqs []*request, err error) {
	for _, r := range reqs {
		r.res, r.err, r.answered = events.AppendResult{}, fmt.Errorf("append %s: %w", r.stream, err), true
	}
}

// autoCheckpointPages is SQLite's default wal_autocheckpoint, which the
// writer's connection keeps: a commit that leaves the write-ahead log
// longer than this many pages checkpoints it.
const autoCheckpointPages = 1000

// commitDeferringCheckpoint commits the open transaction of a big batch
// without the automatic checkpoint that would follow it (a 10,000-lane
// batch leaves more than autoCheckpointPages in the log, and copying them
// into the file took a third of its commit), so that the batch is answered
// first; the writer checkpoints right after (checkpointIfDue).
func (w *writer) commitDeferringCheckpoint() error {
	if _, err := w.stmtAutoCheckpointOff.Exec(); err != nil {
		return fmt.Errorf("defer checkpoint: %w", err)
	}
	err := w.commitTx()
	w.checkpointDue = true
	if _, onErr := w.stmtAutoCheckpointOn.Exec(); onErr != nil && err == nil {
		// The commit stands; the next commits checkpoint as usual once
		// the setting is back (checkpointIfDue tries again).
		w.autoCheckpointOff = true
	}
	return err
}

// checkpointIfDue runs the checkpoint a batch's commit deferred: PASSIVE,
// like the automatic one, so it never waits for a reader. A failure only
// leaves the log longer until the next checkpoint.
func (w *writer) checkpointIfDue() {
	if !w.checkpointDue {
		return
	}
	w.checkpointDue = false
	if w.autoCheckpointOff {
		if _, err := w.stmtAutoCheckpointOn.Exec(); err == nil {
			w.autoCheckpointOff = false
		}
	}
	_, _ = w.stmtCheckpoint.Exec()
}
