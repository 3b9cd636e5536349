package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"hermes/testfixtures/ondisk"
)

// TestDamagedStateDBWhileServingIsHealedLive: given a node serving 12
// sessions of 40 messages, when a leaf page of state.db's messages table
// is damaged on disk under it and the transcripts are then deleted one by
// one (the delete of the rows on that page meets the damage), then the
// node does not stop: the delete that met it is answered once the read
// models are rebuilt from the log and swapped in, the commands sent
// meanwhile are refused with 503 and Retry-After and change nothing,
// /readyz says healing and then ready, every session deleted is gone and
// every other one keeps its 40 messages, and state.db passes its quick
// check with no damage left recorded.
func TestDamagedStateDBWhileServingIsHealedLive(t *testing.T) {
	home := t.TempDir()
	first := startNode(t, home, nil)
	const sessions, perSession = 12, 40
	ids := make([]string, sessions)
	for s := range sessions {
		var r resolved
		first.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": fmt.Sprint("heal-", s), "chat_type": "dm", "user_id": fmt.Sprint("u", s)}}, &r)
		ids[s] = r.Entry.SessionID
		for i := range perSession {
			first.must("POST", "/v1/transcripts/"+ids[s]+"/messages", map[string]any{"role": "user", "content": fmt.Sprintf("message %d of session %d, long enough to fill the pages of the table a little faster", i, s)}, nil)
		}
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	n := startNode(t, home, nil)
	ondisk.DamageLeafHeader(t, Home{Dir: home}.StateDB(), "messages")

	deleted := map[string]bool{}
	var refused, healingSeen int
	deadline := time.Now().Add(3 * time.Minute)
	for _, id := range ids[2 : sessions-2] {
		for {
			var body json.RawMessage
			req, _ := http.NewRequest(http.MethodDelete, "http://"+n.addr+"/v1/transcripts/"+id, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("DELETE %s: %v (the node stopped?)\n%s", id, err, n.stderr.String())
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				deleted[id] = true
				break
			}
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "rebuilt") {
				t.Fatalf("DELETE %s = %d %s (Retry-After %q), want 200 or 503 saying the read models are rebuilt\n%s", id, resp.StatusCode, body, resp.Header.Get("Retry-After"), n.stderr.String())
			}
			refused++
			var ready struct{ Status string }
			n.call("GET", "/readyz", nil, &ready)
			if ready.Status == "healing" {
				healingSeen++
			}
			if time.Now().After(deadline) {
				t.Fatalf("still refused after 3 minutes\n%s", n.stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	logs := n.stderr.String()
	if !strings.Contains(logs, "read model damaged while serving") || !strings.Contains(logs, "read models healed") {
		t.Fatalf("the damage was never met or never healed (refused %d, healing seen %d):\n%s", refused, healingSeen, logs)
	}
	for {
		var ready struct{ Status string }
		if n.call("GET", "/readyz", nil, &ready); ready.Status == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never ready again\n%s", n.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, id := range ids {
		var out struct{ Messages []json.RawMessage }
		status := n.call("GET", "/v1/transcripts/"+id+"/messages", nil, &out)
		switch {
		case deleted[id] && status != http.StatusNotFound:
			t.Errorf("deleted session %s answers %d", id, status)
		case !deleted[id] && (status != http.StatusOK || len(out.Messages) != perSession):
			t.Errorf("session %s = %d with %d messages, want 200 with %d", id, status, len(out.Messages), perSession)
		}
	}
	if err := quickCheck(t.Context(), Home{Dir: home}.StateDB()); err != nil {
		t.Errorf("state.db after the heal: %v", err)
	}
	if err := n.stop(); err != nil {
		t.Fatalf("the node's Run = %v after the heal", err)
	}
}
