package transcripts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"hermes/projections"
	"hermes/projections/transcripts/fts5"
)

// Reader answers queries on a transcripts file through a pool of read-only
// connections. It is safe for concurrent use, also while a [Projection]
// (in this process or another) applies batches to the same file: every
// query that reads more than one statement runs in one read transaction,
// so it sees one committed state.
type Reader struct {
	db *sql.DB
	// stmts holds the statements of the per-message lookups (hot path of
	// every append), prepared once.
	stmts projections.StmtCache
	// ranker ranks searches from FTS5's index read in Go, with the FTS
	// tables' row lengths in memory (package fts5); SQLite's bm25()
	// statement ranks what it declines.
	ranker *fts5.Ranker
	// snippets makes a prefix query's snippets for single rows.
	snippets snippetScratch
}

// OpenReader opens an existing transcripts file for queries only (for a
// CLI that searches while a server projects). It fails with
// [ErrNotProjection] unless the file was written by this projection.
func OpenReader(path string) (*Reader, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open transcripts reader %s: %w", path, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("open transcripts reader %s: %w", abs, err)
	}
	r, err := openReader(abs)
	if err != nil {
		return nil, fmt.Errorf("open transcripts reader %s: %w", abs, err)
	}
	name, _, err := storedName(context.Background(), r.db)
	if err == nil && name != Name {
		err = fmt.Errorf("%w: stored name %q, want %q", ErrNotProjection, name, Name)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open transcripts reader %s: %w", abs, err), r.Close())
	}
	return r, nil
}

func openReader(path string) (*Reader, error) {
	db, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(maxReaders)
	db.SetMaxIdleConns(maxReaders)
	r := &Reader{db: db}
	r.ranker = fts5.New(r.readTx, fts5.Options{})
	return r, nil
}

// Close releases the read pool.
func (r *Reader) Close() error {
	r.ranker.Close() // a background read of the search lengths
	return errors.Join(r.stmts.Close(), r.snippets.close(), r.db.Close())
}

// readTx runs fn in one read transaction (one snapshot of the file).
func (r *Reader) readTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	tx, err := r.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer func() {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			err = errors.Join(err, rbErr)
		}
	}()
	return fn(tx)
}
