package sqlite

import (
	"context"
	"fmt"

	"hermes/events"
)

var _ events.BatchAppender = (*Store)(nil)

// AppendBatch implements events.BatchAppender: every append is handed to
// the writer before the first answer is awaited, so the writer commits them
// in as few group commits as its bounds allow (maxBatchRequests appends or
// maxBatchBytes per transaction, one fsync each), instead of one
// transaction and one fsync per stream. Each append is checked and applied
// on its own inside the transaction, as concurrent Appends are.
func (s *Store) AppendBatch(ctx context.Context, appends []events.StreamAppend) ([]events.BatchResult, error) {
	out := make([]events.BatchResult, len(appends))
	if s.w == nil {
		return out, fmt.Errorf("append batch: %w", ErrReadOnly)
	}
	reqs := make([]*request, len(appends))
	for i, a := range appends {
		r, err := newRequest(ctx, a.Stream, a.Expected, a.Proposed)
		if err != nil {
			out[i].Err = err
			continue
		}
		reqs[i] = r
	}
	// Hand over and collect in windows: the writer's queue holds
	// maxBatchRequests, and answers are read while later requests wait.
	for start := 0; start < len(reqs); start += maxBatchRequests {
		end := min(start+maxBatchRequests, len(reqs))
		for _, r := range reqs[start:end] {
			if r == nil {
				continue
			}
			select {
			case s.w.reqs <- r:
			case <-s.w.stop:
				return out, fmt.Errorf("append batch: %w", ErrClosed)
			case <-ctx.Done():
				return out, fmt.Errorf("append batch: %w", ctx.Err())
			}
		}
		for i, r := range reqs[start:end] {
			if r == nil {
				continue
			}
			select {
			case rep := <-r.reply:
				out[start+i] = events.BatchResult{Result: rep.res, Err: rep.err}
			case <-s.w.done:
				select {
				case rep := <-r.reply:
					out[start+i] = events.BatchResult{Result: rep.res, Err: rep.err}
					continue
				default:
				}
				return out, fmt.Errorf("append batch: %w", ErrClosed)
			case <-ctx.Done():
				return out, fmt.Errorf("append batch: outcome unknown: %w", ctx.Err())
			}
		}
	}
	return out, nil
}
