package kurrentdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"hermes/events"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

// envelope decodes a recorded event of stream (its hermes name), opening
// it with kr when it is sealed (seal.go). An event a copy wrote
// (record.go) has its source's time.
func (kr *keyring) envelope(stream string, r *esdb.RecordedEvent) (events.Envelope, error) {
	var md storedMetadata
	meta, at, copied := splitRecordedAt(r.UserMetadata)
	if !copied {
		at = r.CreatedDate
	}
	if len(meta) > 0 {
		if err := json.Unmarshal(meta, &md); err != nil {
			return events.Envelope{}, fmt.Errorf("event %s@%d metadata: %w", r.StreamID, r.EventNumber, err)
		}
	}
	var e events.Event
	var err error
	if md.Sealed != nil {
		var erasedBy string
		e, erasedBy, err = kr.open(r.StreamID, r, md.Sealed, md.Shadow, stream)
		if erasedBy != "" {
			md.Redacted = erasedBy
		}
	} else {
		e, err = events.Decode(r.EventType, r.Data)
		if err == nil {
			kr.s.notePlaintext(r, e)
		}
	}
	if err != nil {
		return events.Envelope{}, fmt.Errorf("event %s@%d: %w", r.StreamID, r.EventNumber, err)
	}
	return events.Envelope{
		Stream:     stream,
		Version:    r.EventNumber + 1,
		Position:   r.Position.Commit,
		ID:         r.EventID.String(),
		Type:       r.EventType,
		RecordedAt: at,
		Metadata:   md.Metadata,
		Event:      e,
	}, nil
}

// notFound reports whether err is KurrentDB's "stream not found".
func notFound(err error) bool {
	var e *esdb.Error
	return errors.As(err, &e) && e.Code() == esdb.ErrorCodeResourceNotFound
}

// drain reads rs to its end, keeping what keep accepts (nil keeps all),
// and stops after limit kept events (0: no limit). It returns how many
// events the server sent.
func (s *Store) drain(kr *keyring, rs *esdb.ReadStream, limit int, keep func(*esdb.RecordedEvent) bool, out *[]events.Envelope) (int, error) {
	defer rs.Close()
	sent := 0
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return sent, nil
		}
		if err != nil {
			return sent, err
		}
		sent++
		r := ev.OriginalEvent()
		if r == nil || (keep != nil && !keep(r)) {
			continue
		}
		name, ok := s.hermesName(r.StreamID)
		if !ok {
			continue
		}
		env, err := kr.envelope(name, r)
		if err != nil {
			return sent, err
		}
		*out = append(*out, env)
		if limit > 0 && len(*out) >= limit {
			return sent, nil
		}
	}
}

// ReadStream returns up to count events of stream from version from
// (inclusive) in the given direction; backwards from 0 starts at the last
// event. A count of zero or less reads nothing. events.ErrStreamNotFound
// when the stream has no events.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, count int, dir events.Direction) ([]events.Envelope, error) {
	if count <= 0 {
		return nil, nil
	}
	opts := esdb.ReadStreamOptions{Direction: esdb.Forwards, From: esdb.Start{}}
	switch {
	case dir == events.Backwards && from == 0:
		opts.Direction, opts.From = esdb.Backwards, esdb.End{}
	case dir == events.Backwards:
		opts.Direction, opts.From = esdb.Backwards, esdb.Revision(from-1)
	case from > 1:
		opts.From = esdb.Revision(from - 1)
	}
	var out []events.Envelope
	err := s.do(ctx, func(c *esdb.Client) error {
		out = out[:0]
		rs, err := c.ReadStream(ctx, s.serverName(stream), opts, uint64(count))
		if err != nil {
			return err
		}
		_, err = s.drain(s.newKeyring(ctx), rs, 0, nil, &out)
		return err
	})
	switch {
	case notFound(err):
		return nil, fmt.Errorf("read stream %s: %w", stream, events.ErrStreamNotFound)
	case err != nil:
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	return out, nil
}

// allPage is how many $all events one read asks for while skipping events
// that are not hermes'.
const allPage = 512

// ReadAll returns up to count events of hermes' streams with a position
// greater than after, in position order. KurrentDB reads $all forwards from
// a position inclusively, so the event at after itself is skipped.
func (s *Store) ReadAll(ctx context.Context, after uint64, count int) ([]events.Envelope, error) {
	if count <= 0 {
		return nil, nil
	}
	var out []events.Envelope
	from := after
	for len(out) < count {
		var page []events.Envelope
		var sent int
		start := esdb.AllPosition(esdb.Position{Commit: from, Prepare: from})
		if from == 0 {
			start = esdb.Start{}
		}
		lastSeen := from
		err := s.do(ctx, func(c *esdb.Client) error {
			page, lastSeen = page[:0], from
			rs, err := c.ReadAll(ctx, esdb.ReadAllOptions{From: start}, allPage)
			if err != nil {
				return err
			}
			sent, err = s.drain(s.newKeyring(ctx), rs, 0, func(r *esdb.RecordedEvent) bool {
				lastSeen = max(lastSeen, r.Position.Commit)
				return r.Position.Commit > from
			}, &page)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("read all after %d: %w", after, err)
		}
		for _, e := range page {
			if len(out) < count {
				out = append(out, e)
			}
		}
		if sent < allPage || lastSeen == from {
			return out, nil
		}
		from = lastSeen
	}
	return out, nil
}

// Head returns the position of the last event of hermes' streams (0 when
// there is none), reading $all backwards past system events.
func (s *Store) Head(ctx context.Context) (uint64, error) {
	var before esdb.AllPosition = esdb.End{}
	for {
		var sent int
		var oldest, head uint64
		var found bool
		err := s.do(ctx, func(c *esdb.Client) error {
			oldest, head, found = 0, 0, false
			rs, err := c.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: before}, 64)
			if err != nil {
				return err
			}
			// Only positions are compared: nothing is decoded (or opened).
			sent, err = s.drain(nil, rs, 0, func(r *esdb.RecordedEvent) bool {
				oldest = r.Position.Commit
				if _, ok := s.hermesName(r.StreamID); ok && !found {
					head, found = r.Position.Commit, true
				}
				return false
			}, nil)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("head: %w", err)
		}
		if found {
			return head, nil
		}
		if sent < 64 || oldest == 0 {
			return 0, nil
		}
		before = esdb.Position{Commit: oldest, Prepare: oldest}
	}
}

// notePlaintext counts an event read with personal content outside a seal:
// written before crypto-shredding (seal.go), so no erasure can remove it
// from the server. The first one is logged, with what to do.
func (s *Store) notePlaintext(r *esdb.RecordedEvent, e events.Event) {
	if class, _ := events.PersonalClass(e); class == "" {
		return
	}
	s.plaintext.Add(1)
	s.plaintextOnce.Do(func() {
		if s.logger != nil {
			s.logger.Warn("the KurrentDB log holds personal content written before crypto-shredding: an erasure cannot remove it from the server (docs/ERASURE.md, KurrentDB)",
				"first", fmt.Sprintf("%s@%d", r.StreamID, r.EventNumber))
		}
	})
}

// PlaintextEvents is how many events this store has read (since it opened)
// with personal content in plaintext, written before crypto-shredding.
func (s *Store) PlaintextEvents() int64 { return s.plaintext.Load() }
