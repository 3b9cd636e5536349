package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// readCheck is what a read must answer right after a write: the status and
// a fragment its body must contain (has) or must not contain (hasNot).
type readCheck struct {
	path   string
	status int
	has    string
	hasNot string
}

// readCases makes, for every GET route of /v1, a write the route must
// reflect at once, and says how the answer shows it. Each write is one that
// returns without waiting for the read models, so only the route's own
// read-your-writes wait makes the check pass. n makes every round's data
// new.
var readCases = map[string]func(h *harness, n int) readCheck{
	"/v1/projections/rebuild": func(h *harness, n int) readCheck {
		// The harness's rebuilds finish at once (rebuild_test.go).
		h.call("POST", "/v1/projections/rebuild", map[string]any{}, http.StatusAccepted, nil)
		return readCheck{path: "/v1/projections/rebuild", status: 200, has: fmt.Sprintf(`"run":%d,"phase":"done"`, n+1)}
	},
	"/v1/sessions": func(h *harness, n int) readCheck {
		key := h.resolve(dm(fmt.Sprint("list-", n))).Entry.SessionKey
		return readCheck{path: "/v1/sessions", status: 200, has: `"session_key":"` + key + `"`}
	},
	"/v1/sessions/{key}": func(h *harness, n int) readCheck {
		res := h.resolve(dm(fmt.Sprint("get-", n)))
		return readCheck{path: lane(res.Entry.SessionKey, ""), status: 200, has: `"session_id":"` + res.Entry.SessionID + `"`}
	},
	"/v1/sessions/{key}/events": func(h *harness, n int) readCheck {
		res := h.resolve(dm("events"))
		var e entry
		h.call("POST", lane(res.Entry.SessionKey, "/touch"), map[string]int{"last_prompt_tokens": n}, 200, &e)
		return readCheck{path: lane(res.Entry.SessionKey, "/events"), status: 200, has: fmt.Sprintf(`"version":%d,`, e.Version)}
	},
	"/v1/sessions/{key}/state": func(h *harness, n int) readCheck {
		res := h.resolve(dm("state"))
		var e entry
		h.call("POST", lane(res.Entry.SessionKey, "/touch"), map[string]int{"last_prompt_tokens": n}, 200, &e)
		return readCheck{path: lane(res.Entry.SessionKey, fmt.Sprintf("/state?at_version=%d", e.Version)), status: 200, has: fmt.Sprintf(`"last_prompt_tokens":%d,`, n)}
	},
	"/v1/sessions/{key}/queue": func(h *harness, n int) readCheck {
		res := h.resolve(dm("queue"))
		text := fmt.Sprint("queued-", n)
		h.call("POST", lane(res.Entry.SessionKey, "/queue"), map[string]string{"kind": "queue", "text": text}, 200, nil)
		return readCheck{path: lane(res.Entry.SessionKey, "/queue"), status: 200, has: `"text":"` + text + `"`}
	},
	"/v1/sessions/{key}/context": func(h *harness, n int) readCheck {
		res := h.resolve(dm("context"))
		var e entry
		h.call("POST", lane(res.Entry.SessionKey, "/reset"), map[string]string{}, 200, &e)
		return readCheck{path: lane(res.Entry.SessionKey, "/context"), status: 200, has: `"session_id":"` + e.SessionID + `"`}
	},
	"/v1/events": func(h *harness, n int) readCheck {
		h.resolve(dm(fmt.Sprint("all-", n)))
		head := h.head()
		return readCheck{path: fmt.Sprintf("/v1/events?from_position=%d", head), status: 200, has: fmt.Sprintf(`"position":%d,`, head)}
	},
	"/v1/recovery/resumable": func(h *harness, n int) readCheck {
		key := h.resolve(dm(fmt.Sprint("resumable-", n))).Entry.SessionKey
		h.call("POST", lane(key, "/resume-pending"), map[string]string{}, 200, nil)
		return readCheck{path: "/v1/recovery/resumable", status: 200, has: `"session_key":"` + key + `"`}
	},
	"/v1/transcripts/recent": func(h *harness, n int) readCheck {
		id := h.resolve(dm(fmt.Sprint("recent-", n))).Entry.SessionID
		return readCheck{path: "/v1/transcripts/recent?limit=1000", status: 200, has: `"` + id + `"`}
	},
	"/v1/transcripts/{session_id}": func(h *harness, n int) readCheck {
		id := h.resolve(dm(fmt.Sprint("transcript-", n))).Entry.SessionID
		return readCheck{path: transcript(id, ""), status: 200, has: `"` + id + `"`}
	},
	"/v1/transcripts/{session_id}/messages": func(h *harness, n int) readCheck {
		id := h.resolve(dm(fmt.Sprint("messages-", n))).Entry.SessionID
		h.appendMessage(id, "user", "about to be cleared")
		h.call("POST", transcript(id, "/clear"), nil, 200, nil)
		return readCheck{path: transcript(id, "/messages"), status: 200, has: `"messages":[]`}
	},
	"/v1/transcripts/{session_id}/lineage": func(h *harness, n int) readCheck {
		id := h.resolve(dm(fmt.Sprint("lineage-", n))).Entry.SessionID
		return readCheck{path: transcript(id, "/lineage"), status: 200, has: `"` + id + `"`}
	},
	"/v1/transcripts/{session_id}/export": func(h *harness, n int) readCheck {
		id := h.resolve(dm(fmt.Sprint("export-", n))).Entry.SessionID
		return readCheck{path: transcript(id, "/export"), status: 200, has: `"` + id + `"`}
	},
	"/v1/titles/resolve": func(h *harness, n int) readCheck {
		id := h.resolve(dm(fmt.Sprint("title-", n))).Entry.SessionID
		title := fmt.Sprint("Resolved ", n)
		h.call("PUT", transcript(id, "/title"), map[string]string{"title": title}, 200, nil)
		h.call("DELETE", transcript(id, ""), nil, 200, nil)
		return readCheck{path: "/v1/titles/resolve?title=" + strings.ReplaceAll(title, " ", "+"), status: 404}
	},
	"/v1/titles/next": func(h *harness, n int) readCheck {
		id := h.resolve(dm(fmt.Sprint("next-", n))).Entry.SessionID
		title := fmt.Sprint("Next ", n)
		h.call("PUT", transcript(id, "/title"), map[string]string{"title": title}, 200, nil)
		h.call("DELETE", transcript(id, ""), nil, 200, nil)
		return readCheck{path: "/v1/titles/next?title=" + strings.ReplaceAll(title, " ", "+"), status: 200, has: `"title":"` + title + `"`}
	},
	"/v1/search": func(h *harness, n int) readCheck {
		id := h.resolve(dm(fmt.Sprint("search-", n))).Entry.SessionID
		word := fmt.Sprint("zebra", n)
		h.appendMessage(id, "user", "a "+word+" crossed")
		h.call("POST", transcript(id, "/clear"), nil, 200, nil)
		return readCheck{path: "/v1/search?q=" + word, status: 200, has: `"results":[]`}
	},
	"/v1/export": func(h *harness, n int) readCheck {
		id := h.resolve(dm(fmt.Sprint("exportall-", n))).Entry.SessionID
		return readCheck{path: "/v1/export", status: 200, has: `"` + id + `"`}
	},
	"/v1/erasure/status": func(h *harness, n int) readCheck {
		// Without a purge (the harness has none), an erasure is purged
		// once the read models have it.
		id := h.resolve(dm(fmt.Sprint("erase-", n))).Entry.SessionID
		h.call("DELETE", transcript(id, ""), nil, 200, nil)
		head := h.head()
		return readCheck{path: "/v1/erasure/status", status: 200, has: fmt.Sprintf(`"head":%d,"target_position":%d,"purged_through":%d`, head, head, head)}
	},
	"/v1/stats/tokens": func(h *harness, n int) readCheck {
		id := h.resolve(dm(fmt.Sprint("stats-", n))).Entry.SessionID
		model := fmt.Sprint("model-", n)
		h.call("PATCH", transcript(id, ""), map[string]any{"model": model, "input_tokens": 5}, 200, nil)
		h.call("DELETE", transcript(id, ""), nil, 200, nil)
		return readCheck{path: "/v1/stats/tokens", status: 200, hasNot: `"` + model + `"`}
	},
}

