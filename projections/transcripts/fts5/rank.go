package fts5

import (
	"container/heap"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"modernc.org/libc"
)

// Tokenizer is the tokenizer of an FTS5 table, as far as the ranker
// reproduces it (see parseFastQuery).
type Tokenizer int

const (
	// Unicode61 is FTS5's default tokenizer (fts5(content)).
	Unicode61 Tokenizer = iota
	// Trigram is tokenize='trigram'.
	Trigram
)

// Table is an FTS5 table of one column that a Ranker reads.
type Table struct {
	// Name is the table's name: a fixed name, never user input (it is
	// written into statements).
	Name      string
	Tokenizer Tokenizer
}

// ErrDeclined: the Ranker does not rank this query over this index
// exactly (the query's grammar, the index's layout, the row lengths not in
// memory yet, another SQLite version); SQLite's own statement must answer.
var ErrDeclined = errors.New("fts5: the Go ranker declines; rank with SQLite's bm25()")

// Options tune a Ranker. The zero value is what a server runs with.
type Options struct {
	// Off declines every query: SQLite's statement ranks them all
	// (tests compare both ways).
	Off bool
	// LoadLengthsInline reads the row lengths of a table in the search
	// that needs them, instead of declining it and reading them in the
	// background (tests, to rank deterministically).
	LoadLengthsInline bool
	// ParallelPages is how long (in leaf pages, about 4 KB each) the
	// longest term of a phrase must be for the phrase to be read by
	// segments on two goroutines; 0 is DefaultParallelPages, a negative
	// value never.
	ParallelPages int64
}

// DefaultParallelPages is Options.ParallelPages' default.
const DefaultParallelPages = 256

// ReadTx runs fn in one read transaction of the database that holds the
// tables: the Ranker reads row lengths in the background through it.
type ReadTx func(ctx context.Context, fn func(tx *sql.Tx) error) error

// Ranker ranks full-text queries over FTS5 tables as bm25() does, from
// FTS5's index read in Go (see the package doc for what is exact, and
// when SQLite answers instead). It keeps each table's row lengths in
// memory. Safe for concurrent use; Close stops its background reads.
type Ranker struct {
	opts    Options
	readTx  ReadTx
	lengths docLengths

	// sqliteVersion is the SQLite the reader reads (SQLiteVersion; a
	// test sets another).
	sqliteVersion string
	versionOnce   sync.Once
	versionErr    error

	ranked, bySegments, merged atomic.Int64
}

// New returns a Ranker that reads row lengths in the background through
// readTx.
func New(readTx ReadTx, o Options) *Ranker {
	if o.ParallelPages == 0 {
		o.ParallelPages = DefaultParallelPages
	}
	return &Ranker{opts: o, readTx: readTx, sqliteVersion: SQLiteVersion}
}

// Options returns the options the Ranker was made with.
func (r *Ranker) Options() Options { return r.opts }

// Stats counts what a Ranker did (tests look at them).
type Stats struct {
	// Ranked is how many queries it ranked (did not decline).
	Ranked int64
	// BySegments is how many phrases it read by segments on two
	// goroutines.
	BySegments int64
	// Merged is how many phrases or prefixes it read from merged
	// doclists because a newer segment held rows of an older one.
	Merged int64
}

// Stats returns the counts so far.
func (r *Ranker) Stats() Stats {
	return Stats{Ranked: r.ranked.Load(), BySegments: r.bySegments.Load(), Merged: r.merged.Load()}
}

// Close stops the background reads of row lengths and waits for them.
func (r *Ranker) Close() { r.lengths.close() }

// WaitLengths waits for the background reads of row lengths in flight.
func (r *Ranker) WaitLengths() { r.lengths.loads.Wait() }

// checkVersion declines every query when the linked SQLite is not the one
// whose index layout, bm25() and log() this package reproduces.
func (r *Ranker) checkVersion(ctx context.Context, tx *sql.Tx) error {
	r.versionOnce.Do(func() {
		var v string
		if err := tx.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&v); err != nil {
			r.versionErr = fmt.Errorf("%w: sqlite_version(): %v", ErrDeclined, err)
		} else if v != r.sqliteVersion {
			r.versionErr = fmt.Errorf("%w: SQLite %s is linked, the reader reads %s's layout", ErrDeclined, v, r.sqliteVersion)
		}
	})
	return r.versionErr
}

