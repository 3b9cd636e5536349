package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"hermes/domain"
	"hermes/events"
)

// commandImport is the command name written in the metadata of imported
// events.
const commandImport = "import"

// ImportOutcome says what an import command did with one lane or session.
type ImportOutcome int

const (
	// Imported: the events were appended (all of them, or the rest of
	// them after an interrupted run).
	Imported ImportOutcome = iota
	// AlreadyImported: an earlier run appended them all; nothing was.
	AlreadyImported
	// ExistsNatively: the stream holds events hermes wrote itself (the
	// lane or session was created in hermes); nothing was appended.
	ExistsNatively
	// Diverged: an earlier run imported part of the transcript and the
	// stream moved on without it; nothing was appended.
	Diverged
)

func (o ImportOutcome) String() string {
	switch o {
	case Imported:
		return "imported"
	case AlreadyImported:
		return "already imported"
	case ExistsNatively:
		return "exists in hermes"
	case Diverged:
		return "changed in hermes since a partial import"
	}
	return "unknown"
}

// ImportLane moves one Hermes routing entry into the log.
type ImportLane struct {
	// Lane is the entry as read from sessions.json.
	Lane events.LaneImported
}

// ImportLane appends lane.imported.v1 as the first event of the lane's
// stream, with an id derived from the session key: a second run finds it
// and appends nothing. A lane that already has a history in hermes is
// left as it is (ExistsNatively).
func (h *Handler) ImportLane(ctx context.Context, c ImportLane) (ImportOutcome, uint64, error) {
	key := c.Lane.SessionKey
	if err := checkImportKey(key); err != nil {
		return 0, 0, fmt.Errorf("import lane %q: %w", key, err)
	}
	if err := domain.ValidateSessionID(c.Lane.SessionID); err != nil {
		return 0, 0, fmt.Errorf("import lane %s: %w", key, err)
	}
	stream := events.LaneStream(key)
	unlock := h.locks.lock(key)
	defer unlock()
	defer h.cache.drop(stream)
	res, err := h.store.Append(ctx, stream, events.NoStream(), []events.Proposed{importProposal(stream, "lane", c.Lane)})
	switch {
	case errors.Is(err, events.ErrWrongExpectedVersion):
		return ExistsNatively, 0, nil
	case err != nil:
		return 0, 0, fmt.Errorf("import lane %s: %w", key, err)
	case res.Duplicate:
		return AlreadyImported, res.LastPosition(), nil
	}
	return Imported, res.LastPosition(), nil
}

// checkImportKey accepts a session key an event can carry: not empty,
// valid UTF-8, no NUL.
func checkImportKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty session key", domain.ErrInvalidArgument)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: session key is not valid UTF-8", domain.ErrInvalidArgument)
	case strings.ContainsRune(key, 0):
		return fmt.Errorf("%w: session key has a NUL byte", domain.ErrInvalidArgument)
	}
	return nil
}

// ImportTranscript moves one Hermes session and its messages into the log.
type ImportTranscript struct {
	// Session is the sessions row as read from state.db.
	Session events.SessionImported
	// Messages yields the session's rows in id order.
	Messages iter.Seq2[events.ImportedMessage, error]
	// MaxEventBytes bounds one event's JSON (the store's limit, less room
	// for metadata). Messages are grouped into events up to a quarter of
	// it; a single message too large for it is skipped (see Oversized).
	MaxEventBytes int
	// Progress, when set, is told how many messages each step covered
	// (appended now, or found appended by an earlier run).
	Progress func(messages int)
}

// TranscriptImport is what ImportTranscript did.
type TranscriptImport struct {
	Outcome ImportOutcome
	// Appended counts the messages appended by this run.
	Appended int
	// Oversized are the ids of messages too large for one event.
	Oversized []int64
	// Position is the global position of the last event appended.
	Position uint64
}

// maxImportBatch bounds the messages of one transcript.messages_imported.
const maxImportBatch = 500

