// Package storage tells the errors of a full or failing disk apart from the
// others, for every layer that owns a SQLite file (the event log and the
// read models): such an error is wrapped with [events.ErrStorageFull] so
// callers can refuse the write clearly and retry later instead of failing.
//
// It lives under projections because both layers that own SQLite files
// (projections and adapters) may import it.
package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"hermes/events"
)

// IsFull reports whether err says the disk is full or refused a write:
// SQLite's SQLITE_FULL or SQLITE_IOERR (any extended code), or the OS's
// ENOSPC or EDQUOT; or it already wraps events.ErrStorageFull.
func IsFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, events.ErrStorageFull) {
		return true
	}
	var se *sqlitedriver.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR:
			return true
		}
	}
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// Classify wraps err with events.ErrStorageFull when IsFull says so (and it
// does not already); any other error is returned unchanged.
func Classify(err error) error {
	if err == nil || errors.Is(err, events.ErrStorageFull) || !IsFull(err) {
		return err
	}
	return fmt.Errorf("%w: %w", events.ErrStorageFull, err)
}

// maxPages is SQLite's largest max_page_count: no bound.
const maxPages = 4294967294

// PageLimit is a bound on a SQLite file's growth (max_page_count) set from
// another goroutine and put in force by the writer, on its connection,
// before each batch. Its zero value is no bound and costs nothing.
type PageLimit struct {
	want atomic.Int64
	// ever: a bound was set once, so every connection must be told (a
	// connection of a pool may still have the old one).
	ever atomic.Bool
}

// Set bounds the file to n pages (0 lifts the bound). A bound below the
// file's size holds it at its size.
func (l *PageLimit) Set(n int64) {
	l.want.Store(max(n, 0))
	l.ever.Store(true)
}

// Execer is a connection or transaction.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Apply puts the bound in force on c (a transaction or the connection that
// is about to write).
func (l *PageLimit) Apply(ctx context.Context, c Execer) error {
	if !l.ever.Load() {
		return nil
	}
	n := l.want.Load()
	if n <= 0 {
		n = maxPages
	}
	if _, err := c.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", n)); err != nil {
		return fmt.Errorf("set max_page_count: %w", err)
	}
	return nil
}
