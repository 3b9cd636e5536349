CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS lanes (
	session_key           TEXT PRIMARY KEY,
	version               INTEGER NOT NULL,
	session_id            TEXT NOT NULL,
	created_at            INTEGER NOT NULL,
	updated_at            INTEGER NOT NULL,
	origin                TEXT NOT NULL,
	display_name          TEXT NOT NULL,
	platform              TEXT NOT NULL,
	chat_type             TEXT NOT NULL,
	input_tokens          INTEGER NOT NULL,
	output_tokens         INTEGER NOT NULL,
	cache_read_tokens     INTEGER NOT NULL,
	cache_write_tokens    INTEGER NOT NULL,
	total_tokens          INTEGER NOT NULL,
	estimated_cost_usd    REAL NOT NULL,
	cost_status           TEXT NOT NULL,
	last_prompt_tokens    INTEGER NOT NULL,
	was_auto_reset        INTEGER NOT NULL,
	auto_reset_reason     TEXT NOT NULL,
	reset_had_activity    INTEGER NOT NULL,
	is_fresh_reset        INTEGER NOT NULL,
	expiry_finalized      INTEGER NOT NULL,
	suspended             INTEGER NOT NULL,
	suspend_reason        TEXT NOT NULL,
	resume_pending        INTEGER NOT NULL,
	resume_reason         TEXT NOT NULL,
	last_resume_marked_at INTEGER NOT NULL,
	previous_session_id   TEXT NOT NULL,
	active_processes      INTEGER NOT NULL,
	open_turn_id          TEXT NOT NULL,
	turn_started_at       INTEGER NOT NULL,
	had_activity          INTEGER NOT NULL,
	pruned                INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS lanes_session_id ON lanes(session_id);
CREATE INDEX IF NOT EXISTS lanes_updated_at ON lanes(updated_at DESC);

CREATE TABLE IF NOT EXISTS restart_failures (
	session_key TEXT PRIMARY KEY,
	count       INTEGER NOT NULL
);