// ImportTranscript appends transcript.session_imported.v1 and then the
// messages in transcript.messages_imported.v1 events of consecutive rows,
// to the session's transcript stream, one append per event. Every event id
// is derived from the session id and the first message id it carries, and
// the grouping depends only on the rows, so a run interrupted half way is
// completed by the next one (which recognises the last event appended),
// and a run after a complete one appends nothing.
func (h *Handler) ImportTranscript(ctx context.Context, c ImportTranscript) (TranscriptImport, error) {
	id := c.Session.SessionID
	if err := domain.ValidateSessionID(id); err != nil {
		return TranscriptImport{}, fmt.Errorf("import session %q: %w", id, err)
	}
	if c.MaxEventBytes <= 0 {
		c.MaxEventBytes = 1 << 20
	}
	stream := events.TranscriptStream(id)
	first := importProposal(stream, "session", c.Session)

	var version uint64
	var resumeAfter string // id of the last event stored, when the stream exists
	last, err := h.store.ReadStream(ctx, stream, 0, 1, events.Backwards)
	switch {
	case isNotFound(err):
	case err != nil:
		return TranscriptImport{}, fmt.Errorf("import session %s: %w", id, err)
	default:
		head, err := h.store.ReadStream(ctx, stream, 1, 1, events.Forwards)
		if err != nil {
			return TranscriptImport{}, fmt.Errorf("import session %s: %w", id, err)
		}
		if head[0].ID != first.ID {
			return TranscriptImport{Outcome: ExistsNatively}, nil
		}
		version, resumeAfter = last[0].Version, last[0].ID
	}

	out := TranscriptImport{Outcome: AlreadyImported}
	resumed := resumeAfter == ""
	appendOne := func(p events.Proposed, messages int) error {
		if !resumed {
			if p.ID == resumeAfter {
				resumed = true
			}
			if c.Progress != nil {
				c.Progress(messages)
			}
			return nil
		}
		res, err := h.store.Append(ctx, stream, events.ExactVersion(version), []events.Proposed{p})
		if err != nil {
			return fmt.Errorf("import session %s: %w", id, err)
		}
		if !res.Duplicate {
			out.Outcome = Imported
			out.Appended += messages
		}
		version, out.Position = res.LastVersion(), res.LastPosition()
		if c.Progress != nil {
			c.Progress(messages)
		}
		return nil
	}
	if err := appendOne(first, 0); err != nil {
		return TranscriptImport{}, err
	}

	budget := c.MaxEventBytes / 4
	var batch []events.ImportedMessage
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		e := events.MessagesImported{SessionID: id, Messages: batch, At: events.EpochTime(batch[len(batch)-1].Timestamp)}
		p := importProposal(stream, "messages:"+strconv.FormatInt(batch[0].ID, 10), e)
		n := len(batch)
		batch, size = nil, 0
		return appendOne(p, n)
	}
	if c.Messages != nil {
		for m, err := range c.Messages {
			if err != nil {
				return TranscriptImport{}, fmt.Errorf("import session %s: %w", id, err)
			}
			data, err := json.Marshal(m)
			if err != nil {
				return TranscriptImport{}, fmt.Errorf("import session %s: message %d: %w", id, m.ID, err)
			}
			if len(data) > c.MaxEventBytes-1024 {
				out.Oversized = append(out.Oversized, m.ID)
				continue
			}
			if len(batch) > 0 && (size+len(data) > budget || len(batch) >= maxImportBatch) {
				if err := flush(); err != nil {
					return TranscriptImport{}, err
				}
			}
			batch = append(batch, m)
			size += len(data)
		}
	}
	if err := flush(); err != nil {
		return TranscriptImport{}, err
	}
	if !resumed {
		// The stream's last event is not one this import would write: it
		// moved on (in hermes) after a partial import of a changed source.
		return TranscriptImport{Outcome: Diverged}, nil
	}
	return out, nil
}

// importNamespace scopes the ids of imported events.
var importNamespace = uuid.MustParse("3b9e6a52-1f0c-4d7e-8a61-0c2f9d4e7b15")

// importProposal derives the event id from the stream and the source fact
// (part), so every run proposes the same id for the same fact.
func importProposal(stream, part string, e events.Event) events.Proposed {
	return events.Proposed{
		ID:    uuid.NewSHA1(importNamespace, []byte(stream+"\x00"+part)).String(),
		Event: e,
		Metadata: events.Metadata{
			SchemaVersion: events.SchemaVersionOf(e.EventType()),
			Command:       commandImport,
			CommandID:     "import:" + stream,
		},
	}
}
