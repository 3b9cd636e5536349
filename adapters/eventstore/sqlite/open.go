package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"hermes/projections/migrate"
)

func openWriter(path string, cfg config, tail *committedTail, dmg *damage, onCommit func(), stop <-chan struct{}) (*writer, error) {
	db, err := sql.Open("sqlite", dsn(path, false, cfg.busyTimeout))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	w := &writer{
		db:          db,
		conn:        conn,
		clock:       cfg.clock,
		tail:        tail,
		damage:      dmg,
		onCommit:    onCommit,
		reqs:        make(chan *request, maxBatchRequests),
		ops:         make(chan op),
		stop:        stop,
		done:        make(chan struct{}),
		versions:    make(map[string]uint64),
		dataVersion: -1,
		soleWriter:  cfg.soleWriter,
		pending:     make(map[string]uint64),
		inserts:     make(map[insertKey]*sql.Stmt),
		migrations:  cfg.migrations,
	}
	w.notScrubbedSinceOpen.Store(true)
	if err := w.init(ctx); err != nil {
		return nil, errors.Join(err, w.close())
	}
	go w.run()
	return w, nil
}

// init checks the file before changing anything in it (journal mode
// included), then brings its schema to the last migration (creating it if
// the file is fresh). Two processes initialising or migrating the same file
// at once are serialised by BEGIN IMMEDIATE.
func (w *writer) init(ctx context.Context) error {
	if _, err := checkSchema(ctx, w.conn, true, len(w.migrations)); err != nil && !errors.Is(err, errFresh) {
		return err
	}
	var mode string
	if err := w.conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return fmt.Errorf("set journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("set journal mode: got %q, want wal", mode)
	}
	plan := migrate.Plan{Table: migrationsTable, Steps: w.migrations, Now: w.clock}
	if _, _, err := migrate.Run(ctx, w.conn, plan); err != nil {
		if errors.Is(err, migrate.ErrNewer) {
			return fmt.Errorf("%w: %w", ErrNewerSchema, err)
		}
		return fmt.Errorf("migrate schema: %w", err)
	}
	// The header was read by checkSchema; the tail is read and decoded
	// here: a damaged log is refused rather than served from (check.go).
	if err := checkTail(ctx, w.conn); err != nil {
		return err
	}
	return w.prepare(ctx)
}

func (w *writer) prepare(ctx context.Context) error {
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&w.stmtBegin, "BEGIN IMMEDIATE"},
		{&w.stmtCommit, "COMMIT"},
		{&w.stmtRollback, "ROLLBACK"},
		{&w.stmtSavepoint, "SAVEPOINT request"},
		{&w.stmtRelease, "RELEASE request"},
		{&w.stmtRollbackTo, "ROLLBACK TO request"},
		{&w.stmtDataVersion, "PRAGMA data_version"},
		{&w.stmtStreamVersion, "SELECT coalesce(max(version), 0) FROM events WHERE stream = ?"},
		{&w.stmtStreamVersions, "SELECT j.value, (SELECT coalesce(max(version), 0) FROM events WHERE stream = j.value) FROM json_each(?) AS j"},
		{&w.stmtLookupID, "SELECT stream, version, position FROM events WHERE event_id = ?"},
		{&w.stmtAutoCheckpointOff, "PRAGMA wal_autocheckpoint = 0"},
		{&w.stmtAutoCheckpointOn, fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", autoCheckpointPages)},
		{&w.stmtCheckpoint, "PRAGMA wal_checkpoint(PASSIVE)"},
	} {
		stmt, err := w.conn.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.stmt = stmt
	}
	return nil
}

// close releases the connection; only after run has returned.
func (w *writer) close() error {
	var errs []error
	for _, s := range []*sql.Stmt{
		w.stmtBegin, w.stmtCommit, w.stmtRollback, w.stmtSavepoint, w.stmtRelease, w.stmtRollbackTo,
		w.stmtDataVersion, w.stmtStreamVersion, w.stmtStreamVersions, w.stmtLookupID,
		w.stmtAutoCheckpointOff, w.stmtAutoCheckpointOn, w.stmtCheckpoint,
	} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	for _, s := range w.inserts {
		errs = append(errs, s.Close())
	}
	errs = append(errs, w.conn.Close(), w.db.Close())
	return errors.Join(errs...)
}
