package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hermes/adapters/eventstore/sqlite"
	"hermes/events"
)

// hashFiles returns a digest of every file under dir, by relative path.
func hashFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fmt.Sprintf("%x", sha256.Sum256(data))
		return nil
	})
	return out
}

// logOf reads every event of the home's log (without the recorded times).
func logOf(t *testing.T, home string) []string {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(home, "hermes", "events.db"), sqlite.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var out []string
	var after uint64
	for {
		page, err := store.ReadAll(context.Background(), after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, env := range page {
			data, _ := events.Encode(env.Event)
			out = append(out, fmt.Sprintf("%d %s v%d %s %s %s", env.Position, env.Stream, env.Version, env.ID, env.Type, data))
			after = env.Position
		}
		if len(page) < 1000 {
			return out
		}
	}
}

// sourceRows reads the rows of a table of a state.db as column → value.
func sourceRows(t *testing.T, path, query string) []map[string]any {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		for i, c := range cols {
			if b, ok := vals[i].([]byte); ok {
				vals[i] = string(b)
			}
			m[c] = vals[i]
		}
		out = append(out, m)
	}
	return out
}

func TestImportHermesHome(t *testing.T) {
	t.Setenv("HERMES_TIMEZONE", "UTC")
	src, dst := t.TempDir(), t.TempDir()
	writeHermesHome(t, src)
	before := hashFiles(t, src)

	out, _ := hermes(t, 0, "import", src, "--home", dst, "--notes", "-1")
	for _, want := range []string{
		"lanes:    5 imported, 0 already imported, 0 left (exist in hermes), 1 skipped",
		"sessions: 5 imported",
		"messages: 10 imported of 10 in state.db",
		"restart failure counts: 1 lanes",
		"session key has a NUL byte",
		"estimated_cost_usd is NaN: 0",
		"last_prompt_tokens is Infinity: 0",
		"input_tokens -5 is negative: 0",
		"total_tokens 1e+30 is out of range",
		"state.db column messages.platform_message_id",
		"state.db table gateway_routing: not Hermes' routing index (no session_key or entry_json column): unknown table not imported (1 rows)",
		"agent:main:gone:dm:1: no routing entry",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("import output lacks %q:\n%s", want, out)
		}
	}
	if diff := cmp.Diff(before, hashFiles(t, src)); diff != "" {
		t.Fatalf("the source home changed (-before +after):\n%s", diff)
	}

	// A second run changes nothing and says so.
	log1 := logOf(t, dst)
	again, _ := hermes(t, 0, "import", src, "--home", dst)
	if !strings.Contains(again, "nothing new to import") || !strings.Contains(again, "5 already imported") {
		t.Errorf("second import output:\n%s", again)
	}
	if diff := cmp.Diff(log1, logOf(t, dst)); diff != "" {
		t.Fatalf("second import changed the log:\n%s", diff)
	}
	tail, _ := hermes(t, 0, "events", "tail", keyTelegram, "--home", dst)
	if !strings.Contains(tail, "imported from Hermes") {
		t.Errorf("events tail does not say imported from Hermes:\n%s", tail)
	}

	// Time-based resets off: the imported lanes are months old by now.
	s := startServer(t, dst, []string{"HERMES_SESSION_RESET_MODE=none"})
	checkEntries(t, s)
	checkExport(t, s, filepath.Join(src, "state.db"), filepath.Join(dst, "state.db"))

	// Search finds the same messages: active ones only.
	var hits struct {
		Results []struct {
			ID int64 `json:"id"`
		} `json:"results"`
	}
	s.must("GET", "/v1/search?q="+url.QueryEscape("记忆断裂"), nil, &hits)
	if len(hits.Results) != 1 || hits.Results[0].ID != 3 {
		t.Errorf("search 记忆断裂 = %+v, want message 3", hits)
	}
	s.must("GET", "/v1/search?q=rewound", nil, &hits)
	if len(hits.Results) != 0 {
		t.Errorf("search finds a rewound message: %+v", hits)
	}
	s.must("GET", "/v1/search?q=docker", nil, &hits)
	if len(hits.Results) != 1 || hits.Results[0].ID != 4 {
		t.Errorf("search docker (in tool_calls) = %+v, want message 4", hits)
	}

	// The next resolve continues the imported session; a suspended lane
	// and a lane whose resume mark is stale reset as the policy says.
	var r resolved
	s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": "42", "chat_type": "dm", "user_id": "42"}}, &r)
	if r.Created || r.Entry.SessionID != fxTelegram {
		t.Errorf("resolve of the imported telegram lane = %+v, want session %s continued", r, fxTelegram)
	}
	s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "discord", "chat_id": "g1", "chat_type": "group", "user_id": "u7"}}, &r)
	if r.Entry.SessionID == fxDiscord || r.ResetReason == nil || *r.ResetReason != "suspended" {
		t.Errorf("resolve of the suspended imported lane = %+v, want a reset for suspended", r)
	}
	s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "slack", "chat_id": "U9", "chat_type": "dm", "user_id": "U9"}}, &r)
	if r.Entry.SessionKey != keySlack || r.Entry.SessionID == fxSlack || r.ResetReason == nil || *r.ResetReason != "resume_pending_expired" {
		t.Errorf("resolve of the imported lane with a stale resume mark = %+v, want a resume_pending_expired reset", r)
	}
	// A lane created in hermes is kept by a later import.
	s.stop(syscall.SIGTERM)
	hermes(t, 0, "projections", "verify", "--home", dst)
	third, _ := hermes(t, 0, "import", src, "--home", dst)
	if !strings.Contains(third, "nothing new to import") {
		t.Errorf("import after serve:\n%s", third)
	}
}

