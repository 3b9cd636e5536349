package sqlite

import (
	"context"
	_ "embed"
	"fmt"

	"hermes/projections/migrate"
)

// migrationsTable records the migrations applied to the file.
const migrationsTable = "schema_migrations"

//go:embed schema.sql
var schemaSQL string

// migrations are the schema steps of the event log, forward only: a
// released step is never edited; a change is a new step, and a log written
// by an older build (testdata/schema-1) must keep opening. The file's
// PRAGMA user_version is the last step applied. Logs written before steps
// were recorded are at version 1 and get their record on first open.
var migrations = []migrate.Step{
	{Version: 1, Name: "events table", Up: createEvents},
	{Version: 2, Name: "snapshots table", Up: createSnapshots},
}

// createEvents is step 1 on a fresh file: the events table and the
// application id that marks the file as a hermes event store. It checks
// again, under the write lock, that the file is still empty.
func createEvents(ctx context.Context, tx migrate.Tx) error {
	var appID, objects int64
	if err := tx.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&objects); err != nil {
		return err
	}
	if appID != 0 || objects != 0 {
		return fmt.Errorf("%w: application id %#x, %d schema objects", ErrNotEventStore, appID, objects)
	}
	if _, err := tx.ExecContext(ctx, schemaSQL); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID))
	return err
}
