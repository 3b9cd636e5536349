package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// step is one numbered change of the schema. A released step is never
// edited or removed: a change is a new step, and a schema migrated by an
// older build must keep opening.
type step struct {
	version int
	name    string
	file    string
}

// steps are the schema's migrations, in order. The schema_migrations table
// of the store's schema records those applied.
var steps = []step{
	{1, "events table", "migrations/1_events.sql"},
	{2, "snapshots table", "migrations/2_snapshots.sql"},
	{3, "unpurged erasures table", "migrations/3_unpurged.sql"},
}

// migrate brings the schema to the last step of s.cfg.migrations, one
// transaction per step, then checks what the global order rests on.
func (s *Store) migrate(ctx context.Context, conn *pgx.Conn) error {
	for {
		done, err := s.migrateStep(ctx, conn)
		if err != nil {
			return err
		}
		if done {
			break
		}
	}
	return s.checkSequence(ctx, conn)
}

// migrateStep applies, in one transaction holding the schema's migration
// lock (so that processes opening the store together apply each step
// once), the step after the schema's version, creating the schema and the
// record table on first use. It reports done when nothing was left to
// apply.
func (s *Store) migrateStep(ctx context.Context, conn *pgx.Conn) (done bool, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("migrate: begin: %w", err)
	}
	defer func() {
		if err != nil || done {
			if rbErr := tx.Rollback(context.Background()); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) {
				err = errors.Join(err, fmt.Errorf("migrate: rollback: %w", rbErr))
			}
		}
	}()
	if _, err := tx.Exec(ctx, s.sql.lock, s.keys.migrate); err != nil {
		return false, fmt.Errorf("migrate: lock: %w", err)
	}
	var schemaExists, recorded bool
	var objects int
	err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1),
		EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = 'schema_migrations' AND c.relkind = 'r'),
		(SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1)`,
		s.schema).Scan(&schemaExists, &recorded, &objects)
	if err != nil {
		return false, fmt.Errorf("migrate: read the schema: %w", err)
	}
	version := 0
	switch {
	case recorded:
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+s.sql.schema+".schema_migrations").Scan(&version); err != nil {
			return false, fmt.Errorf("migrate: read the applied steps: %w", err)
		}
	case objects > 0:
		return false, fmt.Errorf("%w: schema %s holds %d objects and no schema_migrations table", ErrNotEventStore, s.schema, objects)
	}
	latest := len(s.cfg.migrations)
	if version > latest {
		return false, fmt.Errorf("%w: schema %s is at step %d, this build knows %d", ErrNewerSchema, s.schema, version, latest)
	}
	if version == latest && recorded {
		return true, nil
	}
	if !schemaExists {
		// Created only when missing: CREATE SCHEMA IF NOT EXISTS needs the
		// right to create schemas even when the schema is there, and an
		// operator may have made it for a role that lacks that right.
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+s.sql.schema); err != nil {
			return false, fmt.Errorf("migrate: create schema %s: %w", s.schema, err)
		}
	}
	if !recorded {
		if _, err := tx.Exec(ctx, `CREATE TABLE `+s.sql.schema+`.schema_migrations (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return false, fmt.Errorf("migrate: create schema_migrations: %w", err)
		}
	}
	if version == latest {
		return false, commitStep(ctx, tx)
	}
	st := s.cfg.migrations[version]
	text, err := migrationFiles.ReadFile(st.file)
	if err != nil {
		return false, fmt.Errorf("migrate: step %d (%s): %w", st.version, st.name, err)
	}
	if _, err := tx.Exec(ctx, strings.ReplaceAll(string(text), "{schema}", s.sql.schema)); err != nil {
		return false, fmt.Errorf("migrate: step %d (%s): %w", st.version, st.name, err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+s.sql.schema+".schema_migrations (version, name) VALUES ($1, $2)", st.version, st.name); err != nil {
		return false, fmt.Errorf("migrate: record step %d: %w", st.version, err)
	}
	return false, commitStep(ctx, tx)
}

func commitStep(ctx context.Context, tx pgx.Tx) error {
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}

// checkReadable checks, changing nothing, that the schema holds a store
// at this build's last step, for a read-only open.
func (s *Store) checkReadable(ctx context.Context, conn *pgx.Conn) error {
	var recorded bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = 'schema_migrations' AND c.relkind = 'r')`, s.schema).Scan(&recorded); err != nil {
		return fmt.Errorf("read the schema: %w", err)
	}
	if !recorded {
		return fmt.Errorf("%w: schema %s holds no hermes event store", ErrOlderSchema, s.schema)
	}
	var version int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+s.sql.schema+".schema_migrations").Scan(&version); err != nil {
		return fmt.Errorf("read the applied steps: %w", err)
	}
	switch latest := len(s.cfg.migrations); {
	case version > latest:
		return fmt.Errorf("%w: schema %s is at step %d, this build knows %d", ErrNewerSchema, s.schema, version, latest)
	case version < latest:
		return fmt.Errorf("%w: schema %s is at step %d, this build is at %d", ErrOlderSchema, s.schema, version, latest)
	}
	return s.checkSequence(ctx, conn)
}

// checkSequence refuses a log whose position sequence hands out more than
// one value at a time: each session would then take a range of its own,
// and positions would stop following the order of the order lock.
func (s *Store) checkSequence(ctx context.Context, conn *pgx.Conn) error {
	var cache int64
	if err := conn.QueryRow(ctx, s.sql.sequenceCache, s.sql.schema+".events").Scan(&cache); err != nil {
		return fmt.Errorf("read the position sequence: %w", err)
	}
	if cache != 1 {
		return fmt.Errorf("%w: the position sequence of %s.events caches %d values per session, which breaks the global order; ALTER it back to CACHE 1",
			ErrNotEventStore, s.schema, cache)
	}
	return nil
}
