package kurrentdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"time"

	"hermes/events"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
)

var _ events.RecordStore = (*Store)(nil)

// KurrentDB sets an event's created time itself, when it writes it. An
// event written by WriteRecords (a copy from another store) keeps the time
// of the store it came from as one more member of its metadata,
// "hermes_recorded_at" (Unix nanoseconds), added as the last member and
// taken out again when the event is read: ReadRecords returns the metadata
// as the source wrote it, and Envelope.RecordedAt is that time.
const recordedAtKey = `"hermes_recorded_at":`

var recordedAtSuffix = regexp.MustCompile(`(,?)"hermes_recorded_at":(-?[0-9]+)}\s*$`)

// withRecordedAt adds the recorded time to a JSON object's text as its
// last member.
func withRecordedAt(meta []byte, at time.Time) ([]byte, error) {
	return withMembers(meta, recordedAtKey+strconv.FormatInt(at.UnixNano(), 10))
}

// withMembers adds members ("name":value) to a JSON object's text, after
// its own, leaving its own bytes as they are.
func withMembers(meta []byte, members ...string) ([]byte, error) {
	trimmed := bytes.TrimRight(meta, " \t\r\n")
	if len(trimmed) < 2 || trimmed[0] != '{' || trimmed[len(trimmed)-1] != '}' {
		return nil, fmt.Errorf("%w: metadata is not a JSON object", events.ErrInvalidAppend)
	}
	comma := len(bytes.TrimSpace(trimmed[1:len(trimmed)-1])) > 0
	var b bytes.Buffer
	b.Write(trimmed[:len(trimmed)-1])
	for _, m := range members {
		if comma {
			b.WriteByte(',')
		}
		b.WriteString(m)
		comma = true
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// splitRecordedAt undoes withRecordedAt: the metadata as it was given and
// the time, or the metadata unchanged and false.
func splitRecordedAt(meta []byte) ([]byte, time.Time, bool) {
	if !bytes.Contains(meta, []byte(recordedAtKey)) {
		return meta, time.Time{}, false
	}
	m := recordedAtSuffix.FindSubmatchIndex(meta)
	if m == nil {
		return meta, time.Time{}, false
	}
	ns, err := strconv.ParseInt(string(meta[m[4]:m[5]]), 10, 64)
	if err != nil {
		return meta, time.Time{}, false
	}
	out := make([]byte, 0, m[0]+1)
	out = append(out, meta[:m[0]]...)
	out = append(out, '}')
	return out, time.Unix(0, ns).UTC(), true
}

// splitSealed takes the members a sealed event adds to its metadata
// (hermes_sealed, hermes_shadow: seal.go), which come after the event's
// own, out of a metadata object's text (without hermes_recorded_at): the
// event's metadata as it was written, byte for byte, and what they say.
// ok is false when the event is not sealed.
func splitSealed(meta []byte) (own []byte, sp sealedPart, shadow []byte, ok bool, err error) {
	if !bytes.Contains(meta, []byte(`"hermes_sealed"`)) {
		return meta, sealedPart{}, nil, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(meta))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, sealedPart{}, nil, false, errors.New("metadata is not a JSON object")
	}
	cut := -1
	for dec.More() {
		off := int(dec.InputOffset())
		t, err := dec.Token()
		if err != nil {
			return nil, sealedPart{}, nil, false, fmt.Errorf("metadata: %w", err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, sealedPart{}, nil, false, fmt.Errorf("metadata: %w", err)
		}
		switch key, _ := t.(string); key {
		case "hermes_sealed":
			if err := json.Unmarshal(raw, &sp); err != nil {
				return nil, sealedPart{}, nil, false, fmt.Errorf("metadata: hermes_sealed: %w", err)
			}
			ok = true
		case "hermes_shadow":
			shadow = raw
		default:
			if cut >= 0 {
				return nil, sealedPart{}, nil, false, fmt.Errorf("metadata: %q after the sealed members", key)
			}
			continue
		}
		if cut < 0 {
			// The separator (a comma, or the first member) is where the
			// event's own members end.
			cut = off
			for cut < len(meta) && (meta[cut] == ' ' || meta[cut] == '\t' || meta[cut] == '\r' || meta[cut] == '\n') {
				cut++
			}
		}
	}
	if !ok || shadow == nil {
		return nil, sealedPart{}, nil, false, errors.New("metadata: a sealed event without its key or shadow")
	}
	own = make([]byte, 0, cut+1)
	own = append(own, meta[:cut]...)
	return append(own, '}'), sp, shadow, true, nil
}

// ReadRecords implements events.RecordStore: hermes' events of $all after
// after, as they were written: a sealed event's data opened (seal.go), or,
// when an erasure destroyed its key, its shadow, with the erasure's id in
// its metadata (what the embedded store's rewrite in place leaves); the
// metadata without the members this store adds, and the time a copy
// brought (hermes_recorded_at).
func (s *Store) ReadRecords(ctx context.Context, after uint64, count int) ([]events.Record, error) {
	if count <= 0 {
		return nil, nil
	}
	var out []events.Record
	from := after
	for len(out) < count {
		var page []events.Record
		var sent int
		start := esdb.AllPosition(esdb.Position{Commit: from, Prepare: from})
		if from == 0 {
			start = esdb.Start{}
		}
		lastSeen := from
		err := s.do(ctx, func(c *esdb.Client) error {
			page, lastSeen, sent = page[:0], from, 0
			kr := s.newKeyring(ctx)
			rs, err := c.ReadAll(ctx, esdb.ReadAllOptions{From: start}, allPage)
			if err != nil {
				return err
			}
			defer rs.Close()
			for {
				ev, err := rs.Recv()
				if err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
				sent++
				r := ev.OriginalEvent()
				if r == nil {
					continue
				}
				lastSeen = max(lastSeen, r.Position.Commit)
				if r.Position.Commit <= from {
					continue
				}
				name, ok := s.hermesName(r.StreamID)
				if !ok {
					continue
				}
				rec, err := kr.record(name, r)
				if err != nil {
					return err
				}
				page = append(page, rec)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("read records after %d: %w", after, err)
		}
		for _, r := range page {
			if len(out) < count {
				out = append(out, r)
			}
		}
		if sent < allPage || lastSeen == from {
			return out, nil
		}
		from = lastSeen
	}
	return out, nil
}

// record is a recorded event of stream (its hermes name) as a record,
// opened with kr when it is sealed.
func (kr *keyring) record(stream string, r *esdb.RecordedEvent) (events.Record, error) {
	meta, at, ok := splitRecordedAt(r.UserMetadata)
	if !ok {
		at = r.CreatedDate
	}
	data := r.Data
	own, sp, shadow, sealed, err := splitSealed(meta)
	if err != nil {
		return events.Record{}, fmt.Errorf("event %s@%d: %w", r.StreamID, r.EventNumber, err)
	}
	if sealed {
		var erasedBy string
		data, erasedBy, err = kr.openData(r.StreamID, r, &sp, shadow, stream)
		if err != nil {
			return events.Record{}, err
		}
		meta = own
		if erasedBy != "" {
			// As the embedded store rewrites an erased event's metadata.
			var md events.Metadata
			if err := json.Unmarshal(own, &md); err != nil {
				return events.Record{}, fmt.Errorf("event %s@%d metadata: %w", r.StreamID, r.EventNumber, err)
			}
			md.Redacted = erasedBy
			if meta, err = json.Marshal(md); err != nil {
				return events.Record{}, fmt.Errorf("event %s@%d metadata: %w", r.StreamID, r.EventNumber, err)
			}
		}
	}
	return events.Record{
		Position:   r.Position.Commit,
		Stream:     stream,
		Version:    r.EventNumber + 1,
		ID:         r.EventID.String(),
		Type:       r.EventType,
		Data:       bytes.Clone(data),
		Metadata:   bytes.Clone(meta),
		RecordedAt: at,
	}, nil
}

// WriteRecords implements events.RecordStore: each run of records of one
// stream is one append, with the exact expected revision its first
// record's version says. A record whose event holds personal content is
// sealed as Append seals it, and an erasure among the records destroys
// the keys of what it erases (seal.go), so a copy onto KurrentDB is
// erasable as the events appended to it; a record's metadata is kept byte
// for byte (the sealed members and the source's time follow it).
func (s *Store) WriteRecords(ctx context.Context, records []events.Record) error {
	for start := 0; start < len(records); {
		end := start + 1
		for end < len(records) && records[end].Stream == records[start].Stream && records[end].Version == records[end-1].Version+1 {
			end++
		}
		if err := s.writeRun(ctx, records[start:end]); err != nil {
			return err
		}
		start = end
	}
	return nil
}

func (s *Store) writeRun(ctx context.Context, run []events.Record) error {
	first := run[0]
	if first.Stream == "" || first.Stream[0] == '$' || first.Version == 0 {
		return fmt.Errorf("write record %q@%d: %w", first.Stream, first.Version, events.ErrInvalidAppend)
	}
	data := make([]esdb.EventData, len(run))
	proposed := make([]events.Proposed, len(run))
	for i, r := range run {
		id, err := uuid.Parse(r.ID)
		if err != nil || id == uuid.Nil {
			return fmt.Errorf("write record %s@%d: %w: event id %q is not a UUID", r.Stream, r.Version, events.ErrInvalidAppend, r.ID)
		}
		// Decoded only to learn what it holds: the bytes are written.
		e, err := events.Decode(r.Type, r.Data)
		if err != nil {
			// It may hold personal content this build cannot find.
			return fmt.Errorf("write record %s@%d: %w: %v", r.Stream, r.Version, events.ErrInvalidAppend, err)
		}
		var md events.Metadata
		if err := json.Unmarshal(r.Metadata, &md); err != nil {
			return fmt.Errorf("write record %s@%d: %w: metadata: %v", r.Stream, r.Version, events.ErrInvalidAppend, err)
		}
		proposed[i] = events.Proposed{ID: r.ID, Event: e, Metadata: md}
		data[i] = esdb.EventData{EventID: id, EventType: r.Type, ContentType: esdb.ContentTypeJson, Data: r.Data, Metadata: r.Metadata}
	}
	expected := events.ExactVersion(first.Version - 1)
	if plan := planSeal(proposed); plan.needed() {
		// seal's rule: read the tail first, write at the exact revision.
		// A wrong version is found before any key is destroyed.
		tail, err := s.recent(ctx, first.Stream, duplicateWindow)
		var current uint64
		switch {
		case errors.Is(err, events.ErrStreamNotFound):
		case err != nil:
			return fmt.Errorf("write record %s@%d: %w", first.Stream, first.Version, err)
		default:
			current = tail[0].version
		}
		if current != first.Version-1 {
			return fmt.Errorf("write record %s@%d: %w", first.Stream, first.Version,
				&events.WrongVersionError{Stream: first.Stream, Expected: expected, Actual: current})
		}
		data, err = s.seal(ctx, first.Stream, proposed, data, plan, current, tail, func(i int, md storedMetadata) ([]byte, error) {
			if md.Sealed == nil {
				// Erased by an erasure among the records: as the
				// embedded store rewrites it.
				return json.Marshal(md.Metadata)
			}
			sp, err := json.Marshal(md.Sealed)
			if err != nil {
				return nil, err
			}
			return withMembers(run[i].Metadata, `"hermes_sealed":`+string(sp), `"hermes_shadow":`+string(md.Shadow))
		})
		if err != nil {
			return fmt.Errorf("write record %s@%d: %w", first.Stream, first.Version, err)
		}
	}
	for i, r := range run {
		meta, err := withRecordedAt(data[i].Metadata, r.RecordedAt)
		if err != nil {
			return fmt.Errorf("write record %s@%d: %w", r.Stream, r.Version, err)
		}
		data[i].Metadata = meta
	}
	opts := esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}
	if first.Version > 1 {
		opts.ExpectedRevision = esdb.Revision(first.Version - 2)
	}
	err := s.do(ctx, func(c *esdb.Client) error {
		_, err := c.AppendToStream(ctx, s.serverName(first.Stream), opts, data...)
		return err
	})
	var e *esdb.Error
	switch {
	case errors.As(err, &e) && e.Code() == esdb.ErrorCodeWrongExpectedVersion:
		actual, _ := actualRevision(e)
		return fmt.Errorf("write record %s@%d: %w", first.Stream, first.Version,
			&events.WrongVersionError{Stream: first.Stream, Expected: expected, Actual: actual})
	case err != nil:
		return fmt.Errorf("write record %s@%d: %w", first.Stream, first.Version, err)
	}
	return nil
}
