package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"hermes/events"
)

// TestAppendAnsweredBeforeTheReadModelCommits: appends are answered with
// the id their row gets, before the read models commit them (16 clients
// at once over several sessions), and a read right after sees them all.
func TestAppendAnsweredBeforeTheReadModelCommits(t *testing.T) {
	// Given four sessions
	h := newHarness(t)
	var sessions []string
	for i := range 4 {
		sessions = append(sessions, h.resolve(dm(fmt.Sprint("early-", i))).Entry.SessionID)
	}

	// When 16 clients append 20 messages each, spread over them
	type answer struct {
		session, content string
		id               int64
		err              error
	}
	answers := make(chan answer, 16*20)
	var wg sync.WaitGroup
	for c := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				a := answer{session: sessions[(c+i)%len(sessions)], content: fmt.Sprintf("client %d message %d", c, i)}
				body, _ := json.Marshal(map[string]string{"role": "user", "content": a.content})
				resp, err := h.http.Client().Post(h.url(transcript(a.session, "/messages")), "application/json", strings.NewReader(string(body)))
				if err != nil {
					a.err = err
				} else {
					raw, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					var got struct {
						ID int64 `json:"id"`
					}
					if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &got) != nil {
						a.err = fmt.Errorf("status %d: %s", resp.StatusCode, raw)
					}
					a.id = got.ID
				}
				answers <- a
			}
		}()
	}
	wg.Wait()
	close(answers)

	// Then every answer's id is the row of its message, no id twice, and
	// every message is read back
	want := map[int64]answer{}
	for a := range answers {
		if a.err != nil {
			t.Fatalf("append: %v", a.err)
		}
		if prev, dup := want[a.id]; dup {
			t.Fatalf("id %d answered twice: %q and %q", a.id, prev.content, a.content)
		}
		want[a.id] = a
	}
	seen := 0
	for _, sid := range sessions {
		var got messageList
		h.call("GET", transcript(sid, "/messages"), nil, http.StatusOK, &got)
		for _, m := range got.Messages {
			a, ok := want[m.ID]
			var content string
			_ = json.Unmarshal(m.Content, &content)
			if !ok || a.session != sid || a.content != content {
				t.Fatalf("row %d of %s holds %q; the append answered with that id was %+v", m.ID, sid, content, a)
			}
			seen++
		}
	}
	if seen != len(want) {
		t.Fatalf("%d messages read back, %d acknowledged", seen, len(want))
	}
}

// TestAppendAfterDeleteRefused: an append does not wait for the read
// models, except while a delete they received is not applied yet: an
// append to a session deleted behind the API's back (a background prune,
// another writer) is refused (404), never written to a session that is
// gone.
func TestAppendAfterDeleteRefused(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for i := range 10 {
		// Given a session with a message
		sid := h.resolve(dm(fmt.Sprint("deleted-", i))).Entry.SessionID
		h.appendMessage(sid, "user", "hello")
		// When another writer deletes it and the runner received the delete
		res, err := h.raw.Append(ctx, events.TranscriptStream(sid), events.AnyVersion(), []events.Proposed{{
			ID: fmt.Sprint("delete-", i), Event: events.TranscriptDeleted{SessionID: sid, Reason: events.DeleteRequested, At: h.clock.Now()}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.runner.WaitAssigned(ctx, res.LastPosition()); err != nil {
			t.Fatal(err)
		}
		r := h.do("POST", transcript(sid, "/messages"), map[string]string{"role": "user", "content": "too late"})
		// Then the append is refused and the session stays gone
		if r.status != http.StatusNotFound {
			t.Fatalf("append after delete = %d %s, want 404", r.status, r.body)
		}
		h.call("GET", transcript(sid, ""), nil, http.StatusNotFound, nil)
	}
}
