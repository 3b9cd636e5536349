package api_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hermes/api"
	"hermes/projections"
	"hermes/projections/sessions"
	"hermes/projections/transcripts"
)

// withBackoff sets the runner's retry backoff.
func withBackoff(b projections.Backoff) option { return func(o *harnessOptions) { o.backoff = &b } }

// TestStorageFull fills, in turn, the event log, lanes.db and state.db
// (SQLite's max_page_count: the file cannot grow, as on a full disk) and
// checks, in one process: writes are refused with 507 insufficient_storage
// and append nothing; reads keep working; /readyz and /metrics say why;
// once the bound is lifted the runner's backoff retry (driven by the test's
// timer) catches up, writes succeed, and the read models match a rebuild.
func TestStorageFull(t *testing.T) {
	for _, target := range []string{"events.db", "lanes.db", "state.db"} {
		t.Run(target, func(t *testing.T) {
			fire := make(chan time.Time)
			logs := &lockedBuffer{}
			h := newHarness(t, withLog(slog.New(slog.NewTextHandler(logs, nil))),
				withBackoff(projections.Backoff{Min: time.Millisecond, Max: time.Millisecond,
					After: func(time.Duration) <-chan time.Time { return fire }}))
			limit := map[string]func(int64){
				"events.db": h.raw.SetMaxPageCount,
				"lanes.db":  h.lanes.SetMaxPageCount,
				"state.db":  h.state.SetMaxPageCount,
			}[target]

			r := h.resolve(dm("full"))
			id := r.Entry.SessionID
			h.call("POST", transcript(id, "/messages"), map[string]string{"role": "user", "content": "before"}, http.StatusOK, nil)
			// The append is answered before the read models commit it:
			// a read waits until they have it.
			h.call("GET", transcript(id, "/messages"), nil, http.StatusOK, nil)
			big := strings.Repeat("x", 16<<10)

			limit(1) // held at its size: only its free pages are left
			write := func(i int) response {
				if target == "lanes.db" {
					// New lanes grow lanes.db.
					return h.do("POST", "/v1/sessions/resolve", map[string]any{"source": dm("lane-" + strings.Repeat("k", 200) + string(rune('a'+i%26)) + time.Duration(i).String())})
				}
				return h.do("POST", transcript(id, "/messages"), map[string]string{"role": "user", "content": big})
			}
			refused := false
			for i := 0; i < 2000 && !refused; i++ {
				resp := write(i)
				switch resp.status {
				case http.StatusOK:
				case http.StatusInsufficientStorage:
					code, err := errorBody(resp)
					if err != nil || code != api.CodeInsufficientStorage {
						t.Fatalf("507 body = %s (%v), want code insufficient_storage", resp.body, err)
					}
					refused = true
				default:
					t.Fatalf("write %d = %d %s, want 200 or 507", i, resp.status, resp.body)
				}
			}
			if !refused {
				t.Fatalf("no write was refused with %s bounded", target)
			}
			// Further writes are refused and append nothing.
			head := h.head()
			for i := range 5 {
				if resp := write(10000 + i); resp.status != http.StatusInsufficientStorage {
					t.Fatalf("write while full = %d %s, want 507", resp.status, resp.body)
				}
			}
			if got := h.head(); got != head {
				t.Fatalf("head moved from %d to %d while writes were refused", head, got)
			}
			// Reads are served.
			h.call("GET", lane(r.Entry.SessionKey, ""), nil, http.StatusOK, nil)
			var got struct {
				Messages []map[string]any `json:"messages"`
			}
			h.call("GET", transcript(id, "/messages"), nil, http.StatusOK, &got)
			if msgs := got.Messages; len(msgs) == 0 || msgs[0]["content"] != "before" {
				t.Fatalf("messages while full = %v, want the first one 'before'", got.Messages)
			}
			ready := h.do("GET", "/readyz", nil)
			if ready.status != http.StatusServiceUnavailable || !bytes.Contains(ready.body, []byte("storage_full")) {
				t.Fatalf("/readyz while full = %d %s, want 503 storage_full", ready.status, ready.body)
			}
			if m := metric(t, h, "hermes_storage_full"); m != "1" {
				t.Fatalf("hermes_storage_full = %q while full, want 1", m)
			}
			if !strings.Contains(logs.String(), "storage full") {
				t.Fatalf("no log line says storage full:\n%s", logs.String())
			}

			// Space returns: the runner retries (its timer fires), writes
			// succeed, no restart.
			limit(0)
			deadline := time.Now().Add(30 * time.Second)
			for h.runner.StorageError() != nil {
				if time.Now().After(deadline) {
					t.Fatalf("runner still failing after the bound was lifted: %v", h.runner.StorageError())
				}
				select {
				case fire <- time.Now():
				case <-time.After(10 * time.Millisecond):
				}
			}
			h.call("POST", transcript(id, "/messages"), map[string]string{"role": "user", "content": "after"}, http.StatusOK, nil)
			h.call("GET", transcript(id, "/messages"), nil, http.StatusOK, &got)
			if last := got.Messages[len(got.Messages)-1]["content"]; last != "after" {
				t.Fatalf("last message = %v, want 'after'", last)
			}
			if ready := h.do("GET", "/readyz", nil); ready.status != http.StatusOK {
				t.Fatalf("/readyz after space returned = %d %s", ready.status, ready.body)
			}
			if m := metric(t, h, "hermes_storage_full"); m != "0" {
				t.Fatalf("hermes_storage_full = %q after, want 0", m)
			}
			if target != "events.db" {
				if m := metric(t, h, "hermes_projection_retries_total"); m == "0" || m == "" {
					t.Fatalf("hermes_projection_retries_total = %q, want > 0", m)
				}
			}
			verifyReadModels(t, h)
		})
	}
}

// metric reads one unlabelled sample of /metrics.
func metric(t *testing.T, h *harness, name string) string {
	t.Helper()
	resp := h.do("GET", "/metrics", nil)
	for _, line := range strings.Split(string(resp.body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// verifyReadModels is `hermes projections verify` on the harness: the live
// read models match a rebuild from the log.
func verifyReadModels(t *testing.T, h *harness) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.runner.WaitFor(ctx, h.head()); err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(t.TempDir(), "verify")
	open := func(dir string) ([]projections.Projection, error) {
		l, err := sessions.Open(filepath.Join(dir, "lanes.db"), sessions.Exports{})
		if err != nil {
			return nil, err
		}
		s, err := transcripts.Open(filepath.Join(dir, "state.db"))
		if err != nil {
			l.Close()
			return nil, err
		}
		return []projections.Projection{l, s}, nil
	}
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		t.Fatal(err)
	}
	diff, err := projections.Verify(ctx, h.raw, open, h.runner.Projections(), scratch, nil)
	if err != nil {
		t.Fatalf("Verify() = %v", err)
	}
	if diff != nil {
		t.Fatalf("read models differ from a rebuild: %s", diff)
	}
}
