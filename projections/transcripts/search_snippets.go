package transcripts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// snippetScratch makes the snippets of a page of rows in a private
// in-memory database, for the queries whose snippets are costly to make
// from the whole index (usesScratch). FTS5 sets up a prefix query over the
// whole index by merging the document lists of every term with the prefix
// (186,000 rows for deploy* over 200,000 messages), once per statement or
// per row asked about; snippet() depends only on the row's text, the query
// and the tokenizer (where the query's phrases occur in that row, nothing
// from other rows), so the same query over a table holding only the page's
// rows, with the same tokenizer, gives the same snippets at the cost of
// indexing those rows. The text is deleted after each page; nothing is
// written to a file.
type snippetScratch struct {
	mu sync.Mutex
	db *sql.DB
}

// scratchPages counts the pages whose snippets the scratch made, for tests.
var scratchPages atomic.Int64

// scratchTables are the FTS tables the scratch copies, with the scratch
// table's definition (the same column and tokenizer).
var scratchTables = map[string]string{
	"messages_fts":         `CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(content)`,
	"messages_fts_trigram": `CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_trigram USING fts5(content, tokenize='trigram')`,
}

// usesScratch says whether the snippets of query over table are made in
// the scratch: a prefix query (set up over the whole index for each row
// asked about), and any query of the trigram index, where each row asked
// about is looked for in the document list of every trigram of the
// query, segment by segment (about 10 ms a page over a million messages;
// the scratch takes about 1).
func usesScratch(table, query string) bool {
	if _, ok := scratchTables[table]; !ok {
		return false
	}
	return table == "messages_fts_trigram" || strings.Contains(query, "*")
}

// snippets returns the snippet (as pageRows' statement computes it) of
// each of ids under `table MATCH query`, reading the rows' indexed text in
// tx; rows that do not match are left out.
func (s *snippetScratch) snippets(ctx context.Context, tx *sql.Tx, table, query string, ids []int64) (map[int64]sql.NullString, error) {
	create, ok := scratchTables[table]
	if !ok {
		return nil, fmt.Errorf("no scratch table for %s", table)
	}
	texts := make(map[int64]string, len(ids))
	rows, err := tx.QueryContext(ctx, `SELECT id, c0 FROM `+table+`_content WHERE id IN (`+placeholders(len(ids))+`)`, int64s(ids)...)
	if err != nil {
		return nil, fmt.Errorf("snippet text: %w", err)
	}
	for rows.Next() {
		var id int64
		var text sql.NullString
		if err := rows.Scan(&id, &text); err != nil {
			return nil, errors.Join(fmt.Errorf("snippet text: %w", err), rows.Close())
		}
		texts[id] = text.String
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("snippet text: %w", err)
	}

	scratchPages.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		db, err := sql.Open("sqlite", "file:hermes-snippets?mode=memory")
		if err != nil {
			return nil, fmt.Errorf("snippet scratch: %w", err)
		}
		db.SetMaxOpenConns(1) // one connection: the in-memory database is its own
		db.SetMaxIdleConns(1)
		db.SetConnMaxIdleTime(0)
		db.SetConnMaxLifetime(0)
		s.db = db
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("snippet scratch: %w", err)
	}
	defer conn.Close()
	out := map[int64]sql.NullString{}
	err = func() error {
		if _, err := conn.ExecContext(ctx, create); err != nil {
			return err
		}
		for id, text := range texts {
			if _, err := conn.ExecContext(ctx, `INSERT INTO `+table+`(rowid, content) VALUES (?, ?)`, id, text); err != nil {
				return err
			}
		}
		rows, err := conn.QueryContext(ctx, `SELECT rowid, snippet(`+table+`, 0, '>>>', '<<<', '...', 40) FROM `+table+` WHERE `+table+` MATCH ?`, query)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var snippet sql.NullString
			if err := rows.Scan(&id, &snippet); err != nil {
				return err
			}
			out[id] = snippet
		}
		return rows.Err()
	}()
	// The page's text leaves the scratch table whatever happened.
	if _, delErr := conn.ExecContext(context.WithoutCancel(ctx), `DELETE FROM `+table); delErr != nil {
		// Drop the database, and the text with it.
		err = errors.Join(err, delErr, conn.Close(), s.db.Close())
		s.db = nil
	}
	if err != nil {
		return nil, fmt.Errorf("snippet scratch: %w", err)
	}
	return out, nil
}

func (s *snippetScratch) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return nil
	}
	return s.db.Close()
}
