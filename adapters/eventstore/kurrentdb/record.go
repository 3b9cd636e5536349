package kurrentdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	trimmed := bytes.TrimRight(meta, " \t\r\n")
	if len(trimmed) < 2 || trimmed[0] != '{' || trimmed[len(trimmed)-1] != '}' {
		return nil, fmt.Errorf("%w: metadata is not a JSON object", events.ErrInvalidAppend)
	}
	body := bytes.TrimSpace(trimmed[1 : len(trimmed)-1])
	var b bytes.Buffer
	b.Write(trimmed[:len(trimmed)-1])
	if len(body) > 0 {
		b.WriteByte(',')
	}
	b.WriteString(recordedAtKey)
	b.WriteString(strconv.FormatInt(at.UnixNano(), 10))
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

// ReadRecords implements events.RecordStore: hermes' events of $all after
// after, with their data and metadata as written.
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
			rs, err := c.ReadAll(ctx, esdb.ReadAllOptions{From: start}, allPage)
			if err != nil {
				return err
			}
			defer rs.Close()
			for {
				ev, err := rs.Recv()
				if err != nil {
					if isEOF(err) {
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
				page = append(page, record(name, r))
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

// record is a recorded event of stream (its hermes name) as a record.
func record(stream string, r *esdb.RecordedEvent) events.Record {
	meta, at, ok := splitRecordedAt(r.UserMetadata)
	if !ok {
		at = r.CreatedDate
	}
	return events.Record{
		Position:   r.Position.Commit,
		Stream:     stream,
		Version:    r.EventNumber + 1,
		ID:         r.EventID.String(),
		Type:       r.EventType,
		Data:       bytes.Clone(r.Data),
		Metadata:   bytes.Clone(meta),
		RecordedAt: at,
	}
}

// WriteRecords implements events.RecordStore: each run of records of one
// stream is one append, with the expected revision its first record's
// version says. KurrentDB erases by deleting streams (docs/ERASURE.md), so
// an erasure among the records rewrites nothing: the records of a copy
// already hold what the source's erasures left.
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
	for i, r := range run {
		id, err := uuid.Parse(r.ID)
		if err != nil || id == uuid.Nil {
			return fmt.Errorf("write record %s@%d: %w: event id %q is not a UUID", r.Stream, r.Version, events.ErrInvalidAppend, r.ID)
		}
		meta, err := withRecordedAt(r.Metadata, r.RecordedAt)
		if err != nil {
			return fmt.Errorf("write record %s@%d: %w", r.Stream, r.Version, err)
		}
		data[i] = esdb.EventData{EventID: id, EventType: r.Type, ContentType: esdb.ContentTypeJson, Data: r.Data, Metadata: meta}
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
			&events.WrongVersionError{Stream: first.Stream, Expected: events.ExactVersion(first.Version - 1), Actual: actual})
	case err != nil:
		return fmt.Errorf("write record %s@%d: %w", first.Stream, first.Version, err)
	}
	return nil
}
