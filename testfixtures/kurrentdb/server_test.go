package kurrentdb_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"hermes/testfixtures/kurrentdb"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
)

// client connects the real v4.2.0 client to a fresh emulator.
func client(t *testing.T, opts ...kurrentdb.Option) (*kurrentdb.Server, *esdb.Client) {
	t.Helper()
	srv, err := kurrentdb.Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	cfg, err := esdb.ParseConnectionString(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = esdb.NoopLogging()
	c, err := esdb.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return srv, c
}

func ev(id uuid.UUID, typ string) esdb.EventData {
	return esdb.EventData{EventID: id, EventType: typ, ContentType: esdb.ContentTypeJson, Data: []byte(`{}`)}
}

func code(err error) esdb.ErrorCode {
	var e *esdb.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return -1
}

func TestExpectedRevisionAndIdempotency(t *testing.T) {
	_, c := client(t)
	ctx := t.Context()
	a, b, x := uuid.New(), uuid.New(), uuid.New()
	wr, err := c.AppendToStream(ctx, "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, ev(a, "A"), ev(b, "B"))
	if err != nil || wr.NextExpectedVersion != 1 || wr.CommitPosition == 0 {
		t.Fatalf("first append = %+v, %v; want revision 1 and a position", wr, err)
	}
	for _, tc := range []struct {
		name     string
		expected esdb.ExpectedRevision
		events   []esdb.EventData
		wantErr  esdb.ErrorCode
		wantMsg  string
		wantNoPo bool
	}{
		{"retry at the original revision", esdb.NoStream{}, []esdb.EventData{ev(a, "A"), ev(b, "B")}, -1, "", true},
		{"retry of the first event only", esdb.NoStream{}, []esdb.EventData{ev(a, "A")}, -1, "", true},
		{"retry with any", esdb.Any{}, []esdb.EventData{ev(a, "A"), ev(b, "B")}, -1, "", true},
		{"partial match", esdb.NoStream{}, []esdb.EventData{ev(a, "A"), ev(x, "X")}, esdb.ErrorCodeWrongExpectedVersion, "expecting 'no_stream' but got '1'", false},
		{"revision ahead", esdb.Revision(5), []esdb.EventData{ev(x, "X")}, esdb.ErrorCodeWrongExpectedVersion, "expecting '5' but got '1'", false},
		{"stream exists on a missing stream", esdb.StreamExists{}, nil, esdb.ErrorCodeWrongExpectedVersion, "but got 'no_stream'", false},
	} {
		stream := "s"
		evs := tc.events
		if evs == nil {
			stream, evs = "missing", []esdb.EventData{ev(x, "X")}
		}
		wr, err := c.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: tc.expected}, evs...)
		if tc.wantErr >= 0 {
			if code(err) != tc.wantErr || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("%s: error = %v, want code %d with %q", tc.name, err, tc.wantErr, tc.wantMsg)
			}
			continue
		}
		if err != nil || (wr.CommitPosition == 0) != tc.wantNoPo {
			t.Errorf("%s: = %+v, %v; want success, no position %v", tc.name, wr, err, tc.wantNoPo)
		}
	}
}

func TestReadsAndSystemEvents(t *testing.T) {
	_, c := client(t)
	ctx := t.Context()
	rs, err := c.ReadStream(ctx, "nothing", esdb.ReadStreamOptions{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Recv(); code(err) != esdb.ErrorCodeResourceNotFound {
		t.Errorf("Recv() on a missing stream error = %v, want ResourceNotFound", err)
	}
	for range 20 {
		if _, err := c.AppendToStream(ctx, "lane-1", esdb.AppendToStreamOptions{}, ev(uuid.New(), "T")); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.ReadAll(ctx, esdb.ReadAllOptions{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var system, user int
	var last uint64
	for {
		e, err := all.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		r := e.OriginalEvent()
		if r.Position.Commit <= last || r.Position.Commit == last+1 {
			t.Errorf("position %d after %d: want increasing with gaps", r.Position.Commit, last)
		}
		last = r.Position.Commit
		if strings.HasPrefix(r.StreamID, "$") {
			system++
		} else {
			user++
		}
	}
	if system < 4 || user != 20 {
		t.Errorf("$all holds %d system and %d user events, want at least 4 and 20", system, user)
	}
}

func TestFilteredSubscription(t *testing.T) {
	_, c := client(t, kurrentdb.WithSystemEventEvery(1))
	ctx := t.Context()
	for range 40 {
		if _, err := c.AppendToStream(ctx, "lane-1", esdb.AppendToStreamOptions{}, ev(uuid.New(), "T")); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := c.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{
		From:   esdb.Start{},
		Filter: &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"lane-"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var events, checkpoints int
	for events < 40 || checkpoints == 0 {
		e := sub.Recv()
		switch {
		case e.EventAppeared != nil:
			if s := e.EventAppeared.OriginalEvent().StreamID; s != "lane-1" {
				t.Fatalf("filtered subscription delivered an event of %s", s)
			}
			events++
		case e.CheckPointReached != nil:
			checkpoints++
		case e.CaughtUp != nil:
			if events != 40 {
				t.Fatalf("caught up after %d events, want 40", events)
			}
		case e.SubscriptionDropped != nil:
			t.Fatalf("dropped: %v", e.SubscriptionDropped.Error)
		}
	}
}

func TestMaxAppendSize(t *testing.T) {
	_, c := client(t, kurrentdb.WithMaxAppendSize(1000))
	big := esdb.EventData{EventID: uuid.New(), EventType: "T", Data: make([]byte, 2000)}
	_, err := c.AppendToStream(t.Context(), "s", esdb.AppendToStreamOptions{}, big)
	if err == nil || !strings.Contains(err.Error(), "Maximum Append Size of 1000 Exceeded") {
		t.Errorf("append over the limit error = %v, want Maximum Append Size exceeded", err)
	}
}
