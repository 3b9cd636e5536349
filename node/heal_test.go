package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"

	"hermes/testfixtures/ondisk"
)

// seedHome starts a node on home, writes lanes with transcripts, stops it
// cleanly and returns what the read routes answered.
func seedHome(t *testing.T, home string, lanes int) map[string]json.RawMessage {
	t.Helper()
	s := startNode(t, home, nil)
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
	if err := s.stop(); err != nil {
		t.Fatalf("stop = %v\n%s", err, s.stderr.String())
	}
	return answers
}

// readAnswers collects the answers of the read routes for keys and ids.
func readAnswers(t *testing.T, s *testNode, keys, ids []string) map[string]json.RawMessage {
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

// TestBackgroundCheckOfABigReadModel: a read model too big to be checked
// before ready is checked while serving; damage found there is recorded
// (the node heals it live: TestDamagedStateDBWhileServingIsHealedLive),
// and a start after it moves the file aside and rebuilds it.
func TestBackgroundCheckOfABigReadModel(t *testing.T) {
	home := t.TempDir()
	before := seedHome(t, home, 4)
	h := Home{Dir: home}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	checkLater(context.Background(), log, h.LanesDB(), "lanes.db", 0) // every file is "big"
	if _, err := os.Stat(damagedMarker(h.LanesDB())); err == nil {
		t.Fatalf("a sound lanes.db was marked damaged:\n%s", logs.String())
	}
	ondisk.Garble(t, h.StateDB(), 0)
	checkLater(context.Background(), log, h.StateDB(), "state.db", 0)
	if _, err := os.Stat(damagedMarker(h.StateDB())); err != nil {
		t.Fatalf("the damaged state.db was not recorded: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "rebuilding the read models from the event log while serving") {
		t.Fatalf("no log line says what happens next:\n%s", logs.String())
	}

	s := startNode(t, home, nil)
	if !strings.Contains(s.stderr.String(), "read model damaged: moved aside") {
		t.Fatalf("the next start did not move state.db aside:\n%s", s.stderr.String())
	}
	if _, err := os.Stat(damagedMarker(h.StateDB())); err == nil {
		t.Fatal("the marker outlived the rebuild")
	}
	for p, want := range before {
		var got json.RawMessage
		s.must("GET", p, nil, &got)
		if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
			t.Errorf("GET %s after the rebuild:\n got %s\nwant %s", p, got, want)
		}
	}
}