// TestEveryReadRouteReadsYourWrites walks the GET routes of the router: each
// must have a case above, and each must answer, right after a write, what
// the write did, round after round. A read route registered without the
// read-your-writes wait serves stale answers here.
func TestEveryReadRouteReadsYourWrites(t *testing.T) {
	h := newHarness(t)
	routes, ok := h.server.Handler().(chi.Routes)
	if !ok {
		t.Fatalf("(*api.Server).Handler() is a %T, not a chi.Routes", h.server.Handler())
	}
	var reads []string
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if method == http.MethodGet && strings.HasPrefix(route, "/v1/") {
			reads = append(reads, route)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("chi.Walk() = %v", err)
	}
	if len(reads) != len(readCases) {
		t.Errorf("the router has %d GET routes under /v1, the test %d cases: %v", len(reads), len(readCases), reads)
	}
	for _, route := range reads {
		write, ok := readCases[route]
		if !ok {
			t.Errorf("GET %s has no read-your-writes case: add one to readCases", route)
			continue
		}
		t.Run(route, func(t *testing.T) {
			h := h.with(t)
			for n := range 5 {
				c := write(h, n)
				r := h.do("GET", c.path, nil)
				if r.status != c.status {
					t.Fatalf("round %d: GET %s = %d %s, want %d", n, c.path, r.status, r.body, c.status)
				}
				if c.has != "" && !strings.Contains(string(r.body), c.has) {
					t.Fatalf("round %d: GET %s = %s, want it to contain %s", n, c.path, r.body, c.has)
				}
				if c.hasNot != "" && strings.Contains(string(r.body), c.hasNot) {
					t.Fatalf("round %d: GET %s = %s, want it without %s", n, c.path, r.body, c.hasNot)
				}
			}
		})
	}
}
