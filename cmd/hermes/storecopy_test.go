package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"hermes/adapters/eventstore/postgres"
	"hermes/adapters/eventstore/sqlite"
	"hermes/events"
	"hermes/node"
	"hermes/testfixtures"
	emulator "hermes/testfixtures/kurrentdb"
	"hermes/testfixtures/ondisk"
	pgtest "hermes/testfixtures/postgres"

	"github.com/google/go-cmp/cmp"
)

// copySource is a home whose log a copy test moves: lanes with
// transcripts, a transcript deleted (its messages held erased), and what
// hermes serve answered on it.
type copySource struct {
	home    string
	erased  string
	answers map[string]json.RawMessage
}

// answerPaths are the reads compared between a log and its copies.
func answerPaths(sids []string) []string {
	paths := []string{"/v1/sessions", "/v1/lanes", "/v1/transcripts", "/v1/export", "/v1/search?q=copyword",
		"/v1/search?q=" + url.QueryEscape("alpha2 OR beta"), "/v1/stats/messages"}
	for _, sid := range sids {
		paths = append(paths, "/v1/transcripts/"+sid+"/export", "/v1/transcripts/"+sid+"/messages")
	}
	return paths
}

func newCopySource(t *testing.T) copySource {
	t.Helper()
	c := copySource{home: filepath.Join(t.TempDir(), "source"), erased: ondisk.RandomMarker(t, "copyerased")}
	s := startServer(t, c.home, nil)
	var sids []string
	for i := range 6 {
		var r resolved
		s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram",
			"chat_id": fmt.Sprintf("chat-%d", i), "chat_type": "dm", "user_id": fmt.Sprintf("user-%d", i), "user_name": fmt.Sprintf("User %d", i)}}, &r)
		tr := "/v1/transcripts/" + r.Entry.SessionID + "/messages"
		text := fmt.Sprintf("copyword alpha%d beta", i)
		if i == 3 {
			text = "copyword " + c.erased
		}
		s.must("POST", tr, map[string]any{"role": "user", "content": text}, nil)
		s.must("POST", tr, map[string]any{"role": "assistant", "content": "an answer about " + text}, nil)
		if i == 3 {
			s.must("DELETE", "/v1/transcripts/"+r.Entry.SessionID, nil, nil)
			continue
		}
		sids = append(sids, r.Entry.SessionID)
	}
	c.answers = answers(t, s, answerPaths(sids))
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("hermes serve exited %d:\n%s", code, s.stderr.String())
	}
	return c
}

// answers reads every path from s, as JSON re-encoded with sorted keys.
// GET /v1/lanes' "now" is the time of the request and its "head" the
// store's own position (each store draws its own, and each server appends
// its gateway events): they are left out.
func answers(t *testing.T, s *server, paths []string) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	for _, p := range paths {
		var v any
		s.must("GET", p, nil, &v)
		if m, ok := v.(map[string]any); ok && p == "/v1/lanes" {
			delete(m, "now")
			delete(m, "head")
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = b
	}
	return out
}

// serveSame starts hermes serve on home (with env) and checks that it
// answers what the source's server did.
func (c copySource) serveSame(t *testing.T, home string, env []string) {
	t.Helper()
	s := startServer(t, home, env)
	paths := make([]string, 0, len(c.answers))
	for p := range c.answers {
		paths = append(paths, p)
	}
	got := answers(t, s, paths)
	for _, p := range paths {
		if !bytes.Equal(got[p], c.answers[p]) {
			t.Errorf("GET %s on the copy differs from the original (-original +copy):\n%s", p, cmp.Diff(string(c.answers[p]), string(got[p])))
		}
	}
	if bytes.Contains(got["/v1/export"], []byte(c.erased)) {
		t.Errorf("the copy's export holds the erased marker")
	}
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("hermes serve on the copy exited %d:\n%s", code, s.stderr.String())
	}
}

