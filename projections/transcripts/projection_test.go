package transcripts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hermes/events"
)

func TestName(t *testing.T) {
	p := openTemp(t)
	if got := p.Name(); got != "transcripts.v3" {
		t.Fatalf("Name() = %q, want transcripts.v3", got)
	}
}

func TestSchemaV11(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	p := openAt(t, path)
	ctx := context.Background()

	objects := map[string]string{}
	rows, err := p.conn.QueryContext(ctx, "SELECT type, name FROM sqlite_schema")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var typ, name string
		if err := rows.Scan(&typ, &name); err != nil {
			t.Fatal(err)
		}
		objects[name] = typ
	}
	rows.Close()
	want := map[string]string{
		"schema_version": "table", "sessions": "table", "messages": "table", "state_meta": "table",
		"messages_fts": "table", "messages_fts_trigram": "table",
		"idx_sessions_source": "index", "idx_sessions_parent": "index", "idx_sessions_started": "index",
		"idx_messages_session": "index", "idx_sessions_title_unique": "index",
		"messages_fts_insert": "trigger", "messages_fts_delete": "trigger", "messages_fts_update": "trigger",
		"messages_fts_trigram_insert": "trigger", "messages_fts_trigram_delete": "trigger",
		"messages_fts_trigram_update": "trigger",
		"hermes_message_events":       "table", "hermes_stream_versions": "table", "hermes_lane_origins": "table",
	}
	for name, typ := range want {
		if objects[name] != typ {
			t.Errorf("sqlite_schema[%s] = %q, want %q", name, objects[name], typ)
		}
	}

	columns := func(table string) []string {
		rows, err := p.conn.QueryContext(ctx, "SELECT name FROM pragma_table_info(?) ORDER BY cid", table)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	wantSessions := []string{"id", "source", "user_id", "model", "model_config", "system_prompt", "parent_session_id",
		"started_at", "ended_at", "end_reason", "message_count", "tool_call_count", "input_tokens", "output_tokens",
		"cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "billing_provider", "billing_base_url",
		"billing_mode", "estimated_cost_usd", "actual_cost_usd", "cost_status", "cost_source", "pricing_version",
		"title", "api_call_count", "handoff_state", "handoff_platform", "handoff_error", "rewind_count",
		"archived", // archived: migration step 2, from later Hermes schemas
		"extra"}    // extra: step 4, an imported row's columns of later Hermes schemas
	if diff := cmp.Diff(wantSessions, columns("sessions")); diff != "" {
		t.Errorf("sessions columns (-want +got):\n%s", diff)
	}
	wantMessages := []string{"id", "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name",
		"timestamp", "token_count", "finish_reason", "reasoning", "reasoning_content", "reasoning_details",
		"codex_reasoning_items", "codex_message_items", "active", "extra"}
	if diff := cmp.Diff(wantMessages, columns("messages")); diff != "" {
		t.Errorf("messages columns (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"key", "value"}, columns("state_meta")); diff != "" {
		t.Errorf("state_meta columns (-want +got):\n%s", diff)
	}

	var versions []int
	rows, err = p.conn.QueryContext(ctx, "SELECT version FROM schema_version")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	rows.Close()
	if !slices.Equal(versions, []int{11}) {
		t.Errorf("schema_version rows = %v, want [11]", versions)
	}

	var ftsSQL, trigramSQL, uniqueSQL string
	queryRow(t, p, "SELECT sql FROM sqlite_schema WHERE name = 'messages_fts'", nil, &ftsSQL)
	queryRow(t, p, "SELECT sql FROM sqlite_schema WHERE name = 'messages_fts_trigram'", nil, &trigramSQL)
	queryRow(t, p, "SELECT sql FROM sqlite_schema WHERE name = 'idx_sessions_title_unique'", nil, &uniqueSQL)
	if strings.Contains(ftsSQL, "tokenize") || strings.Contains(ftsSQL, "content=") {
		t.Errorf("messages_fts = %q, want an inline table with the default tokenizer", ftsSQL)
	}
	if !strings.Contains(trigramSQL, "tokenize='trigram'") || strings.Contains(trigramSQL, "content=") {
		t.Errorf("messages_fts_trigram = %q, want an inline trigram table", trigramSQL)
	}
	if !strings.Contains(uniqueSQL, "UNIQUE INDEX") || !strings.Contains(uniqueSQL, "WHERE title IS NOT NULL") {
		t.Errorf("idx_sessions_title_unique = %q", uniqueSQL)
	}
	for _, trig := range []string{"messages_fts_insert", "messages_fts_update", "messages_fts_trigram_insert", "messages_fts_trigram_update"} {
		var s string
		queryRow(t, p, "SELECT sql FROM sqlite_schema WHERE name = ?", []any{trig}, &s)
		if !strings.Contains(s, "COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' ' || COALESCE(new.tool_calls, '')") {
			t.Errorf("trigger %s = %q, want content, tool_name and tool_calls indexed", trig, s)
		}
	}

	var mode string
	var fk int
	queryRow(t, p, "PRAGMA journal_mode", nil, &mode)
	queryRow(t, p, "PRAGMA foreign_keys", nil, &fk)
	if mode != "wal" || fk != 1 {
		t.Errorf("journal_mode = %q, foreign_keys = %d, want wal, 1", mode, fk)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("state.db mode = %o, want 600", perm)
	}
	var name string
	queryRow(t, p, "SELECT value FROM state_meta WHERE key = 'hermes_projection'", nil, &name)
	if name != Name {
		t.Errorf("state_meta hermes_projection = %q, want %q", name, Name)
	}
}

// sampleHistory is a small history touching every kind of row.
func sampleHistory() *history {
	h := newHistory()
	h.lane("agent:main:telegram:dm:1", created("agent:main:telegram:dm:1", "s1", at(0)))
	h.tr("s1",
		appended("s1", text("user", "deploy the docker stack"), at(1)),
		appended("s1", events.Message{Role: "assistant", Content: raw(`null`),
			ToolCalls: raw(`[{"id":"call_1","function":{"name":"terminal","arguments":"{}"}}]`)}, at(2)),
		appended("s1", events.Message{Role: "tool", Content: jsonString("ok"), ToolCallID: "call_1", ToolName: "terminal"}, at(3)),
		events.TitleSet{SessionID: "s1", Title: "Docker work", At: at(4)},
	)
	h.lane("agent:main:telegram:dm:1", events.SessionReset{SessionID: "s2", PreviousSessionID: "s1", At: at(5)})
	h.tr("s2", appended("s2", text("user", "记忆断裂的问题"), at(6)))
	h.add(events.GatewayStream, events.GatewayStarted{PID: 1, At: at(7)})
	return h
}

func TestReopenKeepsStateAndCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	h := sampleHistory()
	p, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, p, h.all)
	before := dumpOf(t, p.Reader)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close() = %v, want nil", err)
	}
	if err := p.Apply(context.Background(), h.all); err == nil {
		t.Fatal("Apply after Close = nil, want an error")
	}
	p = openAt(t, path)
	cp, err := p.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cp != h.pos {
		t.Errorf("Checkpoint() after reopen = %d, want %d", cp, h.pos)
	}
	if diff := cmp.Diff(before, dumpOf(t, p.Reader)); diff != "" {
		t.Errorf("reopen changed the file (-before +after):\n%s", diff)
	}
}