// Rank scores every match of query (a query as FTS5 MATCH takes it) in t,
// in tx, as `SELECT rowid, bm25(t) FROM t WHERE t MATCH query` would, bit
// for bit. An error wrapping ErrDeclined says SQLite's statement must
// answer instead; any other error is the transaction's.
func (r *Ranker) Rank(ctx context.Context, tx *sql.Tx, t Table, query string) (*Ranking, error) {
	if r.opts.Off {
		return nil, fmt.Errorf("%w: switched off", ErrDeclined)
	}
	fq, ok := parseFastQuery(t.Tokenizer, query)
	if !ok {
		return nil, fmt.Errorf("%w: the query is not one the Go ranker reads", ErrDeclined)
	}
	if err := r.checkVersion(ctx, tx); err != nil {
		return nil, err
	}
	rk, err := r.scores(ctx, tx, t.Name, fq)
	if errors.Is(err, errUnsupportedIndex) {
		return nil, fmt.Errorf("%w: %w", ErrDeclined, err)
	}
	if err != nil {
		return nil, err
	}
	r.ranked.Add(1)
	return rk, nil
}

// Warm starts reading, in the background, the row lengths of tables that
// ranking needs (about 1 s of CPU and 8 MB at 1,000,000 rows), so that the
// first searches after a start are not declined while they are read. A
// server calls it once its read models have caught up; a one-shot search
// does not.
func (r *Ranker) Warm(tables ...Table) {
	for _, t := range tables {
		r.loadLengthsLater(t.Name)
	}
}

// Match is one match of a Ranking: its rowid and its bm25() value.
type Match struct {
	ID    int64
	Score float64
	// expansion: for a query with one prefix phrase, the only term of the
	// prefix the row holds (index in the ranking's expansions; -1:
	// several, or none).
	expansion int32
}

// better is the order of `ORDER BY bm25(t), rowid`: lower bm25() first,
// then ascending rowid.
func better(a, b Match) bool {
	return a.Score < b.Score || (a.Score == b.Score && a.ID < b.ID)
}

// Ranking is every match of a query with its score.
type Ranking struct {
	query      fastQuery
	all        []Match
	prefix     int      // the index of the query's only prefix phrase, or -1
	expansions []string // the terms of that prefix
}

// All returns every match, in no particular order.
func (rk *Ranking) All() []Match { return rk.all }

// Best returns the k best matches (lowest bm25() first, equal scores by
// ascending rowid), best first.
func (rk *Ranking) Best(k int) []Match { return bestOf(rk.all, k) }

// scores returns every match of q in table with its bm25() value, as
// SQLite computes it, in no particular order; errUnsupportedIndex when the
// index or the lengths cannot be read exactly.
func (r *Ranker) scores(ctx context.Context, tx *sql.Tx, table string, q fastQuery) (*Ranking, error) {
	x := &ftsIndex{ctx: ctx, tx: tx, table: table, r: r}
	defer x.release()
	s, err := x.structure()
	if err != nil {
		return nil, err
	}
	s = s.withEntries()
	rows, tokens, err := x.averages()
	if err != nil {
		return nil, err
	}
	if rows <= 0 {
		return nil, errUnsupportedIndex
	}
	lengths, err := r.lengths.of(ctx, tx, table, s.writeCounter, rows, tokens)
	if errors.Is(err, errLengthsNotLoaded) {
		if !r.opts.LoadLengthsInline {
			r.loadLengthsLater(table)
			return nil, err
		}
		if err = r.lengths.load(ctx, tx, table, s.writeCounter, rows, tokens); err == nil {
			lengths, err = r.lengths.of(ctx, tx, table, s.writeCounter, rows, tokens)
		}
	}
	if err != nil {
		return nil, err
	}
	n := len(q.phrases)
	rk := &Ranking{query: q, prefix: -1}
	matches := make([]phraseRows, n)
	idf := make([]float64, n)
	for i, p := range q.phrases {
		if matches[i], err = phraseMatches(x, s, p, int64(len(lengths.lens))-1); err != nil {
			return nil, err
		}
		if p.prefix {
			if rk.prefix == -1 {
				rk.prefix, rk.expansions = i, matches[i].terms
			} else {
				rk.prefix, rk.expansions = -2, nil // two prefixes: no rewriting
			}
		}
		// bm25()'s idf, from the phrase's number of matching rows.
		hits := int64(len(matches[i].rowids))
		idf[i] = sqliteLog((float64(rows-hits) + 0.5) / (float64(hits) + 0.5))
		if idf[i] <= 0.0 {
			idf[i] = 1e-6
		}
	}
	rk.prefix = max(rk.prefix, -1)
	avgdl := float64(tokens) / float64(rows)
	// The rows of the query: in every phrase (AND) or in any (OR), each
	// with its frequency per phrase.
	size := 0
	for i, m := range matches {
		if q.or {
			size += len(m.rowids)
		} else if i == 0 || len(m.rowids) < size {
			size = len(m.rowids)
		}
	}
	rk.all = make([]Match, 0, size)
	idx := make([]int, n)
	freq := make([]float64, n)
	for {
		var id int64 = math.MaxInt64
		for i, m := range matches {
			if idx[i] < len(m.rowids) {
				id = min(id, m.rowids[idx[i]])
			}
		}
		if id == math.MaxInt64 {
			break
		}
		in := 0
		expansion := int32(-1)
		for i, m := range matches {
			freq[i] = 0
			if idx[i] < len(m.rowids) && m.rowids[idx[i]] == id {
				freq[i] = float64(m.freqs[idx[i]])
				if i == rk.prefix {
					expansion = m.only[idx[i]]
				}
				idx[i]++
				in++
			}
		}
		if !q.or && in < n {
			continue
		}
		d, ok := lengths.of(id)
		if !ok {
			return nil, errUnsupportedIndex
		}
		rk.all = append(rk.all, Match{ID: id, Score: bm25(idf, freq, float64(d), avgdl), expansion: expansion})
	}
	return rk, nil
}

