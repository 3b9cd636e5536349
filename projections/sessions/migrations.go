package sessions

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"

	"hermes/projections/migrate"
)

// migrationsTable records the migrations applied to lanes.db.
const migrationsTable = "schema_migrations"

//go:embed schema.sql
var schemaSQL string

// migrations are the schema steps of lanes.db, forward only: a released
// step is never edited, a change is a new step. A change of what the rows
// mean is a bump of [Name] instead (the file is rebuilt from position 0).
var migrations = []migrate.Step{
	{Version: 1, Name: "lanes, restart_failures and meta", Up: migrate.SQL(schemaSQL)},
	{Version: 2, Name: "restart_failures.node: the node that recorded a count",
		Up: migrate.SQL(`ALTER TABLE restart_failures ADD COLUMN node TEXT NOT NULL DEFAULT ''`)},
	// SessionKeys (the sweeps' list of lanes) read every lane's row for its
	// pruned flag: 10-14 ms at 10,000 lanes before a sweep could start.
	{Version: 3, Name: "lanes_live: the keys of the lanes not pruned, in order",
		Up: migrate.SQL(`CREATE INDEX lanes_live ON lanes(session_key) WHERE pruned = 0`)},
	// Every resolve and message touches its lane's updated_at, and the
	// index on it made each touch rewrite a second, random page: 35% of
	// the lanes read model's CPU per touch (BenchmarkApplyTouches at
	// 100,000 lanes, 22.9 → 15.0 µs). Only listing lanes by recency read
	// it, which now scans them (24 ms for the newest 100 of 100,000).
	{Version: 4, Name: "drop lanes_updated_at: touches write one page, not two",
		Up: migrate.SQL(`DROP INDEX IF EXISTS lanes_updated_at`)},
	{Version: 5, Name: "gateway_runs: the runs of the gateway processes (gatewayrun-<gateway>)",
		Up: migrate.SQL(gatewayRunsSQL)},
	// No event set them before this step: every existing row has none.
	{Version: 6, Name: "lanes.model_override and lanes.metadata: the session's entry state (Hermes d7f5acb9)",
		Up: migrate.SQL(`ALTER TABLE lanes ADD COLUMN model_override TEXT NOT NULL DEFAULT '';
ALTER TABLE lanes ADD COLUMN metadata TEXT NOT NULL DEFAULT ''`)},
}

// migrateSchema brings the file of db to the last step. A lanes.db written
// before migrations (user_version 0, with a lanes table) is at version 1.
func migrateSchema(ctx context.Context, db *sql.DB, steps []migrate.Step) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	_, _, err = migrate.Run(ctx, conn, migrate.Plan{Table: migrationsTable, Steps: steps, Legacy: legacyVersion})
	return errors.Join(err, conn.Close())
}

func legacyVersion(ctx context.Context, tx migrate.Tx) (int, error) {
	var n int
	err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'lanes'").Scan(&n)
	if err != nil || n == 0 {
		return 0, err
	}
	return 1, nil
}