// checkEntries compares each imported lane with its sessions.json entry.
func checkEntries(t *testing.T, s *server) {
	t.Helper()
	var routing map[string]json.RawMessage
	if err := json.Unmarshal(bytes.ReplaceAll(bytes.ReplaceAll([]byte(fixtureRoutingJSON), []byte("NaN"), []byte("0")), []byte("Infinity"), []byte("0")), &routing); err != nil {
		// The NaN entry aside, the file is plain JSON.
		t.Fatal(err)
	}
	for _, key := range []string{keyTelegram, keyDiscord, keySlack, keyWhatsApp} {
		var want map[string]any
		if err := json.Unmarshal(routing[key], &want); err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		s.must("GET", "/v1/sessions/"+url.PathEscape(key), nil, &got)
		for field, w := range want {
			g, ok := got[field]
			switch field {
			case "memory_flushed":
				g, ok = got["expiry_finalized"], true
			case "created_at", "updated_at", "last_resume_marked_at":
				if w != nil {
					wt, err1 := time.Parse("2006-01-02T15:04:05.999999", w.(string))
					gt, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(g))
					if err1 != nil || err2 != nil || !wt.Equal(gt) {
						t.Errorf("%s %s = %v, want %v", key, field, g, w)
					}
					continue
				}
			case "origin":
				wo, go_ := w.(map[string]any), g.(map[string]any)
				for k, v := range wo {
					if v == nil {
						if gv, ok := go_[k]; ok && gv != "" && gv != false {
							t.Errorf("%s origin.%s = %v, want empty", key, k, gv)
						}
						continue
					}
					if !reflect.DeepEqual(go_[k], v) {
						t.Errorf("%s origin.%s = %v, want %v", key, k, go_[k], v)
					}
				}
				continue
			}
			if !ok {
				t.Errorf("%s: the API entry has no %s", key, field)
				continue
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("%s %s = %#v, want %#v", key, field, g, w)
			}
		}
	}
	var nan map[string]any
	s.must("GET", "/v1/sessions/"+url.PathEscape(keyNaN), nil, &nan)
	if nan["estimated_cost_usd"] != 0.0 || nan["input_tokens"] != 0.0 || nan["total_tokens"] != float64(1<<53) {
		t.Errorf("clamped lane = %v", nan)
	}
}

