package kurrentdb_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"hermes/adapters/eventstore/kurrentdb"
	"hermes/events"
	emulator "hermes/testfixtures/kurrentdb"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func proposal(e events.Event) events.Proposed {
	return events.Proposed{ID: uuid.NewString(), Event: e, Metadata: events.Metadata{SchemaVersion: events.SchemaVersionOf(e.EventType()), Command: "test"}}
}

func said(sid, text string) events.Event {
	content, _ := json.Marshal(text)
	return events.MessageAppended{SessionID: sid, Message: events.Message{Role: "user", Content: content}, At: t0}
}

// keyOf reads the newest key of (stream, class) straight from the server,
// base64 as stored: a test looks for it in the server's storage.
func keyOf(t *testing.T, srv *emulator.Server, stream, class string) string {
	t.Helper()
	cfg, err := kurrentdb.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = func(esdb.LogLevel, string, ...any) {}
	c, err := esdb.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rs, err := c.ReadStream(t.Context(), "hermeskeys-"+class+"@"+stream, esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ev, err := rs.Recv()
	if err != nil {
		t.Fatalf("read the key of %s %s: %v", stream, class, err)
	}
	var rec struct{ Key []byte }
	if err := json.Unmarshal(ev.OriginalEvent().Data, &rec); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(rec.Key)
}

// readEverything is every way a node reads a stream's events: the stream
// forwards and backwards, $all from the start, and a subscription from the
// start, as text.
func readEverything(t *testing.T, s events.Store, stream string) map[string]string {
	t.Helper()
	ctx := t.Context()
	out := map[string]string{}
	text := func(envs []events.Envelope) string {
		var b strings.Builder
		for _, e := range envs {
			if e.Stream != stream {
				continue
			}
			j, _ := json.Marshal(e.Event)
			b.Write(j)
			b.WriteString(" redacted=" + e.Metadata.Redacted + "\n")
		}
		return b.String()
	}
	fwd, err := s.ReadStream(ctx, stream, 1, 100, events.Forwards)
	if err != nil {
		t.Fatal(err)
	}
	out["stream"] = text(fwd)
	back, err := s.ReadStream(ctx, stream, 0, 100, events.Backwards)
	if err != nil {
		t.Fatal(err)
	}
	out["stream backwards"] = text(back)
	all, err := s.ReadAll(ctx, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	out["$all"] = text(all)
	head, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := s.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []events.Envelope
	limit := time.After(30 * time.Second)
	for len(got) == 0 || got[len(got)-1].Position < head {
		select {
		case e, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription ended: %v", sub.Err())
			}
			got = append(got, e)
		case <-limit:
			t.Fatal("subscription did not reach the head")
		}
	}
	out["subscription"] = text(got)
	return out
}

// TestCryptoShreddingOnEmulator writes a transcript through one node,
// clears it through another, then deletes it, and checks after each that
// every read by every node (stream, $all, subscription, from the start;
// a node that read the keys before included) shows what the embedded
// store's rewrite would show, that the server's storage never held the
// words, and that after Purge (a scavenge) it no longer holds the keys
// the erasure destroyed; a control before each erasure finds them.
func TestCryptoShreddingOnEmulator(t *testing.T) {
	srv := startEmulator(t)
	a, b := open(t, srv.URL()), open(t, srv.URL())
	ctx := t.Context()
	const sid = "s1"
	st := events.TranscriptStream(sid)
	said1, title := "said-"+uuid.NewString()[:8], "title-"+uuid.NewString()[:8]
	if _, err := a.Append(ctx, st, events.NoStream(), []events.Proposed{proposal(events.TitleSet{SessionID: sid, Title: title, At: t0})}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		// At any version: the adapter seals at an exact one.
		if _, err := a.Append(ctx, st, events.AnyVersion(), []events.Proposed{proposal(said(sid, said1))}); err != nil {
			t.Fatal(err)
		}
	}
	if bytes.Contains(srv.Storage(), []byte(said1)) || bytes.Contains(srv.Storage(), []byte(title)) {
		t.Fatal("the server's storage holds the words in plaintext")
	}
	for name, got := range readEverything(t, b, st) {
		if strings.Count(got, said1) != 2 || !strings.Contains(got, title) {
			t.Fatalf("control, node b's %s read = %s; want both messages and the title", name, got)
		}
	}
	oldMessagesKey, sessionKey := keyOf(t, srv, st, events.ClassMessages), keyOf(t, srv, st, events.ClassSession)
	if !bytes.Contains(srv.Storage(), []byte(oldMessagesKey)) {
		t.Fatal("control: the messages key is not in the server's storage (the search could not fail)")
	}

	// Node b clears; node a, which remembers the old key, writes again.
	clearing := []events.Proposed{proposal(events.TranscriptCleared{SessionID: sid, At: t0}),
		proposal(events.TranscriptErased{SessionID: sid, Scope: events.EraseMessages, Reason: events.ErasureOnRequest, At: t0})}
	if _, err := b.Append(ctx, st, events.ExactVersion(3), clearing); err != nil {
		t.Fatal(err)
	}
	said2 := "after-" + uuid.NewString()[:8]
	if _, err := a.Append(ctx, st, events.AnyVersion(), []events.Proposed{proposal(said(sid, said2))}); err != nil {
		t.Fatal(err)
	}
	c := open(t, srv.URL())
	for node, s := range map[string]events.Store{"a": a, "b": b, "fresh": c} {
		for name, got := range readEverything(t, s, st) {
			if strings.Contains(got, said1) || strings.Count(got, "redacted="+clearing[1].ID) != 2 {
				t.Errorf("after the clear, node %s's %s read = %s; want the two messages erased by %s", node, name, got, clearing[1].ID)
			}
			if !strings.Contains(got, title) || !strings.Contains(got, said2) {
				t.Errorf("after the clear, node %s's %s read = %s; want the title and the later message", node, name, got)
			}
		}
	}
	if err := a.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	storage := srv.Storage()
	if bytes.Contains(storage, []byte(oldMessagesKey)) {
		t.Error("after the clear and a scavenge, the server's storage still holds the destroyed messages key")
	}
	if !bytes.Contains(storage, []byte(sessionKey)) || !bytes.Contains(storage, []byte(keyOf(t, srv, st, events.ClassMessages))) {
		t.Error("after the clear and a scavenge, the session key or the new messages key is gone from the storage")
	}

	deleting := []events.Proposed{proposal(events.TranscriptDeleted{SessionID: sid, Reason: events.ErasureOnRequest, At: t0}),
		proposal(events.TranscriptErased{SessionID: sid, Scope: events.EraseTranscript, Reason: events.ErasureOnRequest, At: t0})}
	if _, err := a.Append(ctx, st, events.ExactVersion(6), deleting); err != nil {
		t.Fatal(err)
	}
	for node, s := range map[string]events.Store{"a": a, "b": b, "fresh": open(t, srv.URL())} {
		for name, got := range readEverything(t, s, st) {
			if strings.Contains(got, title) || strings.Contains(got, said2) {
				t.Errorf("after the delete, node %s's %s read = %s; want no title and no message", node, name, got)
			}
		}
	}
	if err := b.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(srv.Storage(), []byte(sessionKey)) {
		t.Error("after the delete and a scavenge, the server's storage still holds the session key")
	}
}

// TestPurgeWaitsForTheScavenge: Purge returns after the emulator recorded
// a completed scavenge; it scavenges again only after an erasure, and not
// at all on a store told that the last process purged (MarkPurged); it
// fails when the server does not answer.
func TestPurgeWaitsForTheScavenge(t *testing.T) {
	srv := startEmulator(t)
	s := open(t, srv.URL())
	scavenges := func() int { return strings.Count(string(srv.Storage()), "$scavengeCompleted") }
	for range 2 {
		if err := s.Purge(t.Context()); err != nil {
			t.Fatalf("Purge() error = %v", err)
		}
	}
	if n := scavenges(); n != 1 {
		t.Errorf("after two Purges with no erasure the storage records %d completed scavenges, want 1", n)
	}
	st := events.TranscriptStream("p")
	erasure := []events.Proposed{proposal(events.TranscriptErased{SessionID: "p", Scope: events.EraseMessages, Reason: events.ErasureOnRequest, At: t0})}
	if _, err := s.Append(t.Context(), st, events.AnyVersion(), erasure); err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(t.Context()); err != nil {
		t.Fatalf("Purge() error = %v", err)
	}
	if n := scavenges(); n != 2 {
		t.Errorf("after an erasure and a Purge the storage records %d completed scavenges, want 2", n)
	}
	marked := open(t, srv.URL())
	marked.MarkPurged()
	if err := marked.Purge(t.Context()); err != nil || scavenges() != 2 {
		t.Errorf("Purge() after MarkPurged = %v with %d scavenges, want nil and no new scavenge", err, scavenges())
	}
	fresh := open(t, srv.URL())
	srv.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := fresh.Purge(ctx); err == nil {
		t.Error("Purge() on a stopped server error = nil, want an error")
	}
}

// TestPlaintextFromBeforeSealingIsReported: an event with personal content
// written without a seal (as the store wrote before crypto-shredding)
// still reads, and is counted and logged once; sealed events are not.
func TestPlaintextFromBeforeSealingIsReported(t *testing.T) {
	srv := startEmulator(t)
	var logs strings.Builder
	s := open(t, srv.URL(), kurrentdb.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	st := events.TranscriptStream("old")
	if _, err := s.Append(t.Context(), st, events.NoStream(), []events.Proposed{proposal(said("old", "sealed"))}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadStream(t.Context(), st, 1, 10, events.Forwards); err != nil || s.PlaintextEvents() != 0 {
		t.Fatalf("after a sealed read, PlaintextEvents() = %d (%v), want 0", s.PlaintextEvents(), err)
	}
	cfg, err := kurrentdb.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = func(esdb.LogLevel, string, ...any) {}
	c, err := esdb.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	old := said("old", "written in plaintext")
	data, _ := events.Encode(old)
	for range 2 {
		if _, err := c.AppendToStream(t.Context(), st, esdb.AppendToStreamOptions{}, esdb.EventData{
			EventID: uuid.New(), EventType: old.EventType(), ContentType: esdb.ContentTypeJson, Data: data, Metadata: []byte(`{"schema_version":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	envs, err := s.ReadStream(t.Context(), st, 1, 10, events.Forwards)
	if err != nil || len(envs) != 3 {
		t.Fatalf("ReadStream = %d events, %v; want 3", len(envs), err)
	}
	if n := s.PlaintextEvents(); n != 2 {
		t.Errorf("PlaintextEvents() = %d, want 2", n)
	}
	if n := strings.Count(logs.String(), "written before crypto-shredding"); n != 1 {
		t.Errorf("the warning was logged %d times, want once:\n%s", n, logs.String())
	}
}

// TestPurgeScavengesEveryNode: with gossip seeds, Purge starts a scavenge
// on each node the connection string names, one after the other.
func TestPurgeScavengesEveryNode(t *testing.T) {
	srv := startEmulator(t, emulator.WithFollowers("127.0.0.1:0", "127.0.0.1:0"))
	addrs := srv.Addrs()
	s := open(t, "esdb://"+strings.Join(addrs, ",")+"?tls=false&maxDiscoverAttempts=3")
	if err := s.Purge(t.Context()); err != nil {
		t.Fatalf("Purge() error = %v", err)
	}
	if n := strings.Count(string(srv.Storage()), "$scavengeCompleted"); n != len(addrs) {
		t.Errorf("after Purge on %d nodes the storage records %d completed scavenges, want %d", len(addrs), n, len(addrs))
	}
}

// TestPurgeOverTLSWithCredentials: the scavenge call uses the connection
// string's TLS settings (its CA file) and credentials, which the emulator
// checks on every call.
func TestPurgeOverTLSWithCredentials(t *testing.T) {
	cert, caFile := selfSigned(t, t.TempDir())
	srv := startEmulator(t, emulator.WithTLS(cert, "admin", "changeit"))
	s := open(t, "esdb://admin:changeit@"+srv.Addr()+"?tlsCAFile="+caFile)
	if err := s.Purge(t.Context()); err != nil {
		t.Fatalf("Purge() over TLS error = %v", err)
	}
	if n := strings.Count(string(srv.Storage()), "$scavengeCompleted"); n != 1 {
		t.Errorf("the storage records %d completed scavenges, want 1", n)
	}
}
