package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"hermes/node"
	"hermes/testfixtures/ondisk"
)

// seedHome starts hermes on home, writes lanes with transcripts, stops it
// cleanly and returns what the read routes answered.
func seedHome(t *testing.T, home string, lanes int) map[string]json.RawMessage {
	t.Helper()
	s := startServer(t, home, nil)
	var keys, ids []string
	for i := range lanes {
		var r resolved
		s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": fmt.Sprintf("c%d", i), "chat_type": "dm"}}, &r)
		keys, ids = append(keys, r.Entry.SessionKey), append(ids, r.Entry.SessionID)
		for j := range 20 {
			s.must("POST", "/v1/transcripts/"+r.Entry.SessionID+"/messages", map[string]any{"role": "user", "content": fmt.Sprintf("message %d of lane %d %s", j, i, strings.Repeat("text ", 40))}, nil)
		}
	}
	answers := readAnswers(t, s, keys, ids)
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("stop = %d\n%s", code, s.stderr.String())
	}
	return answers
}

// readAnswers collects the answers of the read routes for keys and ids.
func readAnswers(t *testing.T, s *server, keys, ids []string) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	paths := []string{"/v1/sessions", "/v1/search?q=message"}
	for _, k := range keys {
		paths = append(paths, "/v1/sessions/"+url.PathEscape(k))
	}
	for _, id := range ids {
		paths = append(paths, "/v1/transcripts/"+id+"/messages", "/v1/transcripts/"+id)
	}
	for _, p := range paths {
		var raw json.RawMessage
		s.must("GET", p, nil, &raw)
		out[p] = raw
	}
	return out
}

// TestDamagedReadModelRebuiltAtStart garbles lanes.db and state.db (the
// server stopped) and checks that the next start moves the file aside,
// says so, rebuilds it from the log before ready and answers every read as
// before.
func TestDamagedReadModelRebuiltAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, tc := range []struct {
		name  string
		file  func(h node.Home) string
		first int // first page garbled
	}{
		{"lanes.db pages", node.Home.LanesDB, 2},
		{"lanes.db header", node.Home.LanesDB, 1},
		{"state.db pages", node.Home.StateDB, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			before := seedHome(t, home, 4)
			path := tc.file(node.Home{Dir: home})
			ondisk.Garble(t, path, tc.first)

			s := startServer(t, home, nil)
			if !strings.Contains(s.stderr.String(), "read model damaged: moved aside") {
				t.Fatalf("no log line says the read model was moved aside:\n%s", s.stderr.String())
			}
			aside, _ := filepath.Glob(path + ".broken-*")
			if len(aside) == 0 {
				t.Fatalf("no %s.broken-* kept", path)
			}
			for p, want := range before {
				var got json.RawMessage
				s.must("GET", p, nil, &got)
				if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
					t.Errorf("GET %s after the rebuild:\n got %s\nwant %s", p, got, want)
				}
			}
			if code := s.stop(syscall.SIGTERM); code != 0 {
				t.Fatalf("stop = %d", code)
			}
			out, _ := hermes(t, 0, "projections", "verify", "--home", home)
			if !strings.Contains(out, "ok") {
				t.Fatalf("verify: %s", out)
			}
		})
	}
}

// TestPythonStateDBNeverTouched: a state.db of Python Hermes (tables, no
// state_meta) is not moved aside at start, nor overwritten by a restore.
func TestPythonStateDBNeverTouched(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	home := t.TempDir()
	seedHome(t, home, 1)
	backups := t.TempDir()
	hermes(t, 0, "backup", backups, "--home", home)
	dirs, _ := filepath.Glob(filepath.Join(backups, "hermes-*"))
	h := node.Home{Dir: home}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(h.StateDB() + suffix)
	}
	db, err := sql.Open("sqlite", h.StateDB())
	if err != nil {
		t.Fatal(err)
	}
	// In WAL mode, as Python Hermes writes it.
	if _, err := db.Exec("PRAGMA journal_mode = WAL; CREATE TABLE sessions (id TEXT PRIMARY KEY); INSERT INTO sessions VALUES ('python')"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, err := os.ReadFile(h.StateDB())
	if err != nil {
		t.Fatal(err)
	}
	_, stderr := hermes(t, 1, "serve", "--home", home, "--addr", freeAddr(t))
	if !strings.Contains(stderr, "Python Hermes") {
		t.Fatalf("serve on a Python state.db: %s", stderr)
	}
	_, stderr = hermes(t, 1, "restore", dirs[0], "--home", home, "--force")
	if !strings.Contains(stderr, "Python Hermes") {
		t.Fatalf("restore over a Python state.db: %s", stderr)
	}
	after, err := os.ReadFile(h.StateDB())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("the Python state.db was changed")
	}
	if aside, _ := filepath.Glob(h.StateDB() + ".broken-*"); len(aside) > 0 {
		t.Fatalf("the Python state.db was moved aside: %v", aside)
	}
}

// TestErasureDropsBrokenCopies: a damaged read model moved aside is kept
// across a start without erasure, and deleted by the next erasure (it
// cannot be erased in; docs/ERASURE.md's bound covers every file).
func TestErasureDropsBrokenCopies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	home := t.TempDir()
	answers := seedHome(t, home, 2)
	h := node.Home{Dir: home}
	ondisk.Garble(t, h.LanesDB(), 2)
	s := startServer(t, home, nil)
	aside, _ := filepath.Glob(h.LanesDB() + ".broken-*")
	if len(aside) == 0 {
		t.Fatalf("lanes.db was not moved aside:\n%s", s.stderr.String())
	}
	id := ""
	for p := range answers {
		if rest, ok := strings.CutPrefix(p, "/v1/transcripts/"); ok && strings.HasSuffix(rest, "/messages") {
			id = strings.TrimSuffix(rest, "/messages")
		}
	}
	if status := s.call("DELETE", "/v1/transcripts/"+id, nil, nil); status != http.StatusOK {
		t.Fatalf("DELETE transcript %s = %d", id, status)
	}
	if left, _ := filepath.Glob(h.LanesDB() + ".broken-*"); len(left) > 0 {
		t.Fatalf("the moved-aside copy survived an erasure: %v\n%s", left, s.stderr.String())
	}
}

// TestUncleanStopDropsBrokenCopies: after a run that did not purge at its
// stop (killed), an erasure it committed may not have reached a read
// model that is damaged now: the start moves the damaged file aside,
// rebuilds it, and deletes the copy with the purge, instead of keeping it
// for storage.broken_retention.
func TestUncleanStopDropsBrokenCopies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	home := t.TempDir()
	seedHome(t, home, 2)
	s := startServer(t, home, nil)
	s.kill()
	h := node.Home{Dir: home}
	ondisk.Garble(t, h.LanesDB(), 2)
	s = startServer(t, home, nil)
	if !strings.Contains(s.stderr.String(), "read model damaged: moved aside") {
		t.Fatalf("lanes.db was not moved aside:\n%s", s.stderr.String())
	}
	if left, _ := filepath.Glob(h.LanesDB() + ".broken-*"); len(left) > 0 {
		t.Fatalf("the copy moved aside after an unclean stop was kept: %v\n%s", left, s.stderr.String())
	}
}
