package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// StmtCache holds statements prepared once on a pool and reused by every
// later call: modernc.org/sqlite parses the SQL of every unprepared
// QueryContext/ExecContext again, which on a hot path (a lookup per
// appended message) costs more than running the query. database/sql
// prepares a cached statement on each pooled connection the first time it
// runs there. The zero value is ready to use; it is safe for concurrent use.
type StmtCache struct {
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	closed bool
}

// Stmt returns the statement for query on db, preparing it on first use.
func (c *StmtCache) Stmt(ctx context.Context, db *sql.DB, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("prepare: %w", sql.ErrConnDone)
	}
	if st, ok := c.stmts[query]; ok {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if c.stmts == nil {
		c.stmts = make(map[string]*sql.Stmt)
	}
	c.stmts[query] = st
	return st, nil
}

// Close closes every cached statement; later calls fail.
func (c *StmtCache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for _, st := range c.stmts {
		errs = append(errs, st.Close())
	}
	c.stmts = nil
	return errors.Join(errs...)
}
