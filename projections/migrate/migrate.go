// Package migrate runs the numbered, forward-only schema migrations of a
// hermes SQLite file: the event log and each read model.
//
// A file's schema version is its PRAGMA user_version: the number of the
// last step applied. Run applies the steps above it in order, each in its
// own BEGIN IMMEDIATE transaction that also records the step in the file's
// record table (version, name, applied_at) and moves user_version, so a
// crash or a failing step leaves the file at the previous version, and two
// processes opening the same file apply each step once. A file whose
// version is above the last step this build knows is refused with
// [ErrNewer]. A file written before migrations were recorded is adopted:
// its version (user_version, or what [Plan.Legacy] finds) is recorded as
// applied without running the steps again.
//
// It lives under projections, and uses the standard library only, because
// both layers that own SQLite files (projections and adapters) may import
// it. It must not know any schema: the steps are its callers'.
package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrNewer: the file's schema version is above the last step of this
// build; opening it could misread or damage it.
var ErrNewer = errors.New("schema is newer than this build")

// Tx is the transaction a step runs in (the write connection inside
// BEGIN IMMEDIATE).
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Step is one numbered change of a schema. Steps are never edited or
// removed once released: a change is a new step.
type Step struct {
	// Version is the step's number: the first is 1, and they follow on.
	Version int
	// Name says what the step does, for the record table.
	Name string
	// Up applies the step inside the open transaction.
	Up func(ctx context.Context, tx Tx) error
}

// SQL is an Up that executes text (one or more statements).
func SQL(text string) func(context.Context, Tx) error {
	return func(ctx context.Context, tx Tx) error {
		_, err := tx.ExecContext(ctx, text)
		return err
	}
}

// Plan is what Run applies to one file.
type Plan struct {
	// Table is the record table, created by the first step recorded.
	Table string
	// Steps are the file's migrations, Version 1, 2, … in order.
	Steps []Step
	// Legacy, when set, says the version of a file whose user_version is 0
	// but which was written by a build before migrations (0: a fresh
	// file). It runs inside the transaction.
	Legacy func(ctx context.Context, tx Tx) (int, error)
	// Now stamps applied_at (default time.Now).
	Now func() time.Time
}

// Latest is the version of a file with every step of p applied.
func (p Plan) Latest() int { return len(p.Steps) }

