package kurrentdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"hermes/events"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
)

// duplicateWindow is how many of a stream's last events an append searches
// for its ids before it writes (see the package doc).
const duplicateWindow = 64

// Append writes proposed to the end of stream if its version satisfies
// expected. It returns once the server acknowledged the write (on disk and
// replicated to a quorum). A re-append of ids already stored in the stream
// (among its last duplicateWindow events, or at the revision the original
// append expected) writes nothing and returns the original places with
// Duplicate set; a mix of stored and new ids is events.ErrInvalidAppend.
func (s *Store) Append(ctx context.Context, stream string, expected events.ExpectedVersion, proposed []events.Proposed) (events.AppendResult, error) {
	data, err := encode(stream, proposed)
	if err != nil {
		return events.AppendResult{}, fmt.Errorf("append %s: %w", stream, err)
	}
	plan := planSeal(proposed)
	for attempt := 0; ; attempt++ {
		// The ids are looked for first: the server de-duplicates only a
		// retry that carries its original expected revision.
		res, current, tail, done, err := s.checkStored(ctx, stream, expected, proposed)
		if done || err != nil {
			return res, err
		} else if !expected.Matches(current) {
			return events.AppendResult{}, &events.WrongVersionError{Stream: stream, Expected: expected, Actual: current}
		}
		if !plan.needed() {
			return s.write(ctx, stream, expected, data, proposed)
		}
		// Sealed content goes at an exact revision (seal's rule); an append
		// at any version retries on a race with another writer.
		exact := expected
		if expected.IsAny() {
			exact = events.ExactVersion(current)
		}
		sealed, err := s.seal(ctx, stream, proposed, data, plan, current, tail)
		if err != nil {
			return events.AppendResult{}, fmt.Errorf("append %s: %w", stream, err)
		}
		res, err = s.write(ctx, stream, exact, sealed, proposed)
		if expected.IsAny() && errors.Is(err, events.ErrWrongExpectedVersion) && attempt < anyRetries {
			continue
		}
		return res, err
	}
}

// anyRetries bounds the retries of an append at any version that seals
// content and lost a race.
const anyRetries = 16

// write appends data at expected (already checked against the tail).
func (s *Store) write(ctx context.Context, stream string, expected events.ExpectedVersion, data []esdb.EventData, proposed []events.Proposed) (events.AppendResult, error) {
	opts := esdb.AppendToStreamOptions{ExpectedRevision: esdb.Any{}}
	if v, ok := expected.Exact(); ok {
		opts.ExpectedRevision = esdb.Revision(v - 1)
	} else if !expected.IsAny() {
		opts.ExpectedRevision = esdb.NoStream{}
	}
	var wr *esdb.WriteResult
	err := s.do(ctx, func(c *esdb.Client) error {
		var err error
		wr, err = c.AppendToStream(ctx, s.serverName(stream), opts, data...)
		return err
	})
	var e *esdb.Error
	switch {
	case errors.As(err, &e) && e.Code() == esdb.ErrorCodeWrongExpectedVersion:
		// A racing writer may have written these very ids.
		res, current, _, done, cerr := s.checkStored(ctx, stream, expected, proposed)
		if done || cerr != nil {
			return res, cerr
		}
		if actual, ok := actualRevision(e); ok {
			current = actual
		}
		return events.AppendResult{}, &events.WrongVersionError{Stream: stream, Expected: expected, Actual: current}
	case err != nil && strings.Contains(err.Error(), "Maximum Append Size"):
		return events.AppendResult{}, fmt.Errorf("append %s: %w: %v", stream, events.ErrInvalidAppend, err)
	case err != nil:
		return events.AppendResult{}, fmt.Errorf("append %s: %w", stream, err)
	}

	n := uint64(len(proposed))
	res := events.AppendResult{Versions: make([]uint64, n), Positions: make([]uint64, n)}
	lastRevision := wr.NextExpectedVersion
	for i := range res.Versions {
		res.Versions[i] = lastRevision + 2 - n + uint64(i)
	}
	if wr.CommitPosition == 0 && wr.PreparePosition == 0 {
		// The server found the events already written (its idempotency
		// rule) and does not say where: read them back.
		return s.readBack(ctx, stream, proposed, res.Versions, true)
	}
	if n == 1 {
		res.Positions[0] = wr.CommitPosition
		return res, nil
	}
	// Each event has its own position; the write result gives only the
	// last one, so read them back.
	return s.readBack(ctx, stream, proposed, res.Versions, false)
}

// encode validates an append and turns it into the client's events.
func encode(stream string, proposed []events.Proposed) ([]esdb.EventData, error) {
	switch {
	case stream == "":
		return nil, fmt.Errorf("%w: empty stream name", events.ErrInvalidAppend)
	case strings.HasPrefix(stream, "$"):
		return nil, fmt.Errorf("%w: %s is a system stream name", events.ErrInvalidAppend, stream)
	case len(proposed) == 0:
		return nil, fmt.Errorf("%w: no events", events.ErrInvalidAppend)
	}
	seen := make(map[uuid.UUID]bool, len(proposed))
	out := make([]esdb.EventData, len(proposed))
	for i, p := range proposed {
		if p.ID == "" {
			return nil, fmt.Errorf("%w: event %d has no id", events.ErrInvalidAppend, i)
		}
		id, err := uuid.Parse(p.ID)
		if err != nil || id == uuid.Nil {
			return nil, fmt.Errorf("%w: event id %q is not a UUID", events.ErrInvalidAppend, p.ID)
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: id %s repeated in the append", events.ErrInvalidAppend, p.ID)
		}
		seen[id] = true
		if p.Event == nil {
			return nil, fmt.Errorf("%w: event %d is nil", events.ErrInvalidAppend, i)
		}
		data, err := events.Encode(p.Event)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", events.ErrInvalidAppend, err)
		}
		md, err := json.Marshal(p.Metadata)
		if err != nil {
			return nil, fmt.Errorf("%w: metadata: %v", events.ErrInvalidAppend, err)
		}
		out[i] = esdb.EventData{EventID: id, EventType: p.Event.EventType(), ContentType: esdb.ContentTypeJson, Data: data, Metadata: md}
	}
	return out, nil
}

