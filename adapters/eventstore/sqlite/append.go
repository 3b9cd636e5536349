package sqlite

import (
	"context"
	"fmt"
	"strings"

	"hermes/events"
)

// Append writes proposed to the end of stream if its version satisfies
// expected, and returns once the events are committed with
// synchronous=FULL (on disk). Concurrent appends share one transaction and
// one fsync; a lone append (the writer idle) commits on the caller's
// goroutine. See [events.Store] for duplicates and errors; an event id
// already stored in another stream is also ErrInvalidAppend, since ids are
// unique across the whole store.
func (s *Store) Append(ctx context.Context, stream string, expected events.ExpectedVersion, proposed []events.Proposed) (events.AppendResult, error) {
	if s.w == nil {
		return events.AppendResult{}, fmt.Errorf("append %s: %w", stream, ErrReadOnly)
	}
	if err := s.damage.refusal(); err != nil {
		return events.AppendResult{}, fmt.Errorf("append %s: %w", stream, err)
	}
	r, err := newRequest(ctx, stream, expected, proposed)
	if err != nil {
		return events.AppendResult{}, err
	}
	if s.w.commitInline(r) {
		return r.res, r.err
	}
	r.reply = make(chan reply, 1)
	return s.w.submit(ctx, r)
}

// newRequest validates and encodes an append on the caller's goroutine, so
// that malformed appends never reach the writer and the writer does no JSON
// work. An Append gives it the reply channel the writer answers on.
func newRequest(ctx context.Context, stream string, expected events.ExpectedVersion, proposed []events.Proposed) (*request, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("append %s: %s: %w", stream, fmt.Sprintf(format, args...), events.ErrInvalidAppend)
	}
	if stream == "" {
		return nil, fmt.Errorf("append: empty stream name: %w", events.ErrInvalidAppend)
	}
	if len(proposed) == 0 {
		return nil, invalid("no events")
	}
	r := &request{ctx: ctx, stream: stream, expected: expected}
	if len(proposed) == 1 {
		// Most appends (every lane of a sweep) hold one event: its row
		// and places come with the request.
		r.rows, r.places = r.oneRow[:], r.onePlaces[:]
	} else {
		r.rows, r.places = make([]row, len(proposed)), make([]uint64, 2*len(proposed))
	}
	r.streamArg = stream
	var seen map[string]struct{}
	if len(proposed) > 8 {
		seen = make(map[string]struct{}, len(proposed))
	}
	for i, p := range proposed {
		if p.ID == "" {
			return nil, invalid("event %d has no id", i)
		}
		if seen != nil {
			if _, dup := seen[p.ID]; dup {
				return nil, invalid("event id %q repeated", p.ID)
			}
			seen[p.ID] = struct{}{}
		} else {
			for _, q := range proposed[:i] {
				if q.ID == p.ID {
					return nil, invalid("event id %q repeated", p.ID)
				}
			}
		}
		if p.Event == nil {
			return nil, invalid("event %q is nil", p.ID)
		}
		typ := p.Event.EventType()
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
		var metaBuf [256]byte
		meta, err := md.AppendJSON(metaBuf[:0])
		if err != nil {
			return nil, fmt.Errorf("append %s: %w", stream, err)
		}
		if n := len(data) + len(meta); n > MaxEventSize {
			return nil, invalid("event %q is %d bytes, more than %d", p.ID, n, MaxEventSize)
		}
		// One string holds both (one allocation of their exact size).
		var sb strings.Builder
		sb.Grow(len(data) + len(meta))
		sb.Write(data)
		sb.Write(meta)
		both := sb.String()
		r.rows[i] = row{id: p.ID, typ: typ, data: both[:len(data)], meta: both[len(data):]}
		r.rows[i].args = [4]any{r.rows[i].id, r.rows[i].typ, r.rows[i].data, r.rows[i].meta}
		if x, ok := p.Event.(events.Erasure); ok {
			r.rows[i].erasure = x
			r.erases = true
		}
		r.size += len(data) + len(meta) + len(p.ID) + len(typ)
	}
	return r, nil
}
