package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"hermes/testfixtures/ondisk"
	pgtest "hermes/testfixtures/postgres"

	"github.com/jackc/pgx/v5"
)

// pgFilesHolding checkpoints the cluster (every page of every database in
// its files) and lists the files of its data directory outside pg_wal
// whose bytes hold marker: tables, TOAST tables, indexes, free space and
// visibility maps, the catalogs, every database.
func pgFilesHolding(t *testing.T, c *pgtest.Cluster, marker string) []string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), c.DatabaseURL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	data := c.DataDir()
	wal := filepath.Join(data, "pg_wal")
	var found []string
	err = filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if path == wal {
			return filepath.SkipDir
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(marker)) {
			found = append(found, strings.TrimPrefix(path, data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestErasureOnPostgresLeavesNoMarker forgets a person through the API of
// one of two hermes serve nodes on one PostgreSQL store, stops both, and
// reads every file of the cluster's data directory but pg_wal (after the
// purge's rewrite and a checkpoint) and every file under both nodes'
// homes: the person's markers (their name on the lane, their messages)
// are in none. The control, the same history without the erasure, finds
// them in the tables and in both homes, so the search can fail.
func TestErasureOnPostgresLeavesNoMarker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hermes serve processes")
	}
	c := pgtest.Shared(t)
	if c.External() {
		t.Skip("the files of an external server cannot be read by the tests")
	}
	for _, erase := range []bool{false, true} {
		name := "control"
		if erase {
			name = "forget"
		}
		t.Run(name, func(t *testing.T) {
			storeURL := c.NewDatabase(t)
			transcript, lane := ondisk.RandomMarker(t, "pgtmark"), ondisk.RandomMarker(t, "pglmark")
			userID := "u-" + ondisk.RandomMarker(t, "")[:8]
			homes := []string{filepath.Join(t.TempDir(), "n0"), filepath.Join(t.TempDir(), "n1")}
			nodes := make([]*server, 2)
			for i, home := range homes {
				nodes[i] = startServer(t, home, []string{"HERMES_STORE_URL=" + storeURL, fmt.Sprintf("HERMES_NODE_ID=n%d", i)})
			}
			a, b := nodes[0], nodes[1]
			var r resolved
			a.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram",
				"chat_id": "c-" + userID, "chat_type": "dm", "user_id": userID, "user_name": "Ada " + lane}}, &r)
			// The person's messages lie between other people's, which stay,
			// on the same pages of the events table: rows that stay
			// around the erased ones keep a page from being compacted
			// over them (a table holding only the erased rows would hide
			// a missing rewrite).
			var others []string
			for i := range 3 {
				var o resolved
				a.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram",
					"chat_id": fmt.Sprintf("other-%d", i), "chat_type": "dm", "user_id": fmt.Sprintf("other-%d", i)}}, &o)
				others = append(others, "/v1/transcripts/"+o.Entry.SessionID+"/messages")
			}
			tr := "/v1/transcripts/" + r.Entry.SessionID + "/messages"
			for i := range 40 {
				a.must("POST", tr, map[string]any{"role": "user", "content": fmt.Sprintf("hello %d %s", i, transcript)}, nil)
				a.must("POST", tr, map[string]any{"role": "assistant", "content": "ok", "reasoning": "about " + transcript}, nil)
				for _, o := range others {
					a.must("POST", o, map[string]any{"role": "user", "content": fmt.Sprintf("another conversation, message %d", i)}, nil)
				}
			}
			a.must("POST", "/v1/sessions/"+url.PathEscape(r.Entry.SessionKey)+"/queue", map[string]any{"text": "pending " + lane, "kind": "queue"}, nil)
			// The other node has it in its read models.
			waitForGET(t, b, "/v1/transcripts/"+r.Entry.SessionID+"/messages", func(status int, body []byte) bool {
				return status == http.StatusOK && bytes.Contains(body, []byte(transcript))
			})

			if erase {
				var out struct {
					Erased struct{ Lanes, Transcripts int }
				}
				a.must("POST", "/v1/erasure", map[string]any{"platform": "telegram", "user_id": userID,
					"reason": "art. 17 request", "requested_by": "dpo"}, &out)
				if out.Erased.Lanes != 1 || out.Erased.Transcripts != 1 {
					t.Fatalf("POST /v1/erasure erased %+v, want 1 lane and 1 transcript", out.Erased)
				}
				waitForGET(t, b, "/v1/transcripts/"+r.Entry.SessionID, func(status int, _ []byte) bool { return status == http.StatusNotFound })
			}
			for i, n := range nodes {
				if code := n.stop(syscall.SIGTERM); code != 0 {
					t.Fatalf("node %d exited %d:\n%s", i, code, n.stderr.String())
				}
			}

			for _, marker := range []string{transcript, lane} {
				inCluster := pgFilesHolding(t, c, marker)
				var inHomes []string
				for _, home := range homes {
					for _, f := range filesHolding(t, home, marker) {
						inHomes = append(inHomes, filepath.Base(home)+"/"+f)
					}
				}
				if !erase {
					t.Logf("control: %s in %v and %v", marker, inCluster, inHomes)
				} else {
					t.Logf("out of hermes' reach, %s is in %d pg_wal segments until they are recycled", marker, len(ondisk.FilesHolding(t, filepath.Join(c.DataDir(), "pg_wal"), marker)))
				}
				switch {
				case !erase && (len(inCluster) == 0 || len(inHomes) < 2):
					t.Errorf("control: %s found in the cluster's files %v and the homes' %v; want both (the search could not fail)", marker, inCluster, inHomes)
				case erase && (len(inCluster) > 0 || len(inHomes) > 0):
					t.Errorf("after the erasure %s is still in the cluster's files %v and the homes' %v", marker, inCluster, inHomes)
				}
			}
		})
	}
}

// waitForGET polls GET path on s until ok says yes, for at most a minute.
func waitForGET(t *testing.T, s *server, path string, ok func(status int, body []byte) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + s.addr + path)
		if err == nil {
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			if ok(resp.StatusCode, body.Bytes()) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s on %s: not as expected after a minute:\n%s", path, s.home, s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
