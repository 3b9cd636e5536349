package transcripts

import (
	"container/heap"
	"context"
	"database/sql"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"modernc.org/libc"
)

// The fast path of Hermes' ranking. SQLite's bm25() costs, per match, the
// position list, a %_docsize lookup and a sorter insert, and each
// statement first counts every match of each phrase (its idf); in this
// engine that is about a second for a common word over a million
// messages. The fast path reads FTS5's own index in Go (fts5index.go),
// counts and scores every match with bm25()'s formula in bm25()'s order of
// operations (so the doubles are the same, bit for bit), takes the
// document lengths from an in-memory copy of %_docsize (docLengths) and
// keeps the best k. Queries it cannot read exactly fall back to SQLite:
// see parseFastQuery, and errUnsupportedIndex.

// fastSearch switches the fast path (tests run both ways).
var fastSearch = true

// fastSearches counts the searches the fast path ranked, for tests.
var fastSearches atomic.Int64

// ftsPhrase is one phrase of a query: its terms in order, or one prefix.
type ftsPhrase struct {
	terms  []string
	prefix bool
}

// fastQuery is a query the fast path can rank: phrases joined by AND
// (implicit or written) or all by OR.
type fastQuery struct {
	phrases []ftsPhrase
	or      bool
}

// parseFastQuery reads a sanitised query for table into phrases, or
// returns false for anything else (NOT, NEAR, column filters, mixed AND
// and OR, characters whose tokenization it does not reproduce). For
// messages_fts (unicode61) a word is ASCII letters and digits, folded to
// lower case, optionally a prefix (word*); for messages_fts_trigram each
// quoted field of Han characters is a phrase of its trigrams.
func parseFastQuery(table, query string) (fastQuery, bool) {
	var q fastQuery
	ands, ors := 0, 0
	// An operator must stand between two phrases (FTS5 refuses "a OR",
	// "OR a", "a OR AND b"): afterOperator is set at the start and after
	// each operator, cleared by a phrase.
	afterOperator := true
	for i := 0; i < len(query); {
		switch c := query[i]; {
		case c == ' ':
			i++
			continue
		case c == '"':
			end := strings.IndexByte(query[i+1:], '"')
			if end < 0 {
				return q, false
			}
			body := query[i+1 : i+1+end]
			i += end + 2
			if i < len(query) && query[i] != ' ' {
				return q, false // "phrase"* or "a""b"
			}
			p, ok := phraseOf(table, body)
			if !ok {
				return q, false
			}
			q.phrases = append(q.phrases, p)
		default:
			end := strings.IndexByte(query[i:], ' ')
			if end < 0 {
				end = len(query) - i
			}
			word := query[i : i+end]
			i += end
			switch word {
			case "OR", "AND":
				if afterOperator {
					return q, false
				}
				if word == "OR" {
					ors++
				} else {
					ands++
				}
				afterOperator = true
				continue
			case "NOT", "NEAR":
				return q, false
			}
			if table != "messages_fts" {
				return q, false
			}
			prefix := strings.HasSuffix(word, "*")
			word = strings.TrimSuffix(word, "*")
			if !asciiWord(word) {
				return q, false
			}
			q.phrases = append(q.phrases, ftsPhrase{terms: []string{strings.ToLower(word)}, prefix: prefix})
		}
		afterOperator = false
	}
	if afterOperator {
		return q, false // empty, or ends with an operator
	}
	n := len(q.phrases)
	switch {
	case n == 0 || n > 8 || (ands > 0 && ors > 0):
		return q, false
	case ors > 0:
		q.or = true
		return q, ors == n-1
	default:
		return q, ands <= n-1
	}
}