func TestDuplicateDeliveryChangesNothing(t *testing.T) {
	p := openTemp(t)
	h := sampleHistory()
	mustApply(t, p, h.all)
	want := dumpOf(t, p.Reader)

	mustApply(t, p, h.all)                // the whole batch again
	mustApply(t, p, h.all[2:5])           // a part of it
	mustApply(t, p, h.all[len(h.all)-1:]) // the last one
	if diff := cmp.Diff(want, dumpOf(t, p.Reader)); diff != "" {
		t.Fatalf("redelivery changed the file (-want +got):\n%s", diff)
	}
}

func TestStreamVersionGuard(t *testing.T) {
	p := openTemp(t)
	h := sampleHistory()
	mustApply(t, p, h.all)
	msgs, err := p.Messages(context.Background(), "s1", true)
	if err != nil {
		t.Fatal(err)
	}
	// The same stream events again, at new positions (a store that
	// re-appended them): the stream versions are already applied.
	var again []events.Envelope
	for _, env := range h.all {
		env.Position += h.pos
		again = append(again, env)
	}
	mustApply(t, p, again)
	after, err := p.Messages(context.Background(), "s1", true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(msgs, after); diff != "" {
		t.Errorf("re-appended events changed messages (-before +after):\n%s", diff)
	}
	cp, err := p.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cp != 2*h.pos {
		t.Errorf("Checkpoint() = %d, want %d (skipped events still move it)", cp, 2*h.pos)
	}
}

func TestEmptyAndStaleBatches(t *testing.T) {
	p := openTemp(t)
	ctx := context.Background()
	if err := p.Apply(ctx, nil); err != nil {
		t.Fatalf("Apply(nil) = %v", err)
	}
	cp, err := p.Checkpoint(ctx)
	if err != nil || cp != 0 {
		t.Fatalf("Checkpoint() of a new file = %d, %v, want 0, nil", cp, err)
	}
}

func TestNameBumpRebuildsFromZero(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	h := sampleHistory()
	old, err := open(path, "transcripts.v0")
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, old, h.all)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	p := openAt(t, path)
	ctx := context.Background()
	cp, err := p.Checkpoint(ctx)
	if err != nil || cp != 0 {
		t.Fatalf("Checkpoint() after a name bump = %d, %v, want 0, nil", cp, err)
	}
	fresh := openAt(t, filepath.Join(t.TempDir(), "state.db"))
	if diff := cmp.Diff(dumpOf(t, fresh.Reader), dumpOf(t, p.Reader)); diff != "" {
		t.Fatalf("rebuilt file differs from a new one (-new +rebuilt):\n%s", diff)
	}
	mustApply(t, p, h.all)
	mustApply(t, fresh, h.all)
	if diff := cmp.Diff(dumpOf(t, fresh.Reader), dumpOf(t, p.Reader)); diff != "" {
		t.Fatalf("replay into the rebuilt file differs (-new +rebuilt):\n%s", diff)
	}
}

func TestOpenReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	p := openAt(t, path)
	mustApply(t, p, sampleHistory().all)
	r, err := OpenReader(path)
	if err != nil {
		t.Fatalf("OpenReader() error = %v", err)
	}
	defer r.Close()
	if diff := cmp.Diff(dumpOf(t, p.Reader), dumpOf(t, r)); diff != "" {
		t.Errorf("reader sees another file (-projection +reader):\n%s", diff)
	}
	if _, err := OpenReader(filepath.Join(t.TempDir(), "missing.db")); err == nil {
		t.Error("OpenReader(missing) = nil error")
	}
	other := filepath.Join(t.TempDir(), "other.db")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReader(other); err == nil {
		t.Error("OpenReader(empty file) = nil error, want ErrNotProjection")
	}
}

// TestQueriesWhileApplying runs queries on the read pool while batches
// are applied (the race detector checks the rest).
func TestQueriesWhileApplying(t *testing.T) {
	p := openTemp(t)
	ctx := context.Background()
	h := newHistory()
	h.lane("k", created("k", "s1", at(0)))
	for i := range 400 {
		h.tr("s1", appended("s1", text("user", "message about docker number"), at(i+1)))
	}
	done := make(chan error, 1)
	go func() {
		for i := 0; i < len(h.all); i += 20 {
			if err := p.Apply(ctx, h.all[i:min(i+20, len(h.all))]); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
		if _, err := p.Search(ctx, SearchQuery{Query: "docker"}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Messages(ctx, "s1", false); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := p.Messages(ctx, "s1", false)
	if err != nil || len(msgs) != 400 {
		t.Fatalf("Messages() = %d rows, %v, want 400", len(msgs), err)
	}
}

// TestOnlyTheTrigramIndexMergesMoreAtATime: the trigram index, read by CJK
// queries only, merges trigramAutomerge segments at a time; the unicode61
// index, read by every other query, keeps FTS5's default.
func TestOnlyTheTrigramIndexMergesMoreAtATime(t *testing.T) {
	p := openTemp(t)
	want := fmt.Sprintf("automerge=%d", trigramAutomerge)
	if got := ftsSettings(t, p, "messages_fts_trigram"); !slices.Contains(strings.Split(got, ","), want) {
		t.Errorf("messages_fts_trigram settings = %q, want %s in them", got, want)
	}
	if got := ftsSettings(t, p, "messages_fts"); strings.Contains(got, "automerge") {
		t.Errorf("messages_fts settings = %q, want FTS5's default automerge", got)
	}
}
