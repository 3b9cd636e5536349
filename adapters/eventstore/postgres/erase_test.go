package postgres

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"hermes/events"
	pgtest "hermes/testfixtures/postgres"

	"github.com/jackc/pgx/v5"
)

// Markers of the erasure tests: inline is in a row of the events table,
// toasted in a message big (and random) enough to be kept uncompressed in
// the table's TOAST table, kept in a stream that is not erased.
const (
	markerInline  = "pg-erase-marker-inline-5e1f"
	markerToasted = "pg-erase-marker-toasted-c0d3"
	markerKept    = "pg-kept-marker-9b2a"
)

func message(id, sid, text string) events.Proposed {
	return events.Proposed{ID: id, Event: events.MessageAppended{SessionID: sid, At: t0,
		Message: events.Message{Role: "user", Content: json.RawMessage(`"` + text + `"`)}}}
}

func noise(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func deleteAndErase(sid string) []events.Proposed {
	return []events.Proposed{
		{ID: "del-" + sid, Event: events.TranscriptDeleted{SessionID: sid, Reason: events.DeleteRequested, At: t0}},
		{ID: "erase-" + sid, Event: events.TranscriptErased{SessionID: sid, Scope: events.EraseTranscript, Reason: events.ErasureOnRequest, At: t0}},
	}
}

// erasedHistory appends the markers' messages, a snapshot of the erased
// stream, and the erasure of transcript-a.
func erasedHistory(t *testing.T, s *Store) events.AppendResult {
	t.Helper()
	res := mustAppend(t, s, "transcript-a", events.NoStream(), []events.Proposed{
		message("m-a-1", "a", markerInline),
		message("m-a-2", "a", markerToasted+" "+noise(8<<10)),
	})
	mustAppend(t, s, "transcript-b", events.NoStream(), []events.Proposed{message("m-b-1", "b", markerKept)})
	if err := s.WriteSnapshot(t.Context(), events.Snapshot{Stream: "transcript-a", Schema: 1, Version: 2, EventID: "m-a-2", Data: []byte(markerInline)}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "transcript-a", events.ExactVersion(2), deleteAndErase("a"))
	return res
}

func TestEraseRewritesEarlierEvents(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	before := erasedHistory(t, s)
	envs, err := s.ReadStream(ctx, "transcript-a", 1, 10, events.Forwards)
	if err != nil || len(envs) != 4 {
		t.Fatalf("ReadStream = %d events, %v", len(envs), err)
	}
	for i, e := range envs[:2] {
		if e.Position != before.Positions[i] || e.Version != uint64(i+1) || e.ID != []string{"m-a-1", "m-a-2"}[i] {
			t.Errorf("erased event %d moved: %+v", i, e)
		}
		if e.Metadata.Redacted != "erase-a" {
			t.Errorf("event %d Metadata.Redacted = %q, want erase-a", i, e.Metadata.Redacted)
		}
		if m := e.Event.(events.MessageAppended).Message; len(m.Content) != 0 || m.Role != "user" {
			t.Errorf("erased message %d = %+v, want its role only", i, m)
		}
	}
	other, err := s.ReadStream(ctx, "transcript-b", 1, 1, events.Forwards)
	if err != nil || other[0].Metadata.Redacted != "" || !strings.Contains(string(other[0].Event.(events.MessageAppended).Message.Content), markerKept) {
		t.Fatalf("the other stream changed: %+v, %v", other, err)
	}
	if _, err := s.ReadSnapshot(ctx, "transcript-a"); !errors.Is(err, events.ErrSnapshotNotFound) {
		t.Errorf("ReadSnapshot after the erasure error = %v, want ErrSnapshotNotFound", err)
	}
	again, err := s.Append(ctx, "transcript-a", events.AnyVersion(), deleteAndErase("a"))
	if err != nil || !again.Duplicate {
		t.Errorf("the erasure again = %+v, %v; want a duplicate", again, err)
	}
}

// cluster returns the shared cluster, skipping tests that read its files
// when it is an external server.
func localCluster(t *testing.T) *pgtest.Cluster {
	t.Helper()
	c := pgtest.Shared(t)
	if c.External() {
		t.Skip("the files of an external server cannot be read by the tests")
	}
	return c
}

// superuser runs sql as the cluster's superuser in the database of url.
func superuser(t *testing.T, c *pgtest.Cluster, db, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), c.DatabaseURL(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// holding returns the files under dir (but not under any of skip) whose
// bytes hold one of needles, after a checkpoint has written every page
// of the database.
func holding(t *testing.T, c *pgtest.Cluster, db, dir string, skip []string, needles ...string) []string {
	t.Helper()
	superuser(t, c, db, "CHECKPOINT")
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a file removed while walking
			}
			return err
		}
		for _, s := range skip {
			if path == s {
				return filepath.SkipDir
			}
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, n := range needles {
			if bytes.Contains(b, []byte(n)) {
				found = append(found, strings.TrimPrefix(path, c.DataDir())+" holds "+n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestPurgeLeavesNoTraceInTheDataFiles: after an erasure and Purge, no
// file of the cluster's data directory (its tables, TOAST tables,
// indexes, free space maps, the other databases) holds the erased text;
// the text of the stream not erased is still found, so the search reads
// the right files. The write-ahead log is out of hermes' reach (package
// doc); what it holds is logged.
func TestPurgeLeavesNoTraceInTheDataFiles(t *testing.T) {
	c := localCluster(t)
	dbURL := c.NewDatabase(t)
	db := databaseOf(t, dbURL)
	s := openAt(t, schemaOn(t, dbURL))
	erasedHistory(t, s)
	data, wal := c.DataDir(), filepath.Join(c.DataDir(), "pg_wal")
	if got := holding(t, c, db, data, []string{wal}, markerInline, markerToasted); len(got) == 0 {
		t.Fatal("control: before the purge the old row versions hold the markers, but no file does: the search reads the wrong files")
	}
	if err := s.Purge(t.Context()); err != nil {
		t.Fatalf("Purge() error = %v", err)
	}
	if got := holding(t, c, db, data, []string{wal}, markerInline, markerToasted); len(got) > 0 {
		t.Errorf("after Purge: %s", strings.Join(got, "; "))
	}
	if got := holding(t, c, db, data, []string{wal}, markerKept); len(got) == 0 {
		t.Errorf("the stream not erased is in no file: the search reads the wrong files")
	}
	t.Logf("out of reach, in pg_wal until its segments are recycled: %v", holding(t, c, db, wal, nil, markerInline, markerToasted))
}

// interleavedHistory appends 10 transcripts of 200 messages, taking
// turns, each message of transcript-t3 holding markerInline, then erases
// transcript-t3: its old row versions are spread over every page of the
// table, between rows that stay.
func interleavedHistory(t *testing.T, s *Store) {
	t.Helper()
	for i := range 200 {
		_, err := s.AppendBatch(t.Context(), func(yield func(events.StreamAppend) bool) {
			for k := range 10 {
				sid := fmt.Sprintf("t%d", k)
				text := "kept text of a message"
				if k == 3 {
					text = markerInline
				}
				if !yield(events.StreamAppend{Stream: "transcript-" + sid, Expected: events.ExactVersion(uint64(i)),
					Proposed: []events.Proposed{message(fmt.Sprintf("m-%s-%d", sid, i), sid, text)}}) {
					return
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, s, "transcript-t3", events.ExactVersion(200), deleteAndErase("t3"))
}

// TestPurge_PlainVacuumLeavesTheBytes is why Purge rewrites the tables: a
// plain VACUUM removes the old row versions from the table (no query can
// read them), but when it compacts a page it leaves the bytes of some of
// them in the page's free space. (Which ones depends on where they lay:
// the layout of a fresh table is the same on every run.)
func TestPurge_PlainVacuumLeavesTheBytes(t *testing.T) {
	c := localCluster(t)
	dbURL := c.NewDatabase(t)
	db := databaseOf(t, dbURL)
	s := openAt(t, schemaOn(t, dbURL))
	interleavedHistory(t, s)
	superuser(t, c, db, "VACUUM "+s.sql.schema+".events, "+s.sql.schema+".snapshots")
	wal := filepath.Join(c.DataDir(), "pg_wal")
	if got := holding(t, c, db, c.DataDir(), []string{wal}, markerInline); len(got) == 0 {
		t.Errorf("after a plain VACUUM no file holds %s; Purge may not need to rewrite the tables", markerInline)
	}
	if err := s.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := holding(t, c, db, c.DataDir(), []string{wal}, markerInline); len(got) > 0 {
		t.Errorf("after Purge: %s", strings.Join(got, "; "))
	}
}

// TestPurgeWaitsForOlderSnapshots: a session whose snapshot predates the
// erasure could still read the old row versions, and a rewrite keeps them
// for it (shown below by rewriting anyway): Purge waits for it, and says
// who it waits for when its context ends first.
func TestPurgeWaitsForOlderSnapshots(t *testing.T) {
	c := localCluster(t)
	dbURL := c.NewDatabase(t)
	db := databaseOf(t, dbURL)
	url := schemaOn(t, dbURL)
	s := openAt(t, url)
	mustAppend(t, s, "transcript-a", events.NoStream(), []events.Proposed{message("m-a-1", "a", markerInline)})

	cfg, err := ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := pgx.ConnectConfig(t.Context(), cfg.Pool.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	tx, err := holder.BeginTx(t.Context(), pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	// Its snapshot, taken by its first statement, sees the log before the
	// erasure; it holds no lock on the store's tables (one would make the
	// rewrite wait for it anyway).
	if _, err := tx.Exec(t.Context(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "transcript-a", events.ExactVersion(1), deleteAndErase("a"))

	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := s.Purge(ctx); err == nil || !strings.Contains(err.Error(), "from before the erasure") {
		t.Fatalf("Purge() with an older snapshot held = %v, want it to wait and say so", err)
	}
	superuser(t, c, db, "VACUUM FULL "+s.sql.schema+".events")
	wal := filepath.Join(c.DataDir(), "pg_wal")
	if got := holding(t, c, db, c.DataDir(), []string{wal}, markerInline); len(got) == 0 {
		t.Error("control: a rewrite while the older snapshot is held left no copy; the wait may be needless")
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(t.Context()); err != nil {
		t.Fatalf("Purge() once the snapshot is released error = %v", err)
	}
	if got := holding(t, c, db, c.DataDir(), []string{wal}, markerInline); len(got) > 0 {
		t.Errorf("after Purge: %s", strings.Join(got, "; "))
	}
}

func filenode(t *testing.T, s *Store) uint32 {
	t.Helper()
	var n uint32
	if err := s.readers.QueryRow(t.Context(), "SELECT pg_relation_filenode($1::regclass)", s.sql.schema+".events").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPurgeOnlyAfterAnErasure: Purge rewrites nothing without an erasure
// since the last purge; an erasure appended by one node (which then
// closed without purging, as in a crash) is purged by another's Purge,
// once.
func TestPurgeOnlyAfterAnErasure(t *testing.T) {
	url := tempSchema(t)
	a := openAt(t, url)
	b := openAt(t, url)
	mustAppend(t, a, "transcript-a", events.NoStream(), []events.Proposed{message("m-a-1", "a", "hello")})
	start := filenode(t, b)
	if err := b.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := filenode(t, b); got != start {
		t.Errorf("Purge without an erasure rewrote the table (file node %d to %d)", start, got)
	}
	mustAppend(t, a, "transcript-a", events.ExactVersion(1), deleteAndErase("a"))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	rewritten := filenode(t, b)
	if rewritten == start {
		t.Errorf("Purge after another node's erasure did not rewrite the table")
	}
	if err := b.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := filenode(t, b); got != rewritten {
		t.Errorf("a second Purge rewrote the table again")
	}
}

// TestPurgeCost (run with HERMES_PURGE_BENCH=N, a log of N events of
// about 300 bytes) measures the rewrite of Purge after one erasure on a
// large log: how long it takes, and the longest an append made meanwhile
// waited.
func TestPurgeCost(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("HERMES_PURGE_BENCH"))
	if n == 0 {
		t.Skip("set HERMES_PURGE_BENCH to the number of events")
	}
	s := openTemp(t)
	ctx := t.Context()
	const perBatch = 1000
	for done := 0; done < n; done += perBatch {
		_, err := s.AppendBatch(ctx, func(yield func(events.StreamAppend) bool) {
			for i := done; i < min(done+perBatch, n); i++ {
				sid := fmt.Sprintf("s%07d", i)
				if !yield(events.StreamAppend{Stream: "transcript-" + sid, Expected: events.NoStream(),
					Proposed: []events.Proposed{message("m-"+sid, sid, "a message of a transcript, kept in the log")}}) {
					return
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, s, "transcript-s0000000", events.ExactVersion(1), deleteAndErase("s0000000"))
	var size int64
	if err := s.readers.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)", s.sql.schema+".events").Scan(&size); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	worst := make(chan time.Duration)
	go func() {
		var w time.Duration
		for i := 0; ; i++ {
			select {
			case <-stop:
				worst <- w
				return
			default:
			}
			start := time.Now()
			if _, err := s.Append(context.Background(), "lane-during", events.ExactVersion(uint64(i)), touch(fmt.Sprintf("d-%d", i))); err != nil {
				t.Error(err)
			}
			w = max(w, time.Since(start))
		}
	}()
	start := time.Now()
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	close(stop)
	t.Logf("Purge of a log of %d events (%d MB with indexes and TOAST) took %v; the longest append meanwhile waited %v",
		n, size>>20, took.Round(time.Millisecond), (<-worst).Round(time.Millisecond))
}
