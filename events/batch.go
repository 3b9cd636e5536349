package events

import (
	"context"
	"iter"
)

// StreamAppend is one stream's part of a batch append: what
// [Store.Append] takes for a single stream.
type StreamAppend struct {
	Stream   string
	Expected ExpectedVersion
	Proposed []Proposed
}

// BatchResult is the outcome of one [StreamAppend]: the result Append
// would have returned, or its error (ErrWrongExpectedVersion for a stream
// that moved, ErrInvalidAppend, ...).
type BatchResult struct {
	Result AppendResult
	Err    error
}

// BatchAppender is an optional capability of a [Store]: append to many
// streams in one call, sharing transactions and fsyncs (the SQLite store
// commits them in one transaction, split only past a size bound). Each stream's
// append is atomic and checked against its own expected version; one
// stream's conflict or refusal does not fail the others. The results are
// in the order the sequence yields the appends, one per append. The error
// is for the call as a whole (a closed store, a cancelled context), with
// the results of the appends that were answered before it; an append not
// answered has a zero result and no error.
//
// The store pulls the sequence on the caller's goroutine and may write the
// appends it has taken while later ones are still being produced (the
// caller decides the next lanes while the first are inserted). The
// sequence must not append to the same store itself: the batch may be
// holding its writer.
//
// A store without it (KurrentDB: no multi-stream transactions) is driven
// one Append per stream; since the commands derive event ids from the
// command, a retried batch is idempotent per stream either way.
type BatchAppender interface {
	AppendBatch(ctx context.Context, appends iter.Seq[StreamAppend]) ([]BatchResult, error)
}
