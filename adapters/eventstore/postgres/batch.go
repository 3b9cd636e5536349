package postgres

import (
	"context"
	"fmt"
	"iter"

	"hermes/events"
)

const (
	// batchChunk and batchChunkBytes bound a group of AppendBatch: one
	// transaction of the writer (with whatever Appends are queued beside
	// it). A sweep of 10,000 lanes is about 40 transactions, and the order
	// lock is free between them for the other nodes.
	batchChunk      = 256
	batchChunkBytes = 4 << 20
	// batchInFlight is how many groups of one batch may be with the
	// writers: one, so that they commit in the order of the sequence (a
	// later append of a stream may expect the version an earlier one
	// leaves); the caller produces and encodes the next group meanwhile.
	batchInFlight = 1
)

// AppendBatch implements events.BatchAppender. The appends are encoded on
// the caller's goroutine as the sequence yields them and handed to the
// writer in groups, each committed in one transaction while the caller
// produces the next. Within a transaction each append is checked on its
// own, as in a group commit of Appends: one stream's conflict or refusal
// answers that stream alone.
func (s *Store) AppendBatch(ctx context.Context, appends iter.Seq[events.StreamAppend]) ([]events.BatchResult, error) {
	if err := s.writable(); err != nil {
		return nil, fmt.Errorf("append batch: %w", err)
	}
	var out []events.BatchResult
	type sent struct {
		g     *group
		index []int // g.reqs[k] answers out[index[k]]
	}
	var inFlight []sent
	answer := func(sn sent) {
		for k, r := range sn.g.reqs {
			out[sn.index[k]] = events.BatchResult{Result: r.res, Err: r.err}
		}
	}
	// waitOldest waits for the oldest group in flight and fills in its
	// results. It waits even once ctx is done: the writer answers every
	// request it was handed (one whose context ended before its
	// transaction with that context's error), so the wait is bounded by
	// the transaction in progress, and an append that did commit is not
	// reported as unanswered.
	waitOldest := func() error {
		sn := inFlight[0]
		if err := s.w.wait(context.Background(), sn.g); err != nil {
			return err
		}
		inFlight = inFlight[1:]
		answer(sn)
		return nil
	}
	cur := sent{g: &group{done: make(chan struct{})}}
	size := 0
	send := func() error {
		if len(cur.g.reqs) == 0 {
			return nil
		}
		if len(inFlight) == batchInFlight {
			if err := waitOldest(); err != nil {
				return err
			}
		}
		if err := s.w.enqueue(ctx, s, cur.g); err != nil {
			return err
		}
		inFlight = append(inFlight, cur)
		cur, size = sent{g: &group{done: make(chan struct{})}}, 0
		return nil
	}
	var stopped error
	for a := range appends {
		out = append(out, events.BatchResult{})
		r, err := newRequest(ctx, a.Stream, a.Expected, a.Proposed)
		if err != nil {
			out[len(out)-1].Err = err
			continue
		}
		cur.g.reqs, cur.index = append(cur.g.reqs, r), append(cur.index, len(out)-1)
		if size += r.size; len(cur.g.reqs) == batchChunk || size >= batchChunkBytes {
			if stopped = send(); stopped != nil {
				break
			}
		}
	}
	if stopped == nil {
		stopped = send()
	}
	for len(inFlight) > 0 {
		if err := waitOldest(); err != nil {
			// The groups still in flight have no outcome for the caller.
			if stopped == nil {
				stopped = err
			}
			break
		}
	}
	if stopped != nil {
		return out, fmt.Errorf("append batch: %w", stopped)
	}
	return out, nil
}