// checkStored looks for the proposed ids among the stream's last events.
// done is true when it decided the append: every id stored (a duplicate)
// or only some (invalid). Otherwise current is the stream's version.
//
// It runs before every append, so it reads only what it compares (ids,
// revisions, positions) and decodes no payload: decoding the window's
// events cost more than the rest of the append.
func (s *Store) checkStored(ctx context.Context, stream string, expected events.ExpectedVersion, proposed []events.Proposed) (res events.AppendResult, current uint64, tail []stored, done bool, err error) {
	tail, err = s.recent(ctx, stream, duplicateWindow)
	if errors.Is(err, events.ErrStreamNotFound) {
		return events.AppendResult{}, 0, nil, false, nil
	}
	if err != nil {
		return events.AppendResult{}, 0, nil, false, fmt.Errorf("append %s: %w", stream, err)
	}
	current = tail[0].version
	byID := make(map[string]stored, len(tail))
	for _, e := range tail {
		byID[e.id] = e
	}
	found := 0
	res = events.AppendResult{Versions: make([]uint64, len(proposed)), Positions: make([]uint64, len(proposed)), Duplicate: true}
	for i, p := range proposed {
		if e, ok := byID[canonical(p.ID)]; ok {
			found++
			res.Versions[i], res.Positions[i] = e.version, e.position
		}
	}
	switch {
	case found == len(proposed):
		return res, current, tail, true, nil
	case found > 0:
		return events.AppendResult{}, current, tail, true, fmt.Errorf("append %s: %w: %d of %d ids are already stored", stream, events.ErrInvalidAppend, found, len(proposed))
	}
	return events.AppendResult{}, current, tail, false, nil
}

// stored is where an event of a stream is, without its payload.
type stored struct {
	id, typ           string
	version, position uint64
}

// recent returns the places of the last (up to) count events of stream,
// newest first; events.ErrStreamNotFound when it has none.
func (s *Store) recent(ctx context.Context, stream string, count int) ([]stored, error) {
	opts := esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}
	var out []stored
	err := s.do(ctx, func(c *esdb.Client) error {
		out = out[:0]
		rs, err := c.ReadStream(ctx, s.serverName(stream), opts, uint64(count))
		if err != nil {
			return err
		}
		defer rs.Close()
		for {
			ev, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if r := ev.OriginalEvent(); r != nil {
				out = append(out, stored{id: r.EventID.String(), typ: r.EventType, version: r.EventNumber + 1, position: r.Position.Commit})
			}
		}
	})
	switch {
	case notFound(err):
		return nil, fmt.Errorf("read stream %s: %w", stream, events.ErrStreamNotFound)
	case err != nil:
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	case len(out) == 0:
		return nil, fmt.Errorf("read stream %s: %w", stream, events.ErrStreamNotFound)
	}
	return out, nil
}

func canonical(id string) string {
	if u, err := uuid.Parse(id); err == nil {
		return u.String()
	}
	return id
}

// readBack reads the events just appended (or found by the server's
// idempotency rule) at versions, to learn their positions.
func (s *Store) readBack(ctx context.Context, stream string, proposed []events.Proposed, versions []uint64, duplicate bool) (events.AppendResult, error) {
	envs, err := s.ReadStream(ctx, stream, versions[0], len(versions), events.Forwards)
	if err != nil {
		return events.AppendResult{}, fmt.Errorf("append %s: read back: %w", stream, err)
	}
	if len(envs) != len(versions) {
		return events.AppendResult{}, fmt.Errorf("append %s: read back %d events at version %d, want %d", stream, len(envs), versions[0], len(versions))
	}
	res := events.AppendResult{Versions: versions, Positions: make([]uint64, len(versions)), Duplicate: duplicate}
	for i, e := range envs {
		if e.ID != canonical(proposed[i].ID) {
			return events.AppendResult{}, fmt.Errorf("append %s: version %d holds event %s, want %s", stream, e.Version, e.ID, proposed[i].ID)
		}
		res.Positions[i] = e.Position
	}
	return res, nil
}

// gotRevision matches the client's only report of the current revision:
// "expecting 'X' but got 'Y'".
var gotRevision = regexp.MustCompile(`but got '([^']*)'`)

// actualRevision is the stream's version (revision + 1; 0 for no stream)
// named by a wrong-expected-version error.
func actualRevision(e *esdb.Error) (uint64, bool) {
	m := gotRevision.FindStringSubmatch(e.Error())
	if m == nil {
		return 0, false
	}
	if m[1] == "no_stream" {
		return 0, true
	}
	n, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return n + 1, true
}
