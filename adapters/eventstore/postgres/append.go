package postgres

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"hermes/events"
)

// Append writes proposed to the end of stream if its version satisfies
// expected, and returns once the transaction holding them is committed
// (durable as the server's synchronous_commit says: on its disk by
// default). Concurrent appends of this Store share one transaction. See
// [events.Store] for duplicates and errors; an event id already stored in
// another stream is also ErrInvalidAppend, since ids are unique across the
// whole store, and so is an event, stream name or id past this store's
// bounds or holding text PostgreSQL cannot store (a NUL, invalid UTF-8).
//
// When the connection fails under a transaction the writer runs it again
// on a new one, up to a bound; an append whose first commit did reach the
// log is then answered with its original places (Duplicate set only when
// the writer cannot tell that the first attempt was its own).
func (s *Store) Append(ctx context.Context, stream string, expected events.ExpectedVersion, proposed []events.Proposed) (events.AppendResult, error) {
	if err := s.writable(); err != nil {
		return events.AppendResult{}, fmt.Errorf("append %s: %w", stream, err)
	}
	r, err := newRequest(ctx, stream, expected, proposed)
	if err != nil {
		return events.AppendResult{}, err
	}
	g := &group{reqs: []*request{r}, done: make(chan struct{})}
	if err := s.w.enqueue(ctx, s, g); err != nil {
		return events.AppendResult{}, fmt.Errorf("append %s: %w", stream, err)
	}
	if err := s.w.wait(ctx, g); err != nil {
		return events.AppendResult{}, fmt.Errorf("append %s: %w", stream, err)
	}
	return r.res, r.err
}

// row is one proposed event, encoded by the appending goroutine.
type row struct {
	id, typ, data, meta string
	// erasure is set when the event erases earlier events of its stream
	// (erase.go); the writer applies it in the transaction of the append.
	erasure events.Erasure
}

// request is one stream's append on its way through the writer.
type request struct {
	ctx      context.Context
	stream   string
	expected events.ExpectedVersion
	rows     []row
	size     int
	erases   bool

	// Set by the writer. versions and positions are the places it gave
	// the rows in the current attempt; tried are the positions of an
	// earlier attempt whose commit was sent but never answered.
	res   events.AppendResult
	err   error
	tried []uint64
	// final: a committed transaction decided res and err.
	final bool
}

// newRequest validates and encodes an append on the caller's goroutine, so
// that malformed appends never reach the writer.
func newRequest(ctx context.Context, stream string, expected events.ExpectedVersion, proposed []events.Proposed) (*request, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("append %s: %s: %w", stream, fmt.Sprintf(format, args...), events.ErrInvalidAppend)
	}
	if stream == "" {
		return nil, fmt.Errorf("append: empty stream name: %w", events.ErrInvalidAppend)
	}
	if msg := badText(stream, maxStreamNameSize); msg != "" {
		return nil, fmt.Errorf("append: stream name %s: %w", msg, events.ErrInvalidAppend)
	}
	if len(proposed) == 0 {
		return nil, invalid("no events")
	}
	r := &request{ctx: ctx, stream: stream, expected: expected, rows: make([]row, len(proposed))}
	seen := make(map[string]struct{}, len(proposed))
	for i, p := range proposed {
		if p.ID == "" {
			return nil, invalid("event %d has no id", i)
		}
		if msg := badText(p.ID, maxEventIDSize); msg != "" {
			return nil, invalid("event %d: id %s", i, msg)
		}
		if _, dup := seen[p.ID]; dup {
			return nil, invalid("event id %q repeated", p.ID)
		}
		seen[p.ID] = struct{}{}
		if p.Event == nil {
			return nil, invalid("event %q is nil", p.ID)
		}
		typ := p.Event.EventType()
		if msg := badText(typ, maxTypeSize); msg != "" {
			return nil, invalid("event %q: type %s", p.ID, msg)
		}
		md := p.Metadata
		switch want := events.SchemaVersionOf(typ); md.SchemaVersion {
		case 0:
			md.SchemaVersion = want
		case want:
		default:
			return nil, invalid("event %q: metadata schema version %d, type %s is version %d", p.ID, md.SchemaVersion, typ, want)
		}
		data, err := events.Encode(p.Event)
		if err != nil {
			return nil, fmt.Errorf("append %s: %w", stream, err)
		}
		meta, err := md.AppendJSON(nil)
		if err != nil {
			return nil, fmt.Errorf("append %s: %w", stream, err)
		}
		if n := len(data) + len(meta); n > MaxEventSize {
			return nil, invalid("event %q is %d bytes, more than %d", p.ID, n, MaxEventSize)
		}
		if msg := badText(string(data), MaxEventSize); msg != "" {
			return nil, invalid("event %q: data %s", p.ID, msg)
		}
		if msg := badText(string(meta), MaxEventSize); msg != "" {
			return nil, invalid("event %q: metadata %s", p.ID, msg)
		}
		r.rows[i] = row{id: p.ID, typ: typ, data: string(data), meta: string(meta)}
		if x, ok := p.Event.(events.Erasure); ok {
			r.rows[i].erasure = x
			r.erases = true
		}
		r.size += len(data) + len(meta) + len(p.ID) + len(typ)
	}
	r.size += len(stream) * len(proposed)
	return r, nil
}

// badText says why s cannot be stored in a text column (PostgreSQL keeps
// neither NUL nor invalid UTF-8) or is longer than max bytes, and "" when
// it can.
func badText(s string, max int) string {
	switch {
	case len(s) > max:
		return fmt.Sprintf("is %d bytes, more than %d", len(s), max)
	case strings.IndexByte(s, 0) >= 0:
		return "holds a NUL byte"
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	}
	return ""
}
