package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// hermesV11DDL is the state.db schema v11 of the seed 002 (hermes_state.py),
// plus what later Hermes versions add that the import must handle: the
// rewind columns (messages.active, sessions.rewind_count), a column this
// build does not know (messages.platform_message_id) and a table it does
// not read (gateway_routing).
const hermesV11DDL = `
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version VALUES (11);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, source TEXT NOT NULL, user_id TEXT, model TEXT, model_config TEXT,
    system_prompt TEXT, parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL,
    end_reason TEXT, message_count INTEGER DEFAULT 0, tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0, cache_read_tokens INTEGER DEFAULT 0,
    cache_write_tokens INTEGER DEFAULT 0, reasoning_tokens INTEGER DEFAULT 0, billing_provider TEXT,
    billing_base_url TEXT, billing_mode TEXT, estimated_cost_usd REAL, actual_cost_usd REAL,
    cost_status TEXT, cost_source TEXT, pricing_version TEXT, title TEXT, api_call_count INTEGER DEFAULT 0,
    handoff_state TEXT, handoff_platform TEXT, handoff_error TEXT,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
    timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT, reasoning TEXT,
    reasoning_content TEXT, reasoning_details TEXT, codex_reasoning_items TEXT, codex_message_items TEXT
);
CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE INDEX idx_sessions_source ON sessions(source);
CREATE INDEX idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX idx_sessions_started ON sessions(started_at DESC);
CREATE INDEX idx_messages_session ON messages(session_id, timestamp);
CREATE UNIQUE INDEX idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL;
CREATE VIRTUAL TABLE messages_fts USING fts5(content);
CREATE VIRTUAL TABLE messages_fts_trigram USING fts5(content, tokenize='trigram');
ALTER TABLE messages ADD COLUMN active INTEGER DEFAULT 1;
ALTER TABLE sessions ADD COLUMN rewind_count INTEGER DEFAULT 0;
ALTER TABLE messages ADD COLUMN platform_message_id TEXT;
CREATE TABLE gateway_routing (session_key TEXT PRIMARY KEY, session_id TEXT);
INSERT INTO gateway_routing VALUES ('agent:main:telegram:dm:42', '20260510_090000_aaaa0001');
INSERT INTO state_meta VALUES ('last_auto_prune', '1778400000.0');
`

// Fixture sessions and keys.
const (
	fxRoot      = "20260508_100000_aaaa0000"
	fxTelegram  = "20260510_090000_aaaa0001"
	fxDiscord   = "20260509_120000_aaaa0002"
	fxSlack     = "20260430_070000_aaaa0003"
	fxWhatsApp  = "20260511_061500_aaaa0004"
	keyTelegram = "agent:main:telegram:dm:42"
	keyDiscord  = "agent:main:discord:group:g1:u7"
	keySlack    = "agent:main:slack:dm:U9"
	keyWhatsApp = "agent:main:whatsapp:dm:15551234567"
	keyNaN      = "agent:main:telegram:dm:nan"
)