// checkExport compares GET /v1/export with the source rows, and the
// target state.db's rows with the source's byte for byte.
func checkExport(t *testing.T, s *server, srcDB, dstDB string) {
	t.Helper()
	var export struct {
		Sessions []map[string]any `json:"sessions"`
	}
	s.must("GET", "/v1/export", nil, &export)
	want := sourceRows(t, srcDB, "SELECT * FROM sessions")
	if len(export.Sessions) != len(want) {
		t.Fatalf("export has %d sessions, want %d", len(export.Sessions), len(want))
	}
	byID := map[string]map[string]any{}
	for _, e := range export.Sessions {
		byID[e["id"].(string)] = e
	}
	for _, w := range want {
		g := byID[w["id"].(string)]
		for col, v := range w {
			gv := g[col]
			switch v := v.(type) {
			case int64:
				if gv != float64(v) {
					t.Errorf("session %s %s = %v, want %v", w["id"], col, gv, v)
				}
			default:
				if !reflect.DeepEqual(gv, v) {
					t.Errorf("session %s %s = %#v, want %#v", w["id"], col, gv, v)
				}
			}
		}
		msgs, _ := g["messages"].([]any)
		wantMsgs := sourceRows(t, srcDB, fmt.Sprintf("SELECT * FROM messages WHERE session_id = '%s' AND active = 1 ORDER BY id", w["id"]))
		if len(msgs) != len(wantMsgs) {
			t.Errorf("session %s exports %d messages, want %d", w["id"], len(msgs), len(wantMsgs))
			continue
		}
		for i, wm := range wantMsgs {
			gm := msgs[i].(map[string]any)
			for col, v := range wm {
				gv, ok := gm[col]
				if col == "platform_message_id" {
					continue // a later Hermes column: kept in the log, not in the read model
				}
				if !ok {
					t.Errorf("message %v: export has no %s", wm["id"], col)
					continue
				}
				switch col {
				case "content":
					s, _ := v.(string)
					if rest, isJSON := strings.CutPrefix(s, "\x00json:"); isJSON {
						var a, b any
						json.Unmarshal([]byte(rest), &a)
						b = gv
						if !reflect.DeepEqual(a, b) {
							t.Errorf("message %v content = %v, want %v", wm["id"], gv, rest)
						}
						continue
					}
				case "tool_calls":
					if v != nil {
						var a any
						json.Unmarshal([]byte(v.(string)), &a)
						v = a
					}
				case "active":
					v = v != int64(0)
				}
				if n, isInt := v.(int64); isInt {
					v = float64(n)
				}
				if !reflect.DeepEqual(gv, v) {
					t.Errorf("message %v %s = %#v, want %#v", wm["id"], col, gv, v)
				}
			}
		}
	}
	// In the read model itself every column is byte-equal, rewound rows
	// included (active = 0).
	cols := "id, session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, token_count, finish_reason, reasoning, reasoning_content, reasoning_details, codex_reasoning_items, codex_message_items, active"
	if diff := cmp.Diff(sourceRows(t, srcDB, "SELECT "+cols+" FROM messages ORDER BY id"), sourceRows(t, dstDB, "SELECT "+cols+" FROM messages ORDER BY id")); diff != "" {
		t.Errorf("state.db messages differ from the source (-source +hermes):\n%s", diff)
	}
}