func asciiWord(w string) bool {
	if w == "" {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// phraseOf is the phrase of a quoted field.
func phraseOf(table, body string) (ftsPhrase, bool) {
	var p ftsPhrase
	if table == "messages_fts" {
		// unicode61 splits ASCII text at every character that is not a
		// letter or a digit (docker-compose is docker, compose).
		for i := 0; i < len(body); i++ {
			if body[i] >= 0x80 {
				return p, false
			}
		}
		for _, w := range strings.FieldsFunc(body, func(r rune) bool { return !asciiWord(string(r)) }) {
			p.terms = append(p.terms, strings.ToLower(w))
		}
		return p, len(p.terms) > 0
	}
	// The trigram tokenizer: every run of three characters, at
	// consecutive positions. Han characters have no case to fold.
	rs := []rune(body)
	if len(rs) < 3 {
		return p, false
	}
	for _, r := range rs {
		if !unicode.Is(unicode.Han, r) || r == utf8.RuneError {
			return p, false
		}
	}
	for i := 0; i+3 <= len(rs); i++ {
		p.terms = append(p.terms, string(rs[i:i+3]))
	}
	return p, true
}

// scored is a match and its bm25() value, and, for a query with one
// prefix phrase, the only term of the prefix the row holds (index in the
// ranking's expansions; -1: several, or none).
type scored struct {
	id        int64
	score     float64
	expansion int32
}

// better is the order of Hermes' results: lower bm25() first, then
// ascending id.
func better(a, b scored) bool {
	return a.score < b.score || (a.score == b.score && a.id < b.id)
}

// ranking is every match of a query with its score.
type ranking struct {
	query      fastQuery
	all        []scored
	prefix     int      // the index of the query's only prefix phrase, or -1
	expansions []string // the terms of that prefix
}

// fastScores returns every match of q in table with its bm25() value, as
// SQLite computes it, in no particular order; errUnsupportedIndex when the
// index or the lengths cannot be read exactly.
func (r *Reader) fastScores(ctx context.Context, tx *sql.Tx, table string, q fastQuery) (*ranking, error) {
	x := &ftsIndex{ctx: ctx, tx: tx, table: table}
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
	lengths, err := r.docLengths.of(ctx, tx, table, s.writeCounter, rows, tokens)
	if errors.Is(err, errLengthsNotLoaded) {
		if !loadLengthsInline {
			r.loadLengthsLater(table)
			return nil, err
		}
		if err = r.docLengths.load(ctx, tx, table, s.writeCounter, rows, tokens); err == nil {
			lengths, err = r.docLengths.of(ctx, tx, table, s.writeCounter, rows, tokens)
		}
	}
	if err != nil {
		return nil, err
	}
	n := len(q.phrases)
	rk := &ranking{query: q, prefix: -1}
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
	rk.all = make([]scored, 0, size)
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
		rk.all = append(rk.all, scored{id: id, score: bm25(idf, freq, float64(d), avgdl), expansion: expansion})
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

// WarmSearch starts reading, in the background, the row lengths the
// fast ranking needs (about 1 s of CPU and 8 MB at 1,000,000 messages),
// so that the first searches after a start do not go to SQLite's slower
// ranking while they are read. A server calls it once its read models
// have caught up; a one-shot search does not.
func (r *Reader) WarmSearch() {
	for _, table := range []string{"messages_fts", "messages_fts_trigram"} {
		r.loadLengthsLater(table)
	}
}

// loadLengthsLater reads the lengths of table's rows in the background,
// in a snapshot of its own (Close cancels it and waits for it).
func (r *Reader) loadLengthsLater(table string) {
	ctx, ok := r.docLengths.startLoad(table)
	if !ok {
		return
	}
	go func() {
		defer r.docLengths.endLoad(table)
		// An error leaves the copy as it was; the next search tries again.
		_ = r.readTx(ctx, func(tx *sql.Tx) error {
			x := &ftsIndex{ctx: ctx, tx: tx, table: table}
			s, err := x.structure()
			if err != nil {
				return err
			}
			rows, tokens, err := x.averages()
			if err != nil {
				return err
			}
			return r.docLengths.load(ctx, tx, table, s.writeCounter, rows, tokens)
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

// bestOf returns the k best of all (Hermes' order), best first.
func bestOf(all []scored, k int) []scored {
	h := worstFirst{}
	for _, s := range all {
		if len(h) < k {
			heap.Push(&h, s)
		} else if better(s, h[0]) {
			h[0] = s
			heap.Fix(&h, 0)
		}
	}
	out := make([]scored, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&h).(scored)
	}
	return out
}

// worstFirst is a heap whose top is the worst match kept.
type worstFirst []scored

func (h worstFirst) Len() int           { return len(h) }
func (h worstFirst) Less(i, j int) bool { return better(h[j], h[i]) }
func (h worstFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *worstFirst) Push(x any)        { *h = append(*h, x.(scored)) }
func (h *worstFirst) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// fastCandidates ranks query by the fast path, or returns nil when it
// does not apply to this query.
func (r *Reader) fastCandidates(ctx context.Context, tx *sql.Tx, table, query string) (*ranking, error) {
	if !fastSearch {
		return nil, nil
	}
	fq, ok := parseFastQuery(table, query)
	if !ok {
		return nil, nil
	}
	rk, err := r.fastScores(ctx, tx, table, fq)
	if errors.Is(err, errUnsupportedIndex) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	fastSearches.Add(1)
	return rk, nil
}

// best returns the ids of the k best matches, best first.
func (rk *ranking) best(k int) []scored {
	return bestOf(rk.all, k)
}

// snippetQuery returns the query whose snippet() of row m is the one the
// user's query gives, and is cheap to run on one row. FTS5 sets up a
// prefix query by merging the document lists of every term with the
// prefix, for each row it is asked about; a row that holds only one of
// those terms has the same phrase occurrences under the query with that
// term in place of the prefix, so the same snippet. Other rows (and other
// queries) keep the user's query.
func (rk *ranking) snippetQuery(original string, m scored) string {
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
