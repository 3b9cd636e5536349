package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

// The read-your-writes cases of the SessionDB routes ([C]).
func init() {
	newID := func(h *harness, prefix string, n int) string {
		return h.resolve(dm(fmt.Sprint(prefix, n))).Entry.SessionID
	}
	readCases["/v1/transcripts"] = func(h *harness, n int) readCheck {
		id := newID(h, "list-rich-", n)
		return readCheck{path: "/v1/transcripts?limit=10000&include_children=true", status: 200, has: `"` + id + `"`}
	}
	readCases["/v1/transcripts/count"] = func(h *harness, n int) readCheck {
		id := newID(h, "count-", n)
		return readCheck{path: "/v1/transcripts/count?id_query=" + url.QueryEscape(id), status: 200, has: `"count":1`}
	}
	readCases["/v1/transcripts/resolve"] = func(h *harness, n int) readCheck {
		id := newID(h, "resolve-", n)
		return readCheck{path: "/v1/transcripts/resolve?id=" + url.QueryEscape(id), status: 200, has: `"session_id":"` + id + `"`}
	}
	readCases["/v1/stats/messages"] = func(h *harness, n int) readCheck {
		id := newID(h, "stats-", n)
		return readCheck{path: "/v1/stats/messages?session_id=" + url.QueryEscape(id), status: 200, has: `"count":0`}
	}
	readCases["/v1/titles/session"] = func(h *harness, n int) readCheck {
		id := newID(h, "by-title-", n)
		title := fmt.Sprint("by title ", n)
		h.call("PUT", transcript(id, "/title"), map[string]string{"title": title}, http.StatusOK, nil)
		return readCheck{path: "/v1/titles/session?title=" + url.QueryEscape(title), status: 200, has: `"` + id + `"`}
	}
	readCases["/v1/titles/sanitize"] = func(h *harness, n int) readCheck {
		return readCheck{path: fmt.Sprintf("/v1/titles/sanitize?title=++t%%09%d++", n), status: 200, has: fmt.Sprintf(`"title":"t %d"`, n)}
	}
	readCases["/v1/transcripts/{session_id}/compression-tip"] = func(h *harness, n int) readCheck {
		id := newID(h, "tip-", n)
		return readCheck{path: transcript(id, "/compression-tip"), status: 200, has: `"session_id":"` + id + `"`}
	}
	readCases["/v1/transcripts/{session_id}/resume-target"] = func(h *harness, n int) readCheck {
		id := newID(h, "resume-target-", n)
		return readCheck{path: transcript(id, "/resume-target"), status: 200, has: `"session_id":"` + id + `"`}
	}
}

// TestSessionDBRoutes walks the SessionDB routes of a session opened
// without a lane: listing, counts, prefix resolution, archive, reopen, the
// bulk and empty-session deletes (through the delete command).
func TestSessionDBRoutes(t *testing.T) {
	h := newHarness(t)
	var opened struct {
		ID      string `json:"id"`
		Source  string `json:"source"`
		Created bool   `json:"created"`
	}
	h.call("POST", "/v1/transcripts", map[string]string{"session_id": "cli_a1", "source": "cli", "model": "m"}, http.StatusOK, &opened)
	if opened.ID != "cli_a1" || opened.Source != "cli" || !opened.Created {
		t.Fatalf("open = %+v, want cli_a1, cli, created", opened)
	}
	h.call("POST", "/v1/transcripts", map[string]string{"session_id": "cli_a1", "source": "other"}, http.StatusOK, &opened)
	if opened.Source != "cli" || opened.Created {
		t.Errorf("open again = %+v, want the first row kept, not created", opened)
	}
	h.call("POST", "/v1/transcripts", map[string]string{"session_id": "cli_a2", "source": "cli", "parent_session_id": "nope"}, http.StatusNotFound, nil)
	h.call("POST", "/v1/transcripts", map[string]string{"session_id": "cli_b1", "source": "cron"}, http.StatusOK, nil)
	h.call("POST", transcript("cli_a1", "/messages"), map[string]string{"role": "user", "content": "hello\nthere"}, http.StatusOK, nil)

	var list struct {
		Sessions []map[string]any `json:"sessions"`
	}
	h.call("GET", "/v1/transcripts?exclude_source=cron", nil, http.StatusOK, &list)
	if len(list.Sessions) != 1 || list.Sessions[0]["id"] != "cli_a1" || list.Sessions[0]["preview"] != "hello there" {
		t.Errorf("list excluding cron = %v, want cli_a1 with preview %q", list.Sessions, "hello there")
	}
	count := func(q string) float64 {
		var c struct {
			Count float64 `json:"count"`
		}
		h.call("GET", "/v1/transcripts/count"+q, nil, http.StatusOK, &c)
		return c.Count
	}
	var resolved struct {
		SessionID *string `json:"session_id"`
	}
	for _, tc := range []struct {
		prefix string
		want   string
	}{{"cli_a", "cli_a1"}, {"cli_", ""}, {"cli%", ""}, {"cli_b1", "cli_b1"}} {
		h.call("GET", "/v1/transcripts/resolve?id="+url.QueryEscape(tc.prefix), nil, http.StatusOK, &resolved)
		got := ""
		if resolved.SessionID != nil {
			got = *resolved.SessionID
		}
		if got != tc.want {
			t.Errorf("resolve %q = %q, want %q", tc.prefix, got, tc.want)
		}
	}

	h.call("PUT", transcript("cli_b1", "/archived"), map[string]bool{"archived": true}, http.StatusOK, nil)
	if got := count("?source=cron"); got != 0 {
		t.Errorf("count of cron sessions after archiving = %v, want 0", got)
	}
	if got := count("?source=cron&include_archived=true"); got != 1 {
		t.Errorf("count with archived = %v, want 1", got)
	}
	h.call("PUT", transcript("cli_b1", "/archived"), map[string]bool{"archived": false}, http.StatusOK, nil)

	h.call("POST", transcript("cli_b1", "/end"), map[string]string{"reason": "user_exit"}, http.StatusOK, nil)
	if got := count("?empty=true"); got != 1 {
		t.Errorf("empty sessions = %v, want 1", got)
	}
	h.call("POST", transcript("cli_b1", "/reopen"), nil, http.StatusOK, nil)
	if got := count("?empty=true"); got != 0 {
		t.Errorf("empty sessions after reopen = %v, want 0", got)
	}
	h.call("POST", transcript("cli_b1", "/end"), map[string]string{"reason": "user_exit"}, http.StatusOK, nil)
	var deleted struct {
		Deleted int `json:"deleted"`
	}
	h.call("POST", "/v1/maintenance/delete-empty-sessions", nil, http.StatusOK, &deleted)
	if deleted.Deleted != 1 {
		t.Errorf("delete-empty-sessions = %d, want 1", deleted.Deleted)
	}
	h.call("POST", "/v1/transcripts/delete", map[string][]string{"session_ids": {"cli_a1", "cli_a1", "gone"}}, http.StatusOK, &deleted)
	if deleted.Deleted != 1 {
		t.Errorf("bulk delete = %d, want 1", deleted.Deleted)
	}
	h.call("GET", transcript("cli_a1", ""), nil, http.StatusNotFound, nil)
}