// fixtureRoutingJSON is a sessions.json as Hermes writes it (indent=2,
// _README first), with every SessionEntry field, an entry Python's json
// wrote NaN into, and one whose key has a NUL byte.
const fixtureRoutingJSON = `{
  "_README": "Gateway routing index ONLY: maps messaging session keys (agent:main:<platform>:...) to active session IDs. This is NOT the session list.",
  "agent:main:telegram:dm:42": {
    "session_key": "agent:main:telegram:dm:42",
    "session_id": "20260510_090000_aaaa0001",
    "created_at": "2026-05-10T09:00:00",
    "updated_at": "2026-05-10T09:30:15.250000",
    "display_name": "Alice 🦊",
    "platform": "telegram",
    "chat_type": "dm",
    "input_tokens": 1000,
    "output_tokens": 200,
    "cache_read_tokens": 300,
    "cache_write_tokens": 40,
    "total_tokens": 1200,
    "last_prompt_tokens": 1300,
    "estimated_cost_usd": 0.0125,
    "cost_status": "estimated",
    "memory_flushed": false,
    "expiry_finalized": false,
    "suspended": false,
    "resume_pending": false,
    "resume_reason": null,
    "last_resume_marked_at": null,
    "is_fresh_reset": false,
    "was_auto_reset": false,
    "auto_reset_reason": null,
    "reset_had_activity": false,
    "origin": {"platform": "telegram", "chat_id": "42", "chat_name": "Alice 🦊", "chat_type": "dm", "user_id": "42", "user_name": "alice", "thread_id": null, "chat_topic": null, "user_id_alt": null, "chat_id_alt": null, "is_bot": false, "guild_id": null, "parent_chat_id": null, "message_id": "m-7", "role_authorized": true}
  },
  "agent:main:discord:group:g1:u7": {
    "session_key": "agent:main:discord:group:g1:u7",
    "session_id": "20260509_120000_aaaa0002",
    "created_at": "2026-05-09T12:00:00",
    "updated_at": "2026-05-09T12:05:00.000001",
    "display_name": "#general",
    "platform": "discord",
    "chat_type": "group",
    "input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 0, "cache_write_tokens": 0, "total_tokens": 15,
    "last_prompt_tokens": 0, "estimated_cost_usd": 0.0, "cost_status": "unknown",
    "memory_flushed": false, "expiry_finalized": false,
    "suspended": true,
    "resume_pending": false, "resume_reason": null, "last_resume_marked_at": null,
    "is_fresh_reset": false, "was_auto_reset": false, "auto_reset_reason": null, "reset_had_activity": false,
    "origin": {"platform": "discord", "chat_id": "g1", "chat_name": "#general", "chat_type": "group", "user_id": "u7", "user_name": "bob", "thread_id": "t-1", "chat_topic": "ops", "user_id_alt": null, "chat_id_alt": null, "is_bot": false, "guild_id": "guild-9", "parent_chat_id": "p-1", "message_id": null, "role_authorized": false}
  },
  "agent:main:slack:dm:U9": {
    "session_key": "agent:main:slack:dm:U9",
    "session_id": "20260430_070000_aaaa0003",
    "created_at": "2026-04-30T07:00:00",
    "updated_at": "2026-05-01T08:00:00",
    "display_name": null,
    "platform": "slack",
    "chat_type": "dm",
    "input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0, "total_tokens": 0,
    "last_prompt_tokens": 512, "estimated_cost_usd": 0.5, "cost_status": "estimated",
    "memory_flushed": true, "expiry_finalized": true,
    "suspended": false,
    "resume_pending": true, "resume_reason": "restart_timeout", "last_resume_marked_at": "2026-05-01T08:00:00.123456",
    "is_fresh_reset": true, "was_auto_reset": true, "auto_reset_reason": "idle", "reset_had_activity": true,
    "origin": {"platform": "slack", "chat_id": "D9", "chat_type": "dm", "user_id": "U9", "is_bot": false, "role_authorized": false}
  },
  "agent:main:whatsapp:dm:15551234567": {
    "session_key": "agent:main:whatsapp:dm:15551234567",
    "session_id": "20260511_061500_aaaa0004",
    "created_at": "2026-05-11T06:15:00",
    "updated_at": "2026-05-11T06:20:00",
    "display_name": "Ana",
    "platform": "whatsapp",
    "chat_type": "dm",
    "input_tokens": 1, "output_tokens": 2, "cache_read_tokens": 3, "cache_write_tokens": 4, "total_tokens": 3,
    "last_prompt_tokens": 5, "estimated_cost_usd": 0.25, "cost_status": "actual",
    "memory_flushed": false, "expiry_finalized": false, "suspended": false,
    "resume_pending": false, "resume_reason": null, "last_resume_marked_at": null,
    "is_fresh_reset": false, "was_auto_reset": false, "auto_reset_reason": null, "reset_had_activity": false,
    "origin": {"platform": "whatsapp", "chat_id": "15551234567@s.whatsapp.net", "chat_name": "Ana", "chat_type": "dm", "user_id": "15551234567@s.whatsapp.net", "user_name": "Ana", "user_id_alt": "98765@lid", "chat_id_alt": "98765@lid", "is_bot": false, "role_authorized": false}
  },
  "agent:main:telegram:dm:nan": {
    "session_key": "agent:main:telegram:dm:nan",
    "session_id": "20260512_000000_aaaa0005",
    "created_at": "2026-05-12T00:00:00",
    "updated_at": "2026-05-12T00:00:01",
    "platform": "telegram",
    "chat_type": "dm",
    "input_tokens": -5,
    "total_tokens": 1e30,
    "estimated_cost_usd": NaN,
    "last_prompt_tokens": Infinity,
    "origin": {"platform": "telegram", "chat_id": "nan", "chat_type": "dm"}
  },
  "agent:main:telegram:dm:bad\u0000nul": {
    "session_key": "agent:main:telegram:dm:bad\u0000nul",
    "session_id": "20260512_000000_aaaa0006",
    "created_at": "2026-05-12T00:00:00",
    "updated_at": "2026-05-12T00:00:00",
    "origin": {"platform": "telegram", "chat_id": "bad", "chat_type": "dm"}
  }
}
`

