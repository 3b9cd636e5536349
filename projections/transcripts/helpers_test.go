package transcripts

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"hermes/events"
)

// largeCorpora is set by HERMES_TEST_LARGE=1 (make test-large, which runs
// this package without the race detector): the equivalence tests then use
// their full-size corpora. By default they use the smallest corpora that
// still take every path of the code they check (the same statements
// covered: see sized), since the race detector slows the transpiled SQLite
// about forty-fold.
var largeCorpora = os.Getenv("HERMES_TEST_LARGE") == "1"

// sized is small, or large with HERMES_TEST_LARGE=1. A small size is only
// right while the test covers the same statements with it as with the
// large one: compare `go test -run TestX -coverprofile` of both when
// changing either.
func sized(small, large int) int {
	if largeCorpora {
		return large
	}
	return small
}

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// at is t0 plus n seconds: event times in tests are explicit.
func at(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

// history builds envelopes as a store would: one global position sequence and
// one version sequence per stream.
type history struct {
	pos      uint64
	versions map[string]uint64
	all      []events.Envelope
}

func newHistory() *history { return &history{versions: map[string]uint64{}} }

func (l *history) add(stream string, e events.Event) events.Envelope {
	l.pos++
	l.versions[stream]++
	env := events.Envelope{
		Stream:     stream,
		Version:    l.versions[stream],
		Position:   l.pos,
		ID:         stream + "/" + e.EventType(),
		Type:       e.EventType(),
		RecordedAt: e.OccurredAt(),
		Event:      e,
	}
	l.all = append(l.all, env)
	return env
}

// lane appends lane events of a session key.
func (l *history) lane(key string, es ...events.Event) []events.Envelope {
	var out []events.Envelope
	for _, e := range es {
		out = append(out, l.add(events.LaneStream(key), e))
	}
	return out
}

// tr appends transcript events of a session id.
func (l *history) tr(sessionID string, es ...events.Event) []events.Envelope {
	var out []events.Envelope
	for _, e := range es {
		out = append(out, l.add(events.TranscriptStream(sessionID), e))
	}
	return out
}

func openTemp(t testing.TB) *Projection {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "state.db"))
}

func openAt(t testing.TB, path string) *Projection {
	t.Helper()
	p, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%s) error = %v", path, err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close() error = %v", err)
		}
	})
	return p
}

func mustApply(t testing.TB, p *Projection, batch []events.Envelope) {
	t.Helper()
	if err := p.Apply(context.Background(), batch); err != nil {
		t.Fatalf("Apply(%d envelopes) error = %v", len(batch), err)
	}
}

func dumpOf(t testing.TB, r *Reader) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.Dump(context.Background(), &b); err != nil {
		t.Fatalf("Dump() error = %v", err)
	}
	return b.String()
}

func src(platform, userID string) events.Source {
	return events.Source{Platform: platform, ChatID: "c1", ChatType: "dm", UserID: userID}
}

func created(key, id string, when time.Time) events.SessionCreated {
	return events.SessionCreated{SessionKey: key, SessionID: id, Origin: src("telegram", "u1"),
		Platform: "telegram", ChatType: "dm", At: when}
}

// text is a message whose content is a JSON string.
func text(role, s string) events.Message {
	return events.Message{Role: role, Content: jsonString(s)}
}

func appended(id string, m events.Message, when time.Time) events.MessageAppended {
	return events.MessageAppended{SessionID: id, Message: m, At: when}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func ptr[T any](v T) *T { return &v }

// queryRow reads one row of the file through the write connection.
func queryRow(t testing.TB, p *Projection, q string, args []any, dest ...any) {
	t.Helper()
	if err := p.conn.QueryRowContext(context.Background(), q, args...).Scan(dest...); err != nil {
		t.Fatalf("%s %v: %v", q, args, err)
	}
}

func mustSession(t testing.TB, r *Reader, id string) Session {
	t.Helper()
	s, err := r.Session(context.Background(), id)
	if err != nil {
		t.Fatalf("Session(%s) error = %v", id, err)
	}
	return s
}