// TestStoreCopyServesTheSame copies a log made by hermes serve from
// SQLite to PostgreSQL, from there back to SQLite, and from SQLite to a
// KurrentDB (the emulator): hermes serve on each copy answers the same
// sessions, lanes, transcripts, exports and searches as on the original;
// the transcript deleted before the copy is in no copy; a second copy
// writes nothing.
func TestStoreCopyServesTheSame(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hermes serve processes")
	}
	src := newCopySource(t)
	pgURL := pgtest.Shared(t).NewDatabase(t)

	out, _ := hermes(t, 0, "store", "copy", "--from", src.home, "--to", pgURL)
	if !strings.HasPrefix(out, "copied ") || strings.HasPrefix(out, "copied 0 ") || !strings.Contains(out, "(0 already there)") || !strings.Contains(out, "\nok: verified ") {
		t.Fatalf("first copy said:\n%s", out)
	}
	out, _ = hermes(t, 0, "store", "copy", "--from", src.home, "--to", pgURL)
	if !strings.HasPrefix(out, "copied 0 events") || !strings.Contains(out, "\nok: verified ") {
		t.Errorf("second copy said:\n%s", out)
	}
	pg, err := postgres.Open(t.Context(), pgURL, postgres.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	recs, err := pg.ReadRecords(t.Context(), 0, 100_000)
	pg.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if bytes.Contains(r.Data, []byte(src.erased)) {
			t.Fatalf("the PostgreSQL copy holds the erased marker in %s@%d", r.Stream, r.Version)
		}
	}
	src.serveSame(t, filepath.Join(t.TempDir(), "on-postgres"), []string{"HERMES_STORE_URL=" + pgURL})

	back := filepath.Join(t.TempDir(), "back")
	hermes(t, 0, "store", "copy", "--from", pgURL, "--to", back)
	src.serveSame(t, back, nil)
	if found := filesHolding(t, back, src.erased); len(found) > 0 {
		t.Errorf("the SQLite copy's home holds the erased marker in %v", found)
	}

	kdb, err := emulator.Start(emulator.WithMaxAppendSize(8 << 20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kdb.Close() })
	hermes(t, 0, "store", "copy", "--from", src.home, "--to", kdb.URL())
	out, _ = hermes(t, 0, "store", "copy", "--from", src.home, "--to", kdb.URL())
	if !strings.HasPrefix(out, "copied 0 events") {
		t.Errorf("second copy to KurrentDB said:\n%s", out)
	}
	src.serveSame(t, filepath.Join(t.TempDir(), "on-kurrentdb"), []string{"HERMES_STORE_URL=" + kdb.URL()})
}

// TestStoreCopyRefusesAnotherLog: a target home with a log of its own is
// refused with a message that says so, and its log is unchanged.
func TestStoreCopyRefusesAnotherLog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hermes serve processes")
	}
	src := newCopySource(t)
	other := filepath.Join(t.TempDir(), "other")
	s := startServer(t, other, nil)
	s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": "9", "chat_type": "dm"}}, nil)
	s.stop(syscall.SIGTERM)
	before := recordsOf(t, node.Home{Dir: other}.EventsDB())

	_, stderr := hermes(t, 1, "store", "copy", "--from", src.home, "--to", other)
	if !strings.Contains(stderr, "is not an earlier copy of the source") || !strings.Contains(stderr, "nothing was written") {
		t.Errorf("the refusal said:\n%s", stderr)
	}
	if diff := cmp.Diff(before, recordsOf(t, node.Home{Dir: other}.EventsDB())); diff != "" {
		t.Errorf("the refused target's log changed (-before +after):\n%s", diff)
	}
	_, stderr = hermes(t, 2, "store", "copy", "--from", src.home)
	if !strings.Contains(stderr, "needs --from and --to") {
		t.Errorf("without --to: %s", stderr)
	}
}

