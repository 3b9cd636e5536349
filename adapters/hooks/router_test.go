package hooks_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"hermes/adapters/eventstore/sqlite"
	"hermes/adapters/hooks"
	"hermes/commands"
	"hermes/events"
)

var t0 = time.Date(2026, 5, 9, 10, 0, 0, 0, time.UTC)

const secret = "s3cr3t-for-tests"

// waitLimit bounds every wait on real I/O (HTTP deliveries, processes).
const waitLimit = 20 * time.Second

func openStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// appendEvents appends n events over a few lane streams and a transcript
// stream and returns their ids in position order.
func appendEvents(t *testing.T, s events.Store, n int) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for i := range n {
		var stream string
		var e events.Event
		switch i % 3 {
		case 0, 1:
			stream = events.LaneStream(fmt.Sprintf("agent:main:telegram:dm:%d", i%5))
			e = events.Touched{At: t0.Add(time.Duration(i) * time.Second)}
		case 2:
			stream = events.TranscriptStream("20260509_100000_0000000" + strconv.Itoa(i%7))
			e = events.TitleSet{SessionID: "x", Title: fmt.Sprintf("title %d", i), At: t0}
		}
		id := uuid.NewString()
		_, err := s.Append(ctx, stream, events.AnyVersion(), []events.Proposed{{
			ID: id, Event: e, Metadata: events.Metadata{SchemaVersion: events.SchemaVersionOf(e.EventType()), Command: "test"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// delivery is one request a receiver got.
type delivery struct {
	id, typ   string
	signed    bool // the signature matched the body
	timestamp string
	env       hooks.Envelope
	status    int
}

// receiver is a webhook endpoint on a loopback server. respond picks the
// status of the n-th (1-based) request for an event id; nil: 200.
type receiver struct {
	srv     *httptest.Server
	secret  string
	respond func(id string, n int) int

	mu    sync.Mutex
	got   []delivery
	tries map[string]int
	seen  chan struct{} // poked after each request
}

func newReceiver(t *testing.T, secret string, respond func(id string, n int) int) *receiver {
	t.Helper()
	r := &receiver{secret: secret, respond: respond, tries: map[string]int{}, seen: make(chan struct{}, 1)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	d := delivery{
		id:        req.Header.Get(hooks.HeaderEventID),
		typ:       req.Header.Get(hooks.HeaderEventType),
		timestamp: req.Header.Get(hooks.HeaderTimestamp),
		signed:    hmac.Equal([]byte(req.Header.Get(hooks.HeaderSignature)), []byte(hooks.Sign(r.secret, body))),
	}
	_ = json.Unmarshal(body, &d.env)
	r.mu.Lock()
	r.tries[d.id]++
	d.status = http.StatusOK
	if r.respond != nil {
		d.status = r.respond(d.id, r.tries[d.id])
	}
	r.got = append(r.got, d)
	r.mu.Unlock()
	select {
	case r.seen <- struct{}{}:
	default:
	}
	w.WriteHeader(d.status)
}

// accepted returns the deliveries answered 2xx.
func (r *receiver) accepted() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []delivery
	for _, d := range r.got {
		if d.status/100 == 2 {
			out = append(out, d)
		}
	}
	return out
}

func (r *receiver) all() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// waitFor waits (bounded) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// acceptedIDs is the set of ids a receiver accepted.
func acceptedIDs(r *receiver) map[string]int {
	out := map[string]int{}
	for _, d := range r.accepted() {
		out[d.id]++
	}
	return out
}

func hasAll(got map[string]int, ids []string) bool {
	for _, id := range ids {
		if got[id] == 0 {
			return false
		}
	}
	return true
}

// runRouter runs a router until the test ends, and returns a stop function
// that ends it and reports Run's result.
func runRouter(t *testing.T, r *hooks.Router) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(waitLimit):
				err = errors.New("Run did not return after cancel")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func TestRouter_DeliversEveryEventSigned(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, filepath.Join(dir, "events.db"))
	before := appendEvents(t, store, 25)

	all := newReceiver(t, secret, nil)
	touched := newReceiver(t, "", nil)
	r, err := hooks.New(store, hooks.Config{
		Dir: filepath.Join(dir, "hooks"),
		Webhooks: []hooks.WebhookConfig{
			{Name: "all", URL: all.srv.URL, Secret: secret},
			{Name: "touched", URL: touched.srv.URL, EventTypes: []string{"lane.touched"}},
		},
		BatchSize: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runRouter(t, r)
	after := appendEvents(t, store, 10) // live, while the router runs
	ids := append(before, after...)

	waitFor(t, "every event at the first receiver", func() bool { return hasAll(acceptedIDs(all), ids) })
	head, _ := store.Head(context.Background())
	waitFor(t, "the checkpoint to reach the head", func() bool {
		cp, err := r.Checkpoint()
		return err == nil && cp == head
	})
	if err := stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}

	envs, err := store.ReadAll(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]events.Envelope{}
	for _, env := range envs {
		byID[env.ID] = env
	}
	var last uint64
	for _, d := range all.accepted() {
		env := byID[d.id]
		if !d.signed {
			t.Errorf("delivery of %s: signature does not match the body", d.id)
		}
		if d.typ != env.Type || d.env.Type != env.Type || d.env.ID != env.ID || d.env.Stream != env.Stream ||
			d.env.Position != env.Position || d.env.Version != env.Version || d.env.SchemaVersion != events.SchemaVersionOf(env.Type) {
			t.Errorf("delivery %+v does not match the stored event %+v", d, env)
		}
		if _, err := events.Decode(d.env.Type, d.env.Data); err != nil {
			t.Errorf("delivery %s: data does not decode: %v", d.id, err)
		}
		if _, err := strconv.ParseInt(d.timestamp, 10, 64); err != nil {
			t.Errorf("delivery %s: timestamp %q", d.id, d.timestamp)
		}
		if d.env.Position <= last {
			t.Errorf("delivery out of log order: position %d after %d", d.env.Position, last)
		}
		last = d.env.Position
	}
	// The filtered webhook got exactly the touched events, unsigned.
	for _, d := range touched.accepted() {
		if d.typ != events.TypeTouched {
			t.Errorf("filtered webhook got a %s", d.typ)
		}
	}
	wantTouched := 0
	for _, env := range envs {
		if env.Type == events.TypeTouched {
			wantTouched++
		}
	}
	if n := len(touched.accepted()); n != wantTouched {
		t.Errorf("filtered webhook got %d events, want %d", n, wantTouched)
	}
}

func TestRouter_RetriesWithBackoff(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, filepath.Join(dir, "events.db"))
	ids := appendEvents(t, store, 6)
	flaky := newReceiver(t, secret, func(_ string, n int) int {
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	r, err := hooks.New(store, hooks.Config{
		Dir:      dir,
		Webhooks: []hooks.WebhookConfig{{Name: "flaky", URL: flaky.srv.URL, Secret: secret, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runRouter(t, r)
	waitFor(t, "every event after retries", func() bool { return hasAll(acceptedIDs(flaky), ids) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if n := flaky.triesOf(id); n != 3 {
			t.Errorf("event %s: %d attempts, want 3 (two failures, then success)", id, n)
		}
	}
	if recs, err := hooks.ReadPoisonLog(dir); err != nil || len(recs) != 0 {
		t.Fatalf("poison log = %+v, %v; want empty", recs, err)
	}
}

func TestRouter_PoisonsAndMovesOn(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, filepath.Join(dir, "events.db"))
	ids := appendEvents(t, store, 5)
	broken := newReceiver(t, secret, func(string, int) int { return http.StatusInternalServerError })
	refusing := newReceiver(t, secret, func(string, int) int { return http.StatusBadRequest })
	healthy := newReceiver(t, secret, nil)
	r, err := hooks.New(store, hooks.Config{
		Dir: dir,
		Webhooks: []hooks.WebhookConfig{
			{Name: "broken", URL: broken.srv.URL, Secret: secret, MaxRetries: 2, Backoff: time.Millisecond},
			{Name: "refusing", URL: refusing.srv.URL, Secret: secret, MaxRetries: 2, Backoff: time.Millisecond},
			{Name: "healthy", URL: healthy.srv.URL, Secret: secret},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runRouter(t, r)
	more := appendEvents(t, store, 3)
	ids = append(ids, more...)
	waitFor(t, "the healthy webhook to get everything", func() bool { return hasAll(acceptedIDs(healthy), ids) })
	head, _ := store.Head(context.Background())
	waitFor(t, "the checkpoint to pass the poisoned events", func() bool {
		cp, err := r.Checkpoint()
		return err == nil && cp == head
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	recs, err := hooks.ReadPoisonLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	poisoned := map[string]map[string]hooks.PoisonRecord{}
	for _, rec := range recs {
		if poisoned[rec.Webhook] == nil {
			poisoned[rec.Webhook] = map[string]hooks.PoisonRecord{}
		}
		poisoned[rec.Webhook][rec.EventID] = rec
	}
	for _, id := range ids {
		b, ok := poisoned["broken"][id]
		if !ok || b.Attempts != 3 || b.Error == "" || b.Type == "" || b.Position == 0 || len(b.Envelope) == 0 {
			t.Errorf("poison record of %s for broken = %+v, want one after 3 attempts", id, b)
		}
		if n := broken.triesOf(id); n != 3 {
			t.Errorf("broken webhook tried %s %d times, want 3", id, n)
		}
		// A 400 is not retried.
		if rf, ok := poisoned["refusing"][id]; !ok || rf.Attempts != 1 || refusing.triesOf(id) != 1 {
			t.Errorf("poison record of %s for refusing = %+v (tries %d), want one after 1 attempt", id, rf, refusing.triesOf(id))
		}
	}
	if len(recs) != 2*len(ids) {
		t.Errorf("poison log has %d records, want %d", len(recs), 2*len(ids))
	}
	st, err := os.Stat(filepath.Join(dir, hooks.PoisonFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("poison log mode = %v, %v; want 0600", st.Mode(), err)
	}
}

func TestRouter_ResumesFromCheckpoint(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, filepath.Join(dir, "events.db"))
	first := appendEvents(t, store, 7)
	rcv := newReceiver(t, secret, nil)
	cfg := hooks.Config{Dir: dir, Webhooks: []hooks.WebhookConfig{{Name: "rcv", URL: rcv.srv.URL, Secret: secret}}}

	r, err := hooks.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runRouter(t, r)
	head, _ := store.Head(context.Background())
	waitFor(t, "the first run to finish", func() bool {
		cp, _ := r.Checkpoint()
		return cp == head
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	second := appendEvents(t, store, 4)

	r2, err := hooks.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop2 := runRouter(t, r2)
	waitFor(t, "the second run to deliver", func() bool { return hasAll(acceptedIDs(rcv), second) })
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	got := acceptedIDs(rcv)
	for _, id := range append(first, second...) {
		if got[id] != 1 {
			t.Errorf("event %s delivered %d times across a clean restart, want 1", id, got[id])
		}
	}
}

func TestRouter_StartAtHead(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, filepath.Join(dir, "events.db"))
	old := appendEvents(t, store, 5)
	rcv := newReceiver(t, "", nil)
	r, err := hooks.New(store, hooks.Config{
		Dir: dir, StartAtHead: true,
		Webhooks: []hooks.WebhookConfig{{Name: "rcv", URL: rcv.srv.URL}},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runRouter(t, r)
	head, _ := store.Head(context.Background())
	waitFor(t, "the starting checkpoint", func() bool {
		cp, err := r.Checkpoint()
		return err == nil && cp == head
	})
	fresh := appendEvents(t, store, 2)
	waitFor(t, "the new events", func() bool { return hasAll(acceptedIDs(rcv), fresh) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := acceptedIDs(rcv)
	for _, id := range old {
		if got[id] != 0 {
			t.Errorf("history event %s delivered with StartAtHead", id)
		}
	}
}

func TestRouter_Finalize(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, filepath.Join(dir, "events.db"))
	plugin := newReceiver(t, secret, nil)
	everything := newReceiver(t, secret, nil)
	cfg := hooks.Config{
		Dir: dir,
		Webhooks: []hooks.WebhookConfig{
			{Name: "plugin", URL: plugin.srv.URL, Secret: secret, EventTypes: []string{hooks.FinalizeEventType}},
			{Name: "everything", URL: everything.srv.URL, Secret: secret},
		},
		Now: func() time.Time { return t0 },
	}
	r, err := hooks.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	req := commands.FinalizeRequest{SessionKey: "agent:main:telegram:dm:1", SessionID: "20260509_100000_abcdef01", Platform: "telegram", Reason: commands.FinalizeReasonExpired}
	ctx := context.Background()
	for range 2 {
		if err := r.Finalize(ctx, req); err != nil {
			t.Fatalf("Finalize = %v", err)
		}
	}
	got := plugin.all()
	if len(got) != 2 || len(everything.all()) != 0 {
		t.Fatalf("plugin got %d, everything got %d; want 2 and 0 (finalize must be listed)", len(got), len(everything.all()))
	}
	if got[0].id == "" || got[0].id != got[1].id || got[0].typ != hooks.FinalizeEventType || !got[0].signed {
		t.Fatalf("finalize deliveries = %+v, want the same id twice, signed", got)
	}

	failing := newReceiver(t, secret, func(string, int) int { return http.StatusBadGateway })
	cfg.Webhooks = append(cfg.Webhooks, hooks.WebhookConfig{Name: "failing", URL: failing.srv.URL, EventTypes: []string{"session."}})
	r, err = hooks.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = r.Finalize(ctx, req)
	var se *hooks.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusBadGateway {
		t.Fatalf("Finalize with a failing webhook = %v, want its 502", err)
	}
}

func TestRouter_FinalizeBody(t *testing.T) {
	var body hooks.FinalizePayload
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&body)
	}))
	defer srv.Close()
	r, err := hooks.New(nil, hooks.Config{
		Dir:      t.TempDir(),
		Webhooks: []hooks.WebhookConfig{{Name: "p", URL: srv.URL, EventTypes: []string{"session.finalize"}}},
		Now:      func() time.Time { return t0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	req := commands.FinalizeRequest{SessionKey: "k", SessionID: "s", Platform: "discord", Reason: "session_expired"}
	if err := r.Finalize(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	want := hooks.FinalizeData{SessionKey: "k", SessionID: "s", Platform: "discord", Reason: "session_expired"}
	if body.Type != "session.finalize" || body.Data != want || body.Time == nil || *body.Time != "2026-05-09T10:00:00.000000Z" {
		t.Fatalf("finalize body = %+v", body)
	}
}

func TestWebhookConfig_Wants(t *testing.T) {
	for _, tc := range []struct {
		types []string
		typ   string
		want  bool
	}{
		{nil, events.TypeTouched, true},
		{nil, hooks.FinalizeEventType, false},
		{[]string{"lane."}, events.TypeTouched, true},
		{[]string{"lane.*"}, events.TypeTouched, true},
		{[]string{"lane."}, events.TypeTitleSet, false},
		{[]string{"lane.suspended"}, "lane.suspended.v2", true},
		{[]string{"lane.suspended"}, "lane.suspended_x.v1", false},
		{[]string{"lane.touched.v1"}, events.TypeTouched, true},
		{[]string{"lane"}, events.TypeTouched, false},
		{[]string{"session.finalize"}, hooks.FinalizeEventType, true},
	} {
		w := hooks.WebhookConfig{EventTypes: tc.types}
		if got := w.Wants(tc.typ); got != tc.want {
			t.Errorf("WebhookConfig{EventTypes: %q}.Wants(%q) = %v, want %v", tc.types, tc.typ, got, tc.want)
		}
	}
}

func TestNew_RejectsBadConfig(t *testing.T) {
	for _, cfg := range []hooks.Config{
		{},
		{Dir: t.TempDir(), Webhooks: []hooks.WebhookConfig{{Name: "a", URL: "ftp://x"}}},
		{Dir: t.TempDir(), Webhooks: []hooks.WebhookConfig{{URL: "http://127.0.0.1:1"}}},
		{Dir: t.TempDir(), Webhooks: []hooks.WebhookConfig{{Name: "a", URL: "http://127.0.0.1:1"}, {Name: "a", URL: "http://127.0.0.1:2"}}},
	} {
		if _, err := hooks.New(nil, cfg); err == nil {
			t.Errorf("New(%+v) accepted a bad config", cfg)
		}
	}
}

func (r *receiver) triesOf(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tries[id]
}

// TestRouter_StopDuringRetries stops the router while it waits to retry a
// failing webhook: Run returns at once, nothing is poisoned, and the event
// is not behind the checkpoint (it will be delivered after a restart).
func TestRouter_StopDuringRetries(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, filepath.Join(dir, "events.db"))
	appendEvents(t, store, 1)
	down := newReceiver(t, "", func(string, int) int { return http.StatusServiceUnavailable })
	r, err := hooks.New(store, hooks.Config{
		Dir:      dir,
		Webhooks: []hooks.WebhookConfig{{Name: "down", URL: down.srv.URL, Backoff: time.Hour}},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runRouter(t, r)
	waitFor(t, "the first attempt", func() bool { return len(down.all()) == 1 })
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("stop took %v while a retry was pending", d)
	}
	if cp, err := r.Checkpoint(); err != nil || cp != 0 {
		t.Fatalf("checkpoint = %d, %v; want 0 (the event was never delivered)", cp, err)
	}
	if recs, _ := hooks.ReadPoisonLog(dir); len(recs) != 0 {
		t.Fatalf("poison log = %+v, want empty: a stop is not a failure", recs)
	}
}

// TestRouter_TakeoverFromSharedCheckpoint: a router of another home (a new
// holder of the leader lease) moved to the checkpoint the previous holder
// recorded delivers only what came after it, and lease events are never
// delivered.
func TestRouter_TakeoverFromSharedCheckpoint(t *testing.T) {
	ctx := context.Background()
	dirA, dirB := t.TempDir(), t.TempDir()
	store := openStore(t, filepath.Join(dirA, "events.db"))
	first := appendEvents(t, store, 5)
	rcv := newReceiver(t, "", nil)
	webhooks := []hooks.WebhookConfig{{Name: "rcv", URL: rcv.srv.URL}}
	a, err := hooks.New(store, hooks.Config{Dir: dirA, Webhooks: webhooks})
	if err != nil {
		t.Fatal(err)
	}
	stop := runRouter(t, a)
	headA, _ := store.Head(ctx)
	waitFor(t, "the first holder to deliver and record it", func() bool {
		cp, _ := a.Checkpoint()
		return cp == headA
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	delivered, err := a.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	lease := events.LeaseReleased{Holder: "a", Delivered: delivered, At: time.Now()}
	if _, err := store.Append(ctx, events.LeaderLease, events.AnyVersion(), []events.Proposed{{ID: uuid.NewString(), Event: lease}}); err != nil {
		t.Fatal(err)
	}
	second := appendEvents(t, store, 3)

	if err := hooks.AdvanceCheckpoint(dirB, delivered); err != nil {
		t.Fatal(err)
	}
	if err := hooks.AdvanceCheckpoint(dirB, delivered-1); err != nil {
		t.Fatal(err)
	}
	if cp, ok, err := hooks.ReadCheckpoint(dirB); err != nil || !ok || cp != delivered {
		t.Fatalf("checkpoint after advancing to %d then back = %d, %v, %v; want %d", delivered, cp, ok, err, delivered)
	}
	b, err := hooks.New(store, hooks.Config{Dir: dirB, StartAtHead: true, Webhooks: webhooks})
	if err != nil {
		t.Fatal(err)
	}
	stop = runRouter(t, b)
	head, _ := store.Head(ctx)
	waitFor(t, "the new holder to deliver", func() bool {
		cp, _ := b.Checkpoint()
		return cp == head
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := acceptedIDs(rcv)
	for _, id := range append(first, second...) {
		if got[id] != 1 {
			t.Errorf("event %s delivered %d times across the takeover, want 1", id, got[id])
		}
	}
	if len(got) != len(first)+len(second) {
		t.Errorf("delivered %d distinct events, want %d (the lease event is not delivered)", len(got), len(first)+len(second))
	}
}

// lockedBuffer is a log destination safe for the router's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRouter_MayActHoldsRequestsBack: while Config.MayAct refuses (the
// node no longer leads by its clock), no request is sent; a stop then
// leaves the events unacknowledged and unpoisoned, and a router allowed to
// act delivers them.
func TestRouter_MayActHoldsRequestsBack(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, filepath.Join(dir, "events.db"))
	ids := appendEvents(t, store, 3)
	rcv := newReceiver(t, "", nil)
	logs := &lockedBuffer{}
	var mu sync.Mutex
	allowed := false
	cfg := hooks.Config{
		Dir:      dir,
		Webhooks: []hooks.WebhookConfig{{Name: "r", URL: rcv.srv.URL}},
		Log:      slog.New(slog.NewTextHandler(logs, nil)),
		MayAct: func() error {
			mu.Lock()
			defer mu.Unlock()
			if !allowed {
				return errors.New("not the leader")
			}
			return nil
		},
	}
	r, err := hooks.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runRouter(t, r)
	waitFor(t, "a request held back", func() bool { return strings.Contains(logs.String(), "held back") })
	if err := stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if got := rcv.all(); len(got) != 0 {
		t.Fatalf("receiver got %d requests while MayAct refused, want 0", len(got))
	}
	if cp, err := r.Checkpoint(); err != nil || cp != 0 {
		t.Fatalf("checkpoint = %d, %v; want 0", cp, err)
	}
	if recs, _ := hooks.ReadPoisonLog(dir); len(recs) != 0 {
		t.Fatalf("poison log = %+v, want empty: a held-back request is not a failure", recs)
	}

	mu.Lock()
	allowed = true
	mu.Unlock()
	r2, err := hooks.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runRouter(t, r2)
	waitFor(t, "every event once allowed", func() bool { return hasAll(acceptedIDs(rcv), ids) })
}