// fixtureMessage is one messages row of the fixture.
type fixtureMessage struct {
	id                                                   int64
	session, role                                        string
	content, toolCallID, toolCalls, toolName             any
	ts                                                   float64
	tokens                                               any
	finish, reasoning, reasoningContent, reasoningDetail any
	codexReasoning, codexMessages                        any
	active                                               int
	platformMessageID                                    any
}

func fixtureMessages() []fixtureMessage {
	calls := `[{"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": "{\"cmd\": \"docker ps\"}"}}]`
	return []fixtureMessage{
		{1, fxRoot, "user", "Deploy the X service", nil, nil, nil, 1778234400.000001, nil, nil, nil, nil, nil, nil, nil, 1, nil},
		{2, fxRoot, "assistant", "Deploying X now.", nil, nil, nil, 1778234401.5, int64(12), "stop", nil, nil, nil, nil, nil, 1, nil},
		{3, fxTelegram, "user", "你好，记忆断裂怎么办？🚀", nil, nil, nil, 1778403600.123456, nil, nil, nil, nil, nil, nil, nil, 1, "wamid.A"},
		{4, fxTelegram, "assistant", "", nil, calls, nil, 1778403601.654321, int64(150), "tool_calls",
			"Let me look at the containers.", "", `[{"type": "reasoning.summary", "summary": "看一看"}]`,
			`[{"id": "rs_1", "encrypted_content": "xyz"}]`, `[{"id": "msg_1", "phase": "final"}]`, 1, nil},
		{5, fxTelegram, "tool", "CONTAINER ID   IMAGE\nabc123   x:latest", "call_1", nil, "terminal", 1778403602.25, nil, nil, nil, nil, nil, nil, nil, 1, nil},
		{6, fxTelegram, "assistant", "\x00json:[{\"type\": \"text\", \"text\": \"容器正在运行 ✅\"}, {\"type\": \"image_url\", \"image_url\": {\"url\": \"https://example.invalid/a.png\"}}]", nil, nil, nil, 1778403603.0, int64(33), "stop", nil, nil, nil, nil, nil, 1, nil},
		{7, fxTelegram, "user", "undo this: 撤销", nil, nil, nil, 1778403604.5, nil, nil, nil, nil, nil, nil, nil, 0, nil},
		{8, fxTelegram, "assistant", "rewound answer", nil, nil, nil, 1778403605.5, int64(4), "stop", nil, nil, nil, nil, nil, 0, nil},
		{9, fxDiscord, "user", "hello from discord", nil, nil, nil, 1778328000.0, nil, nil, nil, nil, nil, nil, nil, 1, nil},
		{10, fxWhatsApp, "user", "olá 👋 مرحبا", nil, nil, nil, 1778480100.0, nil, nil, nil, nil, nil, nil, nil, 1, "wamid.B"},
	}
}

// fixtureSessionsSQL inserts the fixture's sessions rows: a lineage X →
// "X #2" (compression), every column filled on the tip.
const fixtureSessionsSQL = `
INSERT INTO sessions VALUES ('20260508_100000_aaaa0000', 'telegram', '42', 'anthropic/claude-sonnet-4.6', '{"temperature": 0.2}',
  'You are Hermes.', NULL, 1778234400.0, 1778238000.5, 'compression', 2, 0, 100, 20, 0, 0, 0, 'openrouter',
  'https://openrouter.ai/api/v1', 'metered', 0.001, 0.0009, 'estimated', 'pricing_table', '2026-05', 'X', 1,
  NULL, NULL, NULL, 0);
INSERT INTO sessions VALUES ('20260510_090000_aaaa0001', 'telegram', '42', 'anthropic/claude-sonnet-4.6', '{"temperature": 0.2, "max_tokens": 4096}',
  'You are Hermes. 你好', '20260508_100000_aaaa0000', 1778403600.0, NULL, NULL, 6, 1, 1000, 200, 300, 40, 50,
  'openrouter', 'https://openrouter.ai/api/v1', 'metered', 0.0125, 0.0119, 'estimated', 'pricing_table', '2026-05',
  'X #2', 3, 'pending', 'telegram', 'timeout after 30s', 1);
INSERT INTO sessions VALUES ('20260509_120000_aaaa0002', 'discord', 'u7', NULL, NULL, NULL, NULL, 1778328000.0, 1778328300.25,
  'session_reset', 1, 0, 10, 5, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL, 0);
INSERT INTO sessions VALUES ('20260430_070000_aaaa0003', 'slack', 'U9', NULL, NULL, NULL, NULL, 1777532400.0, NULL, NULL,
  0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, 'unknown', NULL, NULL, NULL, 0, NULL, NULL, NULL, 0);
INSERT INTO sessions VALUES ('20260511_061500_aaaa0004', 'whatsapp', '15551234567@s.whatsapp.net', 'gpt-5', NULL, NULL, NULL,
  1778480100.0, NULL, NULL, 1, 0, 1, 2, 3, 4, 0, NULL, NULL, NULL, 0.25, NULL, 'actual', NULL, NULL, NULL, 1, NULL, NULL, NULL, 0);
`