func recordsOf(t *testing.T, path string) []events.Record {
	t.Helper()
	s, err := sqlite.Open(path, sqlite.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.ReadRecords(t.Context(), 0, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestStoreCopyKilledHalfWay SIGKILLs a copy to PostgreSQL once part of
// the log is there; the same command then copies the rest, and only the
// rest, and verifies the whole.
func TestStoreCopyKilledHalfWay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs hermes store copy processes")
	}
	const n = 20_000
	home := node.Home{Dir: filepath.Join(t.TempDir(), "source")}
	if err := home.Ensure(); err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(home.EventsDB())
	if err != nil {
		t.Fatal(err)
	}
	o := testfixtures.HistoryOptions{Events: n, Lanes: 200, Seed: 3, Start: testfixtures.Date(2026, 1, 1, 0, 0, 0, 0)}
	if err := testfixtures.LoadHistory(t.Context(), store, o, 8); err != nil {
		t.Fatal(err)
	}
	total, err := store.Head(t.Context())
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
	pgURL := pgtest.Shared(t).NewDatabase(t)

	cmd := exec.Command(binary, "store", "copy", "--from", home.Dir, "--to", pgURL, "--batch", "50")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	copied := func() int64 {
		var c int64
		s, err := postgres.Open(context.Background(), pgURL, postgres.WithReadOnly())
		if err != nil {
			return 0 // the copy has not created the schema yet
		}
		defer s.Close()
		recs, err := s.ReadRecords(context.Background(), 0, n+1)
		if err == nil {
			c = int64(len(recs))
		}
		return c
	}
	deadline := time.Now().Add(2 * time.Minute)
	for copied() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the copy wrote nothing in 2 minutes:\n%s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	part := copied()
	if part <= 0 || part >= int64(total) {
		t.Fatalf("after the kill the target holds %d of %d events, want a part", part, total)
	}

	t.Logf("killed with %d of %d events on the target", part, total)
	out, _ := hermes(t, 0, "store", "copy", "--from", home.Dir, "--to", pgURL)
	want := fmt.Sprintf("copied %d events from %s to %s (%d already there)", int64(total)-part, home.EventsDB(), node.StoreSpec{URL: pgURL}, part)
	if !strings.HasPrefix(out, want) || !strings.Contains(out, fmt.Sprintf("ok: verified %d events", total)) {
		t.Errorf("the copy after the kill said:\n%s\nwant it to begin %q and verify %d events", out, want, total)
	}
}

// BenchmarkStoreCopy measures hermes store copy (the command, as a
// process) of a generated SQLite log (the history of BenchmarkRebuild,
// HERMES_BENCH_EVENTS events, default 100000) into an empty PostgreSQL
// database of the tests' cluster, verification included, then a second
// run, which copies nothing and verifies again.
//
//	HERMES_BENCH_EVENTS=1000000 go test -run '^$' -bench StoreCopy -benchtime=1x -timeout 60m ./cmd/hermes
func BenchmarkStoreCopy(b *testing.B) {
	n := benchDurableEvents()
	ctx := context.Background()
	h := node.Home{Dir: b.TempDir()}
	if err := h.Ensure(); err != nil {
		b.Fatal(err)
	}
	store, err := sqlite.Open(h.EventsDB())
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	o := testfixtures.HistoryOptions{Events: n, Lanes: max(100, n/100), Seed: 42, Start: testfixtures.Date(2026, 1, 1, 0, 0, 0, 0), CJKShare: 0.2}
	if err := testfixtures.LoadHistory(ctx, store, o, 64); err != nil {
		b.Fatal(err)
	}
	if err := store.Close(); err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %d events in %s", n, time.Since(start).Round(time.Millisecond))
	cluster := pgtest.Shared(b)
	run := func(args ...string) (string, time.Duration) {
		began := time.Now()
		cmd := exec.Command(binary, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("hermes %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String(), time.Since(began)
	}
	b.ResetTimer()
	for range b.N {
		target := cluster.NewDatabase(b)
		out, took := run("store", "copy", "--from", h.Dir, "--to", target)
		b.Logf("first run (%s): %s", took.Round(time.Millisecond), out)
		b.ReportMetric(float64(n)/took.Seconds(), "events/s")
		b.ReportMetric(took.Seconds(), "copy-s")
		out, took = run("store", "copy", "--from", h.Dir, "--to", target)
		if !strings.HasPrefix(out, "copied 0 events") {
			b.Fatalf("the second run copied something: %s", out)
		}
		b.Logf("second run (%s): %s", took.Round(time.Millisecond), out)
		b.ReportMetric(took.Seconds(), "second-run-s")
	}
}
