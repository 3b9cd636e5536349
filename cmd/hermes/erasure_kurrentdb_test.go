package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"hermes/adapters/eventstore/kurrentdb"
	"hermes/events"
	emulator "hermes/testfixtures/kurrentdb"
	"hermes/testfixtures/ondisk"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

// TestErasureOnKurrentDBEmulator runs three hermes serve nodes on one
// KurrentDB emulator (a test fixture, not a real KurrentDB) and erases with
// each operation — forget a person, delete, clear, prune, retention — each
// fixture written through one node and erased through another. After the
// nodes stop (each stop purges: a scavenge), it reads through the client
// every stream and $all from position 0 and a subscription from 0, every
// node's files and the emulator's whole storage: no erased marker is
// anywhere, and no key the erasures destroyed is left in the storage; a
// control fixture, not erased, is found by every one of those searches
// (its words through the client and in the nodes' files; its keys in the
// storage, which never holds any words in plaintext). A fourth node started
// fresh on the store rebuilds its read models: the control comes back,
// nothing erased does; every node's read models pass projections verify.
func TestErasureOnKurrentDBEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four hermes serve processes")
	}
	srv, err := emulator.Start(emulator.WithMaxAppendSize(8 << 20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	const nodes = 3
	homes := make([]string, nodes)
	servers := make([]*server, nodes)
	env := func(i int) []string {
		return []string{"HERMES_STORE_URL=" + srv.URL(), fmt.Sprintf("HERMES_NODE_ID=n%d", i), "HERMES_RECOVERY_RECENT_SECONDS=0"}
	}
	cfg := "sessions:\n  auto_prune: true\n  retention_days: 1\nexpiry:\n  interval_seconds: 60\n"
	for i := range nodes {
		homes[i] = filepath.Join(t.TempDir(), fmt.Sprintf("node%d", i))
		if err := os.MkdirAll(homes[i], 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(homes[i], "config.yaml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		servers[i] = startServer(t, homes[i], env(i), "--clock=manual")
	}
	fixture := func(on int) *erasureFixture {
		f := &erasureFixture{transcript: ondisk.RandomMarker(t, "tmark"), lane: ondisk.RandomMarker(t, "lmark"), userID: "u-" + ondisk.RandomMarker(t, "")[:8]}
		f.s = servers[on]
		f.fill(t)
		return f
	}
	// seen waits until node s's read models hold f's transcript.
	seen := func(s *server, f *erasureFixture) {
		waitFor(t, func() bool { return s.call("GET", "/v1/transcripts/"+f.sid, nil, nil) == http.StatusOK }, "a node to see another's transcript")
	}
	kinds := []string{"person", "delete", "clear", "prune", "retention"}
	fixtures := map[string]*erasureFixture{}
	destroyed := map[string][]string{} // the keys each erasure must destroy
	for i, kind := range kinds {
		f := fixture(i % nodes)
		fixtures[kind] = f
		classes := map[string][]string{events.TranscriptStream(f.sid): {events.ClassMessages}}
		if kind == "person" {
			classes[events.LaneStream(f.key)] = []string{events.ClassOrigin, events.ClassQueue}
		}
		for stream, cs := range classes {
			for _, c := range cs {
				destroyed[kind] = append(destroyed[kind], keysOf(t, srv, stream, c)...)
			}
		}
		if len(destroyed[kind]) == 0 {
			t.Fatalf("%s: no key sealed the fixture's content", kind)
		}
	}
	by := func(kind string) *server {
		// The erasure goes through the node after the writer's.
		s := servers[(indexOf(kinds, kind)+1)%nodes]
		seen(s, fixtures[kind])
		return s
	}
	var out struct {
		Erased struct{ Lanes, Transcripts int }
	}
	by("person").must("POST", "/v1/erasure", map[string]any{"platform": "telegram", "user_id": fixtures["person"].userID, "reason": "art. 17 request"}, &out)
	if out.Erased.Lanes != 1 || out.Erased.Transcripts != 1 {
		t.Fatalf("POST /v1/erasure erased %+v, want 1 lane and 1 transcript", out.Erased)
	}
	by("delete").must("DELETE", "/v1/transcripts/"+fixtures["delete"].sid, nil, nil)
	by("clear").must("POST", "/v1/transcripts/"+fixtures["clear"].sid+"/clear", nil, nil)
	s := by("prune")
	s.must("POST", "/v1/transcripts/"+fixtures["prune"].sid+"/end", map[string]any{"reason": "user_exit"}, nil)
	var pruned struct{ Deleted int }
	s.must("POST", "/v1/maintenance/prune-sessions", map[string]any{"older_than_days": 0}, &pruned)
	if pruned.Deleted != 1 {
		t.Fatalf("prune-sessions deleted %d, want 1", pruned.Deleted)
	}
	by("retention").must("POST", "/v1/transcripts/"+fixtures["retention"].sid+"/end", map[string]any{"reason": "user_exit"}, nil)
	for _, s := range servers {
		// The expiry watcher runs on the leader, whichever it is.
		s.must("POST", "/v1/clock", map[string]any{"advance": "49h"}, nil)
	}
	deadline := time.Now().Add(90 * time.Second)
	for servers[0].call("GET", "/v1/transcripts/"+fixtures["retention"].sid, nil, nil) != http.StatusNotFound {
		if time.Now().After(deadline) {
			for i, s := range servers {
				t.Logf("node %d:\n%s", i, s.stderr.String())
			}
			t.Fatal("retention did not erase its transcript")
		}
		// The leader may have changed with the clocks (its lease
		// expired): its watcher ticks at its clock's next interval.
		for _, s := range servers {
			s.must("POST", "/v1/clock", map[string]any{"advance": "61s"}, nil)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Every node purges its own files once another node's erasure reached
	// its read models, before any stop.
	for kind, f := range fixtures {
		if kind == "retention" {
			continue // the leader's watcher purges at its next pass
		}
		for i, home := range homes {
			waitFor(t, func() bool { return len(filesHolding(t, home, f.transcript)) == 0 },
				fmt.Sprintf("node %d to purge the %s erasure from its files", i, kind))
		}
	}
	// The control is written after the clocks moved, so that nothing
	// expires or prunes it.
	control := fixture(2)
	controlKeys := append(keysOf(t, srv, events.TranscriptStream(control.sid), events.ClassMessages),
		keysOf(t, srv, events.LaneStream(control.key), events.ClassOrigin)...)
	seen(servers[0], control)
	seen(servers[1], control)

	for i, s := range servers {
		if code := s.stop(syscall.SIGTERM); code != 0 {
			t.Fatalf("node %d exited %d:\n%s", i, code, s.stderr.String())
		}
		if strings.Contains(s.stderr.String(), "cannot erase") {
			t.Errorf("node %d still warns that the store cannot erase", i)
		}
	}

	// What the erasures must have removed, and what the control keeps.
	erasedMarkers := map[string]string{}
	for kind, f := range fixtures {
		erasedMarkers[kind+" transcript"] = f.transcript
	}
	erasedMarkers["person lane"] = fixtures["person"].lane
	clientText := readWholeLog(t, srv.URL())
	storage := srv.Storage()
	for what, m := range erasedMarkers {
		if strings.Contains(clientText, m) {
			t.Errorf("%s marker readable through the client after the erasure", what)
		}
		if bytes.Contains(storage, []byte(m)) {
			t.Errorf("%s marker in the emulator's storage", what)
		}
		for i, home := range homes {
			if files := filesHolding(t, home, m); len(files) > 0 {
				t.Errorf("%s marker in node %d's files %v", what, i, files)
			}
		}
	}
	for kind, keys := range destroyed {
		for _, k := range keys {
			if bytes.Contains(storage, []byte(k)) {
				t.Errorf("%s: a key the erasure destroyed is still in the emulator's storage", kind)
			}
			for i, home := range homes {
				if files := filesHolding(t, home, k); len(files) > 0 {
					t.Errorf("%s: a key in node %d's files %v", kind, i, files)
				}
			}
		}
	}
	// Keys stay out of files and logs, destroyed or not.
	for _, k := range append(controlKeys, destroyed["person"]...) {
		for i, home := range homes {
			if files := filesHolding(t, home, k); len(files) > 0 {
				t.Errorf("a key is in node %d's files %v", i, files)
			}
			if strings.Contains(servers[i].stderr.String(), k) {
				t.Errorf("a key is in node %d's log", i)
			}
		}
	}
	// The control: found by each search that can find anything.
	if !strings.Contains(clientText, control.transcript) || !strings.Contains(clientText, control.lane) {
		t.Error("control: its markers are not readable through the client (the search could not fail)")
	}
	for _, k := range controlKeys {
		if !bytes.Contains(storage, []byte(k)) {
			t.Error("control: its key is not in the emulator's storage (the search could not fail)")
		}
	}
	if bytes.Contains(storage, []byte(control.transcript)) {
		t.Error("control: the server's storage holds a transcript's words in plaintext")
	}
	if files := filesHolding(t, homes[0], control.transcript); len(files) == 0 {
		t.Error("control: node 0's files do not hold its words (the search could not fail)")
	}

	// Each node's read models equal a rebuild from the erased log.
	for i, home := range homes {
		if out, _ := hermes(t, 0, "projections", "verify", "--home", home, "--store", srv.URL()); !strings.HasPrefix(out, "ok:") {
			t.Errorf("projections verify on node %d after the erasures: %s", i, out)
		}
	}

	// A fresh node rebuilds from the log.
	fresh := filepath.Join(t.TempDir(), "fresh")
	f := startServer(t, fresh, env(9))
	var msgs []struct{ Content any }
	var page struct {
		Messages []struct{ Content any } `json:"messages"`
	}
	waitFor(t, func() bool { return f.call("GET", "/v1/transcripts/"+control.sid, nil, nil) == http.StatusOK }, "the fresh node to rebuild")
	f.must("GET", "/v1/transcripts/"+control.sid+"/messages", nil, &page)
	msgs = page.Messages
	if b, _ := json.Marshal(msgs); !strings.Contains(string(b), control.transcript) {
		t.Errorf("fresh node: the control's messages = %s, want its words", b)
	}
	for _, kind := range []string{"person", "delete", "prune", "retention"} {
		if code := f.call("GET", "/v1/transcripts/"+fixtures[kind].sid, nil, nil); code != http.StatusNotFound {
			t.Errorf("fresh node: the %s fixture's transcript = %d, want 404", kind, code)
		}
	}
	if code := f.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("fresh node exited %d:\n%s", code, f.stderr.String())
	}
	for what, m := range erasedMarkers {
		if files := filesHolding(t, fresh, m); len(files) > 0 {
			t.Errorf("fresh node: %s marker in %v after its rebuild", what, files)
		}
	}
	if files := filesHolding(t, fresh, control.transcript); len(files) == 0 {
		t.Error("fresh node: the control's words are in none of its files (the rebuild brought nothing)")
	}
	t.Logf("searched %d bytes read through the client, %d bytes of emulator storage, %d homes", len(clientText), len(storage), nodes+1)
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// keysOf reads every key of (stream, class) on the emulator, base64 as the
// key stream stores them.
func keysOf(t *testing.T, srv *emulator.Server, stream, class string) []string {
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
	rs, err := c.ReadStream(t.Context(), "hermeskeys-"+class+"@"+stream, esdb.ReadStreamOptions{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []string
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read the keys of %s %s: %v", stream, class, err)
		}
		var rec struct{ Key []byte }
		if err := json.Unmarshal(ev.OriginalEvent().Data, &rec); err != nil {
			t.Fatal(err)
		}
		out = append(out, base64.StdEncoding.EncodeToString(rec.Key))
	}
}

// readWholeLog reads, through the store's client, $all from position 0,
// every stream it names from version 1, and a subscription from 0 to the
// head, and returns it all as text.
func readWholeLog(t *testing.T, url string) string {
	t.Helper()
	store, err := kurrentdb.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := t.Context()
	var b strings.Builder
	write := func(envs []events.Envelope) {
		for _, e := range envs {
			j, _ := json.Marshal(e.Event)
			fmt.Fprintf(&b, "%s@%d %s %s\n", e.Stream, e.Version, e.Type, j)
		}
	}
	streams := map[string]bool{}
	var after uint64
	for {
		page, err := store.ReadAll(ctx, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		write(page)
		for _, e := range page {
			streams[e.Stream] = true
		}
		after = page[len(page)-1].Position
	}
	for st := range streams {
		for from := uint64(1); ; {
			envs, err := store.ReadStream(ctx, st, from, 1000, events.Forwards)
			if err != nil {
				t.Fatalf("ReadStream(%s) error = %v", st, err)
			}
			write(envs)
			if len(envs) < 1000 {
				break
			}
			from = envs[len(envs)-1].Version + 1
		}
	}
	sub, err := store.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	limit := time.After(60 * time.Second)
	for last := uint64(0); last < after; {
		select {
		case e, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription ended: %v", sub.Err())
			}
			write([]events.Envelope{e})
			last = e.Position
		case <-limit:
			t.Fatal("subscription did not reach the head")
		}
	}
	if len(streams) < 10 {
		t.Fatalf("the log names %d streams, want the fixtures' lanes and transcripts", len(streams))
	}
	return b.String()
}