func TestImportSameHomeMovesPythonFilesAside(t *testing.T) {
	t.Setenv("HERMES_TIMEZONE", "UTC")
	home := t.TempDir()
	writeHermesHome(t, home)
	stateBefore := hashFiles(t, home)["state.db"]

	out, _ := hermes(t, 0, "import", home, "--home", home)
	if !strings.Contains(out, "source is this hermes home") || !strings.Contains(out, "moved aside") {
		t.Fatalf("same-home import output:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(home, "state.db")); !os.IsNotExist(err) {
		t.Fatalf("state.db still in place after a same-home import: %v", err)
	}
	var aside string
	for rel, sum := range hashFiles(t, home) {
		if strings.HasPrefix(rel, "state.db.hermes-python-") && !strings.HasSuffix(rel, "-wal") && !strings.HasSuffix(rel, "-shm") {
			aside = rel
			if sum != stateBefore {
				t.Errorf("%s differs from the original state.db", rel)
			}
		}
	}
	if aside == "" {
		t.Fatalf("no state.db.hermes-python-* in %v", hashFiles(t, home))
	}
	s := startServer(t, home, nil)
	var export struct {
		Sessions []map[string]any `json:"sessions"`
	}
	s.must("GET", "/v1/export", nil, &export)
	if len(export.Sessions) != 5 {
		t.Errorf("export after a same-home import has %d sessions, want 5", len(export.Sessions))
	}
	s.stop(syscall.SIGTERM)
	again, _ := hermes(t, 0, "import", home, "--home", home)
	if !strings.Contains(again, "state.db is hermes' own read model") || !strings.Contains(again, "nothing new to import") {
		t.Errorf("second same-home import output:\n%s", again)
	}
}

func TestImportRefusesRunningGateway(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	writeHermesHome(t, src)
	// A live process that looks like a Hermes gateway holds gateway.pid.
	gw := exec.Command("bash", "-c", "exec -a 'python -m hermes_cli.main gateway run' sleep 60")
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Process.Kill(); gw.Wait() })
	pid := fmt.Sprintf(`{"pid": %d, "kind": "hermes-gateway"}`, gw.Process.Pid)
	if err := os.WriteFile(filepath.Join(src, "gateway.pid"), []byte(pid), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr := hermes(t, 1, "import", src, "--home", dst)
	if !strings.Contains(stderr, "Hermes gateway is running") {
		t.Errorf("import of a running home: %s", stderr)
	}
	if _, err := os.Stat(filepath.Join(dst, "hermes", "events.db")); err == nil {
		t.Errorf("import of a running home created an event log")
	}
	// Once it is gone, the stale pid file is ignored.
	gw.Process.Kill()
	gw.Wait()
	out, _ := hermes(t, 0, "import", src, "--home", dst, "--dry-run")
	if !strings.Contains(out, "dry run") || !strings.Contains(out, "stale") {
		t.Errorf("dry run after the gateway stopped:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dst, "hermes", "events.db")); err == nil {
		t.Errorf("a dry run created an event log")
	}
}

// TestImportKilledThenResumed: SIGKILL during an import, then a second run,
// leaves the same log as one clean run.
func TestImportKilledThenResumed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 30,000-message state.db")
	}
	t.Setenv("HERMES_TIMEZONE", "UTC")
	src, clean, killed := t.TempDir(), t.TempDir(), t.TempDir()
	writeBigHermesHome(t, src, 300, 100)
	hermes(t, 0, "import", src, "--home", clean)
	want := logOf(t, clean)

	cmd := exec.Command(binary, "import", src, "--home", killed)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it once some of the log is written (the events.db exists and
	// holds events), however fast or slow the machine is.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if head := headOf(filepath.Join(killed, "hermes", "events.db")); head > uint64(len(want)/4) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("import wrote nothing in 2 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	partial := len(logOf(t, killed))
	if partial >= len(want) {
		t.Logf("the import finished before the kill (%d events); the resume path is not exercised", partial)
	}
	out, _ := hermes(t, 0, "import", src, "--home", killed)
	if !strings.Contains(out, "messages: ") {
		t.Fatalf("resumed import output:\n%s", out)
	}
	got := logOf(t, killed)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("killed-then-resumed log differs from a clean import (killed at %d of %d events):\n%s", partial, len(want), diff)
	}
}

func headOf(path string) uint64 {
	if _, err := os.Stat(path); err != nil {
		return 0
	}
	store, err := sqlite.Open(path, sqlite.WithReadOnly())
	if err != nil {
		return 0
	}
	defer store.Close()
	head, _ := store.Head(context.Background())
	return head
}

// BenchmarkImport measures `hermes import` on a generated state.db of
// HERMES_BENCH_IMPORT_MESSAGES messages (100 a session, one lane each):
//
//	HERMES_BENCH_IMPORT_MESSAGES=1000000 go test -run '^$' -bench Import -benchtime=1x -timeout 60m ./cmd/hermes
func BenchmarkImport(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("HERMES_BENCH_IMPORT_MESSAGES"))
	if n <= 0 {
		b.Skip("set HERMES_BENCH_IMPORT_MESSAGES")
	}
	src := b.TempDir()
	start := time.Now()
	writeBigHermesHome(b, src, n/100, 100)
	b.Logf("generated %d messages in %s", n, time.Since(start).Round(time.Second))
	b.ResetTimer()
	for range b.N {
		dst := b.TempDir()
		cmd := exec.Command(binary, "import", src, "--home", dst)
		cmd.Env = append(os.Environ(), "HERMES_TIMEZONE=UTC")
		began := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("import: %v\n%s", err, out)
		}
		b.ReportMetric(float64(n)/time.Since(began).Seconds(), "msgs/s")
	}
}
