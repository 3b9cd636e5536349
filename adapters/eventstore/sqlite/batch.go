package sqlite

import (
	"context"
	"fmt"

	"hermes/events"
)

var _ events.BatchAppender = (*Store)(nil)

// maxBatchTxBytes bounds one transaction of AppendBatch: a sweep of every
// lane of a big home (about 700 bytes a lane) is split past it, so that
// one call never holds the write lock, or the rows of the transaction, for
// unboundedly long. 10,000 lanes fit in one transaction many times over.
var maxBatchTxBytes = 64 << 20

// AppendBatch implements events.BatchAppender: the appends are committed
// together in one transaction and one fsync (more only past maxBatchTxBytes),
// run by the writer as a job of its own rather than mixed into the group
// commits of concurrent Appends (which are bounded by maxBatchRequests).
// Within the transaction each append is checked and applied on its own, as
// in a group commit: one stream's conflict or refusal answers that stream
// alone.
func (s *Store) AppendBatch(ctx context.Context, appends []events.StreamAppend) ([]events.BatchResult, error) {
	out := make([]events.BatchResult, len(appends))
	if s.w == nil {
		return out, fmt.Errorf("append batch: %w", ErrReadOnly)
	}
	reqs := make([]*request, 0, len(appends))
	index := make([]int, 0, len(appends)) // reqs[k] answers appends[index[k]]
	for i, a := range appends {
		r, err := newRequest(ctx, a.Stream, a.Expected, a.Proposed)
		if err != nil {
			out[i].Err = err
			continue
		}
		reqs = append(reqs, r)
		index = append(index, i)
	}
	for start := 0; start < len(reqs); {
		end, size := start, 0
		for end < len(reqs) && (end == start || size+reqs[end].size <= maxBatchTxBytes) {
			size += reqs[end].size
			end++
		}
		if err := s.commitBatch(ctx, reqs[start:end]); err != nil {
			return out, err
		}
		for k := start; k < end; k++ {
			rep := <-reqs[k].reply
			out[index[k]] = events.BatchResult{Result: rep.res, Err: rep.err}
		}
		start = end
	}
	return out, nil
}

// commitBatch has the writer commit reqs in one transaction and waits until
// it has; each request's outcome is then in its reply channel.
func (s *Store) commitBatch(ctx context.Context, reqs []*request) error {
	o := op{reply: make(chan error, 1), run: func(w *writer) error {
		w.commit(reqs)
		// The sweep's appenders do not come back for the next batch: no
		// gathering for them.
		w.answered = 0
		return nil
	}}
	select {
	case s.w.ops <- o:
	case <-s.closing:
		return fmt.Errorf("append batch: %w", ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("append batch: %w", ctx.Err())
	}
	// The writer runs an op it took to the end (w.commit answers every
	// request, a cancelled one with its context's error), so this wait is
	// bounded by the transaction.
	<-o.reply
	return nil
}