// writeHermesHome builds a Python Hermes home in dir: sessions.json,
// state.db (schema v11 and the later rewind columns), .restart_failure_counts.
func writeHermesHome(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sessions", "sessions.json"), []byte(fixtureRoutingJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".restart_failure_counts"), []byte(`{"agent:main:telegram:dm:42": 2, "agent:main:gone:dm:1": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	db := openFixtureDB(t, filepath.Join(dir, "state.db"))
	defer db.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("fixture %.60s: %v", q, err)
		}
	}
	exec(hermesV11DDL)
	exec(fixtureSessionsSQL)
	for _, m := range fixtureMessages() {
		exec(`INSERT INTO messages (id, session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp,
			token_count, finish_reason, reasoning, reasoning_content, reasoning_details, codex_reasoning_items,
			codex_message_items, active, platform_message_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			m.id, m.session, m.role, m.content, m.toolCallID, m.toolCalls, m.toolName, m.ts, m.tokens, m.finish,
			m.reasoning, m.reasoningContent, m.reasoningDetail, m.codexReasoning, m.codexMessages, m.active, m.platformMessageID)
	}
}

func openFixtureDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

// writeBigHermesHome builds a home of sessions×perSession messages (and
// one lane per session), for the kill-and-resume test and the benchmark.
func writeBigHermesHome(t testing.TB, dir string, sessions, perSession int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	db := openFixtureDB(t, filepath.Join(dir, "state.db"))
	defer db.Close()
	if _, err := db.Exec(hermesV11DDL); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ins, err := tx.Prepare(`INSERT INTO messages (session_id, role, content, tool_calls, timestamp, token_count) VALUES (?, ?, ?, ?, ?, ?)`)
	if err != nil {
		t.Fatal(err)
	}
	routing := map[string]any{"_README": "Gateway routing index ONLY"}
	for s := range sessions {
		id := fmt.Sprintf("20260501_%06d_%08x", s%240000, s)
		start := 1777600000.0 + float64(s)*60
		if _, err := tx.Exec(`INSERT INTO sessions (id, source, user_id, started_at, message_count, title) VALUES (?, 'telegram', ?, ?, ?, ?)`,
			id, fmt.Sprint(s), start, perSession, fmt.Sprintf("topic %d", s)); err != nil {
			t.Fatal(err)
		}
		for m := range perSession {
			var calls any
			if m%5 == 4 {
				calls = `[{"id": "call_` + fmt.Sprint(m) + `", "function": {"name": "terminal", "arguments": "{}"}}]`
			}
			role := []string{"user", "assistant"}[m%2]
			content := fmt.Sprintf("message %d of session %d: the quick brown fox 狐狸 jumps over the lazy dog %s", m, s, strings.Repeat("lorem ipsum ", m%7))
			if _, err := ins.Exec(id, role, content, calls, start+float64(m)*0.5, m); err != nil {
				t.Fatal(err)
			}
		}
		key := fmt.Sprintf("agent:main:telegram:dm:%d", s)
		routing[key] = map[string]any{
			"session_key": key, "session_id": id, "created_at": "2026-05-01T00:00:00", "updated_at": "2026-05-01T00:10:00.5",
			"platform": "telegram", "chat_type": "dm", "total_tokens": s, "cost_status": "unknown",
			"origin": map[string]any{"platform": "telegram", "chat_id": fmt.Sprint(s), "chat_type": "dm"},
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(routing, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sessions", "sessions.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}