// sqliteLog is the C library's log() that SQLite calls, as the
// pure-Go SQLite links it (a translation of musl's on linux/amd64, which
// differs from math.Log by an ulp now and then).
func sqliteLog(x float64) float64 {
	tls := libc.NewTLS()
	defer tls.Close()
	return libc.Xlog(tls, x)
}

// loadLengthsLater reads the lengths of table's rows in the background,
// in a snapshot of its own (Close cancels it and waits for it).
func (r *Ranker) loadLengthsLater(table string) {
	ctx, ok := r.lengths.startLoad(table)
	if !ok {
		return
	}
	go func() {
		defer r.lengths.endLoad(table)
		// An error leaves the copy as it was; the next search tries again.
		_ = r.readTx(ctx, func(tx *sql.Tx) error {
			x := &ftsIndex{ctx: ctx, tx: tx, table: table, r: r}
			s, err := x.structure()
			if err != nil {
				return err
			}
			rows, tokens, err := x.averages()
			if err != nil {
				return err
			}
			return r.lengths.load(ctx, tx, table, s.writeCounter, rows, tokens)
		})
	}()
}

// bm25 is fts5_aux.c's bm25() for one row with every column weighted 1:
// the same operations in the same order, so the same double.
func bm25(idf, freq []float64, d, avgdl float64) float64 {
	k1, b := 1.2, 0.75
	score := 0.0
	for i := range idf {
		score += idf[i] * ((freq[i] * (k1 + 1.0)) / (freq[i] + k1*(1-b+b*d/avgdl)))
	}
	return -1.0 * score
}

// bestOf returns the k best of all (better's order), best first.
func bestOf(all []Match, k int) []Match {
	h := worstFirst{}
	for _, s := range all {
		if len(h) < k {
			heap.Push(&h, s)
		} else if better(s, h[0]) {
			h[0] = s
			heap.Fix(&h, 0)
		}
	}
	out := make([]Match, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&h).(Match)
	}
	return out
}

// worstFirst is a heap whose top is the worst match kept.
type worstFirst []Match

func (h worstFirst) Len() int           { return len(h) }
func (h worstFirst) Less(i, j int) bool { return better(h[j], h[i]) }
func (h worstFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *worstFirst) Push(x any)        { *h = append(*h, x.(Match)) }
func (h *worstFirst) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// SnippetQuery returns the query whose snippet() of row m is the one the
// user's query gives, and is cheap to run on one row. FTS5 sets up a
// prefix query by merging the document lists of every term with the
// prefix, for each row it is asked about; a row that holds only one of
// those terms has the same phrase occurrences under the query with that
// term in place of the prefix, so the same snippet. Other rows (and other
// queries) keep the user's query.
func (rk *Ranking) SnippetQuery(original string, m Match) string {
	if rk.prefix < 0 || m.expansion < 0 {
		return original
	}
	term := rk.expansions[m.expansion]
	if !asciiWord(term) {
		return original
	}
	parts := make([]string, len(rk.query.phrases))
	for i, p := range rk.query.phrases {
		if i == rk.prefix {
			parts[i] = `"` + term + `"`
		} else {
			parts[i] = `"` + strings.Join(p.terms, " ") + `"`
		}
	}
	sep := " "
	if rk.query.or {
		sep = " OR "
	}
	return strings.Join(parts, sep)
}
