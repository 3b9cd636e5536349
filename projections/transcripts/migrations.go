package transcripts

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"

	"hermes/projections/migrate"
)

// migrationsTable records the migrations applied to state.db. It is named
// hermes_* like the rest of hermes' bookkeeping, apart from Hermes'
// schema_version (which stays at [SchemaVersion]: the file keeps Hermes'
// format, whatever hermes adds).
const migrationsTable = "hermes_schema_migrations"

//go:embed schema.sql
var schemaSQL string

// migrations are the schema steps of state.db, forward only: a released
// step is never edited, a change is a new step. A change of the rows
// derived from the same events is a bump of [Name] instead (the file is
// emptied and rebuilt from position 0).
var migrations = []migrate.Step{
	{Version: 1, Name: "Hermes schema 11 with hermes bookkeeping", Up: createSchema},
	{Version: 2, Name: "sessions.archived (Hermes' set_session_archived)", Up: addArchived},
	{Version: 3, Name: "the trigram index merges 16 segments at a time", Up: mergeTrigramsWider},
	{Version: 4, Name: "sessions.extra and messages.extra (columns of newer Hermes schemas, imported)", Up: addExtra},
}

// addExtra is step 4: the columns of a newer Hermes schema an imported row
// had beyond schema 11, as a JSON object by column name (NULL for rows
// hermes wrote itself), so exports show them. The projection's name moved
// to transcripts.v3 with it: rows imported before are rebuilt with theirs.
func addExtra(ctx context.Context, tx migrate.Tx) error {
	for _, q := range []string{"ALTER TABLE sessions ADD COLUMN extra TEXT", "ALTER TABLE messages ADD COLUMN extra TEXT"} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// createSchema is step 1: Hermes' schema 11, recorded in schema_version as
// Hermes does, plus the hermes_* tables.
func createSchema(ctx context.Context, tx migrate.Tx) error {
	if _, err := tx.ExecContext(ctx, schemaSQL); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx,
		"INSERT INTO schema_version (version) SELECT ? WHERE NOT EXISTS (SELECT 1 FROM schema_version)", SchemaVersion)
	return err
}

// migrateSchema brings the file of conn to the last step. A state.db
// written by hermes before migrations (user_version 0, a projection name in
// state_meta) is at version 1.
func migrateSchema(ctx context.Context, conn *sql.Conn, steps []migrate.Step) error {
	_, _, err := migrate.Run(ctx, conn, migrate.Plan{Table: migrationsTable, Steps: steps, Legacy: legacyVersion})
	if err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	return nil
}

func legacyVersion(ctx context.Context, tx migrate.Tx) (int, error) {
	name, _, err := storedName(ctx, tx)
	if err != nil || name == "" {
		return 0, err
	}
	return 1, nil
}

// hasMigrations reports whether the file holds hermes' migration record:
// a file hermes created, even if it crashed before recording its name.
func hasMigrations(ctx context.Context, q queryer) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", migrationsTable).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("read migration record: %w", err)
	}
	return n > 0, nil
}

// trigramAutomerge is the trigram index's FTS5 automerge (step 3).
const trigramAutomerge = 16

// mergeTrigramsWider is step 3: the trigram index merges its segments
// trigramAutomerge at a time instead of FTS5's 4 (the setting is stored in
// the index's _config table, which Hermes' SQLite reads as any other). It
// is two thirds of the FTS5 work of a live batch and only CJK queries read
// it: with fewer, larger merges a live event costs ~13% less CPU (batches
// of 384: 51.7-55.3 -> 44.7-47.9 CPU-µs/event), while a CJK search reads
// more segments (~1.2x its CPU on a file written live; the segments a
// rebuild writes are not affected). The unicode61 index, which every
// other query reads, keeps 4.
func mergeTrigramsWider(ctx context.Context, tx migrate.Tx) error {
	_, err := tx.ExecContext(ctx,
		"INSERT INTO messages_fts_trigram(messages_fts_trigram, rank) VALUES ('automerge', ?)", trigramAutomerge)
	return err
}