// Version reads a file's schema version (its PRAGMA user_version).
func Version(ctx context.Context, q Tx) (int, error) {
	var v int
	if err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// Run brings the file of conn to p.Latest, one transaction per step, and
// returns the version the file was at and the version it is at now. conn
// must not be in a transaction.
func Run(ctx context.Context, conn *sql.Conn, p Plan) (from, to int, err error) {
	if err := p.validate(); err != nil {
		return 0, 0, err
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	// An up-to-date file, the usual case, is only read: no write lock.
	v, err := Version(ctx, conn)
	if err != nil {
		return 0, 0, err
	}
	if v == p.Latest() && v > 0 {
		recorded, err := p.recorded(ctx, conn)
		if err != nil {
			return 0, 0, err
		}
		if recorded == v {
			return v, v, nil
		}
	}
	from = -1
	for {
		v, done, err := p.next(ctx, conn)
		if from < 0 {
			from = v
		}
		if err != nil || done {
			return from, v, err
		}
	}
}

func (p Plan) validate() error {
	if p.Table == "" {
		return errors.New("migrate: no record table")
	}
	for i, s := range p.Steps {
		if s.Version != i+1 || s.Name == "" || s.Up == nil {
			return fmt.Errorf("migrate: step %d (%q) is not step %d with a name and an Up", s.Version, s.Name, i+1)
		}
	}
	return nil
}

// next applies, in one transaction, the next thing the file needs: the
// adoption of a file written before migrations were recorded, or the step
// above its version. It reports the version before the transaction, and
// whether the file was already at p.Latest with every step recorded.
func (p Plan) next(ctx context.Context, conn *sql.Conn) (v int, done bool, err error) {
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return 0, false, fmt.Errorf("migrate: begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			if _, rbErr := conn.ExecContext(context.Background(), "ROLLBACK"); rbErr != nil {
				err = errors.Join(err, fmt.Errorf("migrate: rollback: %w", rbErr))
			}
		}
	}()
	commit := func() error {
		if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
			return fmt.Errorf("migrate: commit: %w", err)
		}
		committed = true
		return nil
	}

	// Read again under the write lock: another process may have moved on.
	if v, err = Version(ctx, conn); err != nil {
		return 0, false, err
	}
	if v == 0 && p.Legacy != nil {
		legacy, err := p.Legacy(ctx, conn)
		if err != nil {
			return 0, false, fmt.Errorf("migrate: detect the version of a file without one: %w", err)
		}
		if legacy > 0 {
			if err := p.adopt(ctx, conn, 0, legacy); err != nil {
				return 0, false, err
			}
			return 0, false, commit()
		}
	}
	if v > p.Latest() {
		return v, false, fmt.Errorf("%w: file schema %d, this build knows %d", ErrNewer, v, p.Latest())
	}
	recorded, err := p.recorded(ctx, conn)
	if err != nil {
		return v, false, err
	}
	if recorded < v {
		// Written before this file recorded its migrations.
		if err := p.adopt(ctx, conn, recorded, v); err != nil {
			return v, false, err
		}
		return v, false, commit()
	}
	if v == p.Latest() {
		return v, true, commit()
	}
	s := p.Steps[v]
	if err := s.Up(ctx, conn); err != nil {
		return v, false, fmt.Errorf("migrate: step %d (%s): %w", s.Version, s.Name, err)
	}
	if err := p.createTable(ctx, conn); err != nil {
		return v, false, err
	}
	if err := p.record(ctx, conn, s, false); err != nil {
		return v, false, err
	}
	if err := setVersion(ctx, conn, s.Version); err != nil {
		return v, false, err
	}
	return v, false, commit()
}

// adopt records steps above recorded up to version as applied, without
// running them, and sets the file's version.
func (p Plan) adopt(ctx context.Context, tx Tx, recorded, version int) error {
	if version > p.Latest() {
		return fmt.Errorf("%w: file schema %d, this build knows %d", ErrNewer, version, p.Latest())
	}
	if err := p.createTable(ctx, tx); err != nil {
		return err
	}
	for _, s := range p.Steps[recorded:version] {
		if err := p.record(ctx, tx, s, true); err != nil {
			return err
		}
	}
	return setVersion(ctx, tx, version)
}

func (p Plan) createTable(ctx context.Context, tx Tx) error {
	_, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+quoteIdent(p.Table)+` (
	version    INTEGER PRIMARY KEY,
	name       TEXT    NOT NULL,
	applied_at TEXT    NOT NULL,
	adopted    INTEGER NOT NULL DEFAULT 0
)`)
	if err != nil {
		return fmt.Errorf("migrate: create %s: %w", p.Table, err)
	}
	return nil
}

func (p Plan) record(ctx context.Context, tx Tx, s Step, adopted bool) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO "+quoteIdent(p.Table)+" (version, name, applied_at, adopted) VALUES (?, ?, ?, ?)",
		s.Version, s.Name, p.Now().UTC().Format(time.RFC3339Nano), adopted)
	if err != nil {
		return fmt.Errorf("migrate: record step %d: %w", s.Version, err)
	}
	return nil
}

// recorded is the last version in the record table (0 without one).
func (p Plan) recorded(ctx context.Context, tx Tx) (int, error) {
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", p.Table).Scan(&n); err != nil {
		return 0, fmt.Errorf("migrate: read %s: %w", p.Table, err)
	}
	if n == 0 {
		return 0, nil
	}
	var v int
	if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM "+quoteIdent(p.Table)).Scan(&v); err != nil {
		return 0, fmt.Errorf("migrate: read %s: %w", p.Table, err)
	}
	return v, nil
}

func setVersion(ctx context.Context, tx Tx, v int) error {
	// A pragma takes no parameters; v is an int.
	if _, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(v)); err != nil {
		return fmt.Errorf("migrate: set schema version %d: %w", v, err)
	}
	return nil
}

func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
