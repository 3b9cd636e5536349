package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/commands"
	"hermes/events"
	"hermes/testfixtures/ondisk"
)

// erasureFixture is a home with one lane and its transcript whose content
// holds a random marker everywhere hermes stores content: the message
// content, tool calls, reasoning, a queued follow-up (taken, so it also ran
// as a turn) and a pending one, the origin's user_name, and the lane's
// snapshot.
type erasureFixture struct {
	s          *server
	sid, key   string
	userID     string
	transcript string // marker in the transcript's messages
	lane       string // marker in the lane's origin and queued items
}

func newErasureFixture(t *testing.T, home string, args ...string) *erasureFixture {
	t.Helper()
	f := &erasureFixture{transcript: ondisk.RandomMarker(t, "tmark"), lane: ondisk.RandomMarker(t, "lmark"), userID: "u-" + ondisk.RandomMarker(t, "")[:8]}
	f.s = startServer(t, home, nil, args...)
	f.fill(t)
	f.snapshot(t, home)
	return f
}

// fill writes the fixture's lane and transcript through f.s.
func (f *erasureFixture) fill(t *testing.T) {
	t.Helper()
	source := map[string]any{"platform": "telegram", "chat_id": "c-" + f.userID, "chat_type": "dm",
		"user_id": f.userID, "user_name": "Ada " + f.lane}
	var r resolved
	f.s.must("POST", "/v1/sessions/resolve", map[string]any{"source": source}, &r)
	f.sid, f.key = r.Entry.SessionID, r.Entry.SessionKey
	tr := "/v1/transcripts/" + f.sid + "/messages"
	reasoning := "thinking about " + f.transcript
	f.s.must("POST", tr, map[string]any{"role": "user", "content": "hello " + f.transcript}, nil)
	f.s.must("POST", tr, map[string]any{"role": "assistant", "content": "ok", "reasoning": reasoning,
		"tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": "terminal", "arguments": `{"cmd":"echo ` + f.transcript + `"}`}}}}, nil)
	lane := "/v1/sessions/" + url.PathEscape(f.key)
	f.s.must("POST", lane+"/queue", map[string]any{"text": "follow-up " + f.lane, "kind": "queue"}, nil)
	if status := f.s.call("POST", lane+"/queue/next", nil, nil); status != http.StatusOK {
		t.Fatalf("queue/next = %d", status)
	}
	f.s.must("POST", lane+"/queue", map[string]any{"text": "pending " + f.lane, "kind": "queue"}, nil)
}

// snapshot gives the lane a snapshot holding the lane marker, written
// through the log's file while the server runs (the server writes one
// only for a lane of more than 512 events): an erasure must take it too.
func (f *erasureFixture) snapshot(t *testing.T, home string) {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(home, "hermes", "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	h := commands.NewHandler(store, commands.DefaultConfig(), commands.WithSnapshots(store, 1))
	if _, _, err := h.Lane(t.Context(), f.key); err != nil {
		t.Fatal(err)
	}
	h.WaitSnapshots()
	snap, err := store.ReadSnapshot(t.Context(), events.LaneStream(f.key))
	if err != nil || !bytes.Contains(snap.Data, []byte(f.lane)) {
		t.Fatalf("the lane's snapshot = %q, %v; want one holding the lane marker", snap.Data, err)
	}
}

// filesHolding reads every byte of every file under home (the -wal and
// -shm files included) and lists the files that hold marker.
func filesHolding(t *testing.T, home, marker string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(marker)) {
			rel, _ := filepath.Rel(home, path)
			found = append(found, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestErasureLeavesNoMarkerInAnyFile erases with each erasure operation,
// stops the server (the erasing call answered once the content was purged:
// the documented bound is that answer), and reads every file under the
// home: the erased marker is nowhere. The control, without an erasure,
// finds both markers, so the check can fail. After each erasure the read
// models rebuild to what they are (projections verify).
func TestErasureLeavesNoMarkerInAnyFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hermes serve processes")
	}
	tests := []struct {
		name  string
		args  []string
		erase func(t *testing.T, f *erasureFixture)
		// laneErased: the lane marker (origin name, queued texts) is
		// erased too, not only the transcript's.
		laneErased bool
	}{
		{name: "control", erase: func(*testing.T, *erasureFixture) {}},
		{name: "delete", erase: func(t *testing.T, f *erasureFixture) {
			f.s.must("DELETE", "/v1/transcripts/"+f.sid, nil, nil)
		}},
		{name: "clear", erase: func(t *testing.T, f *erasureFixture) {
			f.s.must("POST", "/v1/transcripts/"+f.sid+"/clear", nil, nil)
		}},
		{name: "prune", erase: func(t *testing.T, f *erasureFixture) {
			f.s.must("POST", "/v1/transcripts/"+f.sid+"/end", map[string]any{"reason": "user_exit"}, nil)
			var out struct{ Deleted int }
			f.s.must("POST", "/v1/maintenance/prune-sessions", map[string]any{"older_than_days": 0}, &out)
			if out.Deleted != 1 {
				t.Fatalf("prune-sessions deleted %d, want 1", out.Deleted)
			}
		}},
		{name: "forget", laneErased: true, erase: func(t *testing.T, f *erasureFixture) {
			var out struct {
				Erased struct {
					Lanes, Transcripts int
					QueuedItems        int `json:"queued_items"`
				}
			}
			f.s.must("POST", "/v1/erasure", map[string]any{"platform": "telegram", "user_id": f.userID,
				"reason": "art. 17 request", "requested_by": "dpo"}, &out)
			if out.Erased.Lanes != 1 || out.Erased.Transcripts != 1 || out.Erased.QueuedItems != 2 {
				t.Fatalf("POST /v1/erasure erased %+v, want 1 lane, 1 transcript, 2 queued items", out.Erased)
			}
		}},
		{name: "retention", args: []string{"--clock=manual"}, erase: func(t *testing.T, f *erasureFixture) {
			f.s.must("POST", "/v1/transcripts/"+f.sid+"/end", map[string]any{"reason": "user_exit"}, nil)
			f.s.must("POST", "/v1/clock", map[string]any{"advance": "49h"}, nil)
			deadline := time.Now().Add(60 * time.Second)
			for f.s.call("GET", "/v1/transcripts/"+f.sid, nil, nil) != http.StatusNotFound {
				if time.Now().After(deadline) {
					t.Fatalf("retention did not erase %s:\n%s", f.sid, f.s.stderr.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if tt.name == "retention" {
				cfg := "sessions:\n  auto_prune: true\n  retention_days: 1\nexpiry:\n  interval_seconds: 60\n"
				if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			f := newErasureFixture(t, home, tt.args...)
			tt.erase(t, f)
			if code := f.s.stop(syscall.SIGTERM); code != 0 {
				t.Fatalf("hermes serve exited %d:\n%s", code, f.s.stderr.String())
			}

			inTranscript := filesHolding(t, home, f.transcript)
			inLane := filesHolding(t, home, f.lane)
			if tt.name == "control" {
				if len(inTranscript) == 0 || len(inLane) == 0 {
					t.Fatalf("control: markers found in %v and %v, want both found (the check could not fail)", inTranscript, inLane)
				}
				return
			}
			if len(inTranscript) > 0 {
				t.Errorf("after %s the transcript marker is still in %v", tt.name, inTranscript)
			}
			if tt.laneErased && len(inLane) > 0 {
				t.Errorf("after %s the lane marker (origin name, queued texts) is still in %v", tt.name, inLane)
			}

			if out, _ := hermes(t, 0, "projections", "verify", "--home", home); !strings.HasPrefix(out, "ok:") {
				t.Errorf("projections verify after %s: %s", tt.name, out)
			}
			tail, _ := hermes(t, 0, "events", "tail", f.key, "--home", home)
			if tt.laneErased && (!strings.Contains(tail, "[erased]") || !strings.Contains(tail, "person erased")) {
				t.Errorf("events tail after forget does not show the erasure:\n%s", tail)
			}
		})
	}
}

// erasureState reads the erasure stream of a stopped home: whether a person
// erasure was requested and whether it completed.
func erasureState(t *testing.T, home string) (requested, completed bool) {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(home, "hermes", "events.db"), sqlite.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	envs, err := store.ReadStream(t.Context(), events.ErasureStream, 1, 1000, events.Forwards)
	if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
		t.Fatal(err)
	}
	for _, env := range envs {
		switch env.Event.(type) {
		case events.ErasureRequested:
			requested = true
		case events.ErasureCompleted:
			completed = true
		}
	}
	return requested, completed
}

// TestErasureSurvivesSIGKILL kills hermes serve while it forgets a person
// with many lanes, restarts it, and checks that the erasure either never
// started (the client's retry, same Idempotency-Key, then does it) or was
// finished by recovery before /readyz; either way no file holds the
// person's marker, another person's conversation is intact, and the read
// models match a rebuild.
func TestErasureSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	for i, delay := range []time.Duration{0, 15 * time.Millisecond, 60 * time.Millisecond} {
		home := t.TempDir()
		s := startServer(t, home, nil)
		marker, keep := ondisk.RandomMarker(t, "kmark"), ondisk.RandomMarker(t, "keep")
		user := "u-" + marker[:10]
		for g := range 25 {
			src := map[string]any{"platform": "telegram", "chat_id": "g" + strconv.Itoa(g), "chat_type": "group",
				"user_id": user, "user_name": "Bo " + marker}
			var r resolved
			s.must("POST", "/v1/sessions/resolve", map[string]any{"source": src}, &r)
			s.must("POST", "/v1/transcripts/"+r.Entry.SessionID+"/messages", map[string]any{"role": "user", "content": "said " + marker}, nil)
		}
		var other resolved
		s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram",
			"chat_id": "other", "chat_type": "dm", "user_id": "someone-else"}}, &other)
		s.must("POST", "/v1/transcripts/"+other.Entry.SessionID+"/messages", map[string]any{"role": "user", "content": "said " + keep}, nil)

		body := map[string]any{"platform": "telegram", "user_id": user}
		answered := make(chan int, 1)
		go func() {
			req, _ := http.NewRequest("POST", "http://"+s.addr+"/v1/erasure", strings.NewReader(`{"platform":"telegram","user_id":"`+user+`"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "forget-"+marker)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answered <- 0
				return
			}
			resp.Body.Close()
			answered <- resp.StatusCode
		}()
		time.Sleep(delay)
		s.kill()
		status := <-answered
		requested, completed := erasureState(t, home)
		t.Logf("kill %d after %v: answered %d, requested %t, completed %t", i, delay, status, requested, completed)

		s = startServer(t, home, nil)
		if !requested {
			// Never started: the client retries with the same key.
			s.mustWithKey(t, "POST", "/v1/erasure", body, "forget-"+marker)
		}
		if code := s.stop(syscall.SIGTERM); code != 0 {
			t.Fatalf("hermes serve exited %d:\n%s", code, s.stderr.String())
		}
		if _, completed := erasureState(t, home); !completed {
			t.Fatalf("kill %d: the erasure did not complete after the restart", i)
		}
		if found := filesHolding(t, home, marker); len(found) > 0 {
			t.Errorf("kill %d: the erased marker is still in %v", i, found)
		}
		if found := filesHolding(t, home, keep); len(found) == 0 {
			t.Errorf("kill %d: another person's message was lost", i)
		}
		if out, _ := hermes(t, 0, "projections", "verify", "--home", home); !strings.HasPrefix(out, "ok:") {
			t.Errorf("kill %d: projections verify: %s", i, out)
		}
	}
}

// mustWithKey is must with an Idempotency-Key.
func (s *server) mustWithKey(t *testing.T, method, path string, body any, key string) {
	t.Helper()
	data, _ := json.Marshal(body)
	req, err := http.NewRequest(method, "http://"+s.addr+path, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s = %d", method, path, resp.StatusCode)
	}
}

// TestBigErasureUnderLoad: a person with 3,000 messages, each with a word
// of its own, is erased by each kind of erasure through the API (forget
// the person; delete, clear or prune the transcript; retention is the
// same purge, run by the expiry watcher: TestErasureLeavesNoMarkerInAnyFile)
// while 8 writers append for other people. The erasure answers 200 (it waits as long as its purge needs),
// every writer's append answers 200 meanwhile, and right after the answer,
// with the server still running, no file under the home (WALs included)
// holds any of the person's words, nor does either FTS5 index's _idx or
// _data table; the control, before the erasure, finds them.
func TestBigErasureUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hermes serve and appends 3,000 messages a kind")
	}
	kinds := []struct {
		name  string
		erase func(t *testing.T, s *server, user, sid string)
	}{
		{name: "forget", erase: func(t *testing.T, s *server, user, _ string) {
			var out struct{ Erased struct{ Transcripts int } }
			s.must("POST", "/v1/erasure", map[string]any{"platform": "telegram", "user_id": user}, &out)
			if out.Erased.Transcripts != 1 {
				t.Fatalf("erased %+v, want 1 transcript", out.Erased)
			}
		}},
		{name: "delete", erase: func(t *testing.T, s *server, _, sid string) {
			s.must("DELETE", "/v1/transcripts/"+sid, nil, nil)
		}},
		{name: "clear", erase: func(t *testing.T, s *server, _, sid string) {
			s.must("POST", "/v1/transcripts/"+sid+"/clear", nil, nil)
		}},
		{name: "prune", erase: func(t *testing.T, s *server, _, sid string) {
			s.must("POST", "/v1/transcripts/"+sid+"/end", map[string]any{"reason": "user_exit"}, nil)
			var out struct{ Deleted int }
			s.must("POST", "/v1/maintenance/prune-sessions", map[string]any{"older_than_days": 0}, &out)
			if out.Deleted != 1 {
				t.Fatalf("prune-sessions deleted %d, want 1", out.Deleted)
			}
		}},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			home := t.TempDir()
			s := startServer(t, home, nil)
			marker := ondisk.RandomMarker(t, "bigmk")
			user := "u-" + ondisk.RandomMarker(t, "")[:8]
			var r resolved
			s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": "c-" + user, "chat_type": "dm", "user_id": user}}, &r)
			const messages = 3000
			for i := range messages {
				s.must("POST", "/v1/transcripts/"+r.Entry.SessionID+"/messages", map[string]any{"role": "user", "content": "note " + marker + strconv.Itoa(i) + " about the trip"}, nil)
			}
			if found := filesHolding(t, home, marker); len(found) == 0 {
				t.Fatal("control: no file holds the person's words before the erasure; the check cannot fail")
			}

			stop := make(chan struct{})
			writers := make(chan error, 8)
			for w := range 8 {
				go func() {
					var other resolved
					if status, err := s.request("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "slack", "chat_id": "w" + strconv.Itoa(w), "user_id": "other" + strconv.Itoa(w)}}, &other); err != nil || status != http.StatusOK {
						writers <- errors.Join(err, errors.New("resolve "+strconv.Itoa(status)))
						return
					}
					for i := 0; ; i++ {
						select {
						case <-stop:
							writers <- nil
							return
						default:
						}
						status, err := s.request("POST", "/v1/transcripts/"+other.Entry.SessionID+"/messages", map[string]any{"role": "user", "content": "unrelated " + strconv.Itoa(i)}, nil)
						if err != nil || status != http.StatusOK {
							writers <- errors.Join(err, errors.New("append answered "+strconv.Itoa(status)+" during the erasure"))
							return
						}
					}
				}()
			}
			kind.erase(t, s, user, r.Entry.SessionID)
			if found := filesHolding(t, home, marker); len(found) > 0 {
				t.Errorf("right after the %s answered, the person's words are in %v", kind.name, found)
			}
			close(stop)
			for range 8 {
				if err := <-writers; err != nil {
					t.Error(err)
				}
			}
			db, err := sql.Open("sqlite", "file:"+filepath.Join(home, "state.db")+"?mode=ro")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, table := range []string{"messages_fts_idx", "messages_fts_trigram_idx"} {
				var n int
				if err := db.QueryRow("SELECT count(*) FROM "+table+" WHERE instr(term, ?) > 0", marker[:4]).Scan(&n); err != nil || n != 0 {
					t.Errorf("%s holds %d terms of the person's words (%v)", table, n, err)
				}
			}
			for _, table := range []string{"messages_fts_data", "messages_fts_trigram_data"} {
				var n int
				if err := db.QueryRow("SELECT count(*) FROM "+table+" WHERE instr(block, ?) > 0", marker[2:]).Scan(&n); err != nil || n != 0 {
					t.Errorf("%s holds %d blocks with the person's words (%v)", table, n, err)
				}
			}
		})
	}
}
