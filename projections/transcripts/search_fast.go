package transcripts

import (
	"container/heap"
	"context"
	"database/sql"
	"errors"
	"math"
	"slices"
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
			case "OR":
				ors++
				continue
			case "AND":
				ands++
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
		for _, w := range strings.Split(body, " ") {
			if w == "" {
				continue
			}
			if !asciiWord(w) {
				return p, false
			}
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

// phraseMatches returns, for every row where the phrase occurs, the
// rowid and its number of occurrences (what bm25() adds up through
// xInst), ascending by rowid.
func phraseMatches(x *ftsIndex, s ftsStructure, p ftsPhrase) (rowids []int64, freqs []int32, err error) {
	if p.prefix {
		lists, err := x.termDoclists(s, p.terms[0], true, false)
		if err != nil {
			return nil, nil, err
		}
		counts := map[int64]int32{}
		for _, d := range lists {
			for i, id := range d.rowids {
				counts[id] += d.counts[i]
			}
		}
		if len(lists) == 1 {
			for _, d := range lists {
				rowids = d.rowids
			}
		} else {
			rowids = make([]int64, 0, len(counts))
			for id := range counts {
				rowids = append(rowids, id)
			}
			slices.Sort(rowids)
		}
		freqs = make([]int32, len(rowids))
		for i, id := range rowids {
			freqs[i] = counts[id]
		}
		return rowids, freqs, nil
	}
	lists := make([]*ftsDoclist, len(p.terms))
	for i, t := range p.terms {
		byTerm, err := x.termDoclists(s, t, false, len(p.terms) > 1)
		if err != nil {
			return nil, nil, err
		}
		if lists[i] = byTerm[t]; lists[i] == nil {
			return nil, nil, nil
		}
	}
	first := lists[0]
	if len(lists) == 1 {
		return first.rowids, first.counts, nil
	}
	// A row matches where term j is at position p+j for every j.
	idx := make([]int, len(lists))
	positions := make([][]int64, len(lists))
	var ok bool
	for i, id := range first.rowids {
		all := true
		for j := 1; j < len(lists); j++ {
			l := lists[j]
			for idx[j] < l.len() && l.rowids[idx[j]] < id {
				idx[j]++
			}
			if idx[j] == l.len() || l.rowids[idx[j]] != id {
				all = false
				break
			}
		}
		if !all {
			continue
		}
		var n int32
		if positions[0], ok = first.positions(positions[0], i); !ok {
			return nil, nil, errUnsupportedIndex
		}
		for j := 1; j < len(lists); j++ {
			if positions[j], ok = lists[j].positions(positions[j], idx[j]); !ok {
				return nil, nil, errUnsupportedIndex
			}
		}
		for _, pos := range positions[0] {
			found := true
			for j := 1; j < len(lists) && found; j++ {
				found = containsInt64(positions[j], pos+int64(j))
			}
			if found {
				n++
			}
		}
		if n > 0 {
			rowids = append(rowids, id)
			freqs = append(freqs, n)
		}
	}
	return rowids, freqs, nil
}

func containsInt64(sorted []int64, v int64) bool {
	for _, x := range sorted {
		if x >= v {
			return x == v
		}
	}
	return false
}

// scored is a match and its bm25() value.
type scored struct {
	id    int64
	score float64
}

// better is the order of Hermes' results: lower bm25() first, then
// ascending id.
func better(a, b scored) bool {
	return a.score < b.score || (a.score == b.score && a.id < b.id)
}

// fastScores returns every match of q in table with its bm25() value, as
// SQLite computes it, in no particular order; errUnsupportedIndex when the
// index or the lengths cannot be read exactly.
func (r *Reader) fastScores(ctx context.Context, tx *sql.Tx, table string, q fastQuery) ([]scored, error) {
	x := &ftsIndex{ctx: ctx, tx: tx, table: table}
	defer x.release()
	s, err := x.structure()
	if err != nil {
		return nil, err
	}
	rows, tokens, err := x.averages()
	if err != nil {
		return nil, err
	}
	if rows <= 0 {
		return nil, errUnsupportedIndex
	}
	lengths, err := r.docLengths.of(ctx, tx, table, s.writeCounter, rows, tokens)
	if err != nil {
		return nil, err
	}
	n := len(q.phrases)
	ids := make([][]int64, n)
	freqs := make([][]int32, n)
	idf := make([]float64, n)
	for i, p := range q.phrases {
		if ids[i], freqs[i], err = phraseMatches(x, s, p); err != nil {
			return nil, err
		}
		// bm25()'s idf, from the phrase's number of matching rows.
		hits := int64(len(ids[i]))
		idf[i] = sqliteLog((float64(rows-hits) + 0.5) / (float64(hits) + 0.5))
		if idf[i] <= 0.0 {
			idf[i] = 1e-6
		}
	}
	avgdl := float64(tokens) / float64(rows)
	// The rows of the query: in every phrase (AND) or in any (OR), each
	// with its frequency per phrase.
	size := 0
	for i := range n {
		if q.or {
			size += len(ids[i])
		} else if i == 0 || len(ids[i]) < size {
			size = len(ids[i])
		}
	}
	out := make([]scored, 0, size)
	idx := make([]int, n)
	freq := make([]float64, n)
	for {
		var id int64 = math.MaxInt64
		for i := range n {
			if idx[i] < len(ids[i]) {
				id = min(id, ids[i][idx[i]])
			}
		}
		if id == math.MaxInt64 {
			break
		}
		in := 0
		for i := range n {
			freq[i] = 0
			if idx[i] < len(ids[i]) && ids[i][idx[i]] == id {
				freq[i] = float64(freqs[i][idx[i]])
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
		out = append(out, scored{id: id, score: bm25(idf, freq, float64(d), avgdl)})
	}
	return out, nil
}

// sqliteLog is the C library's log() that SQLite calls, as the
// pure-Go SQLite links it (a translation of musl's on linux/amd64, which
// differs from math.Log by an ulp now and then).
func sqliteLog(x float64) float64 {
	tls := libc.NewTLS()
	defer tls.Close()
	return libc.Xlog(tls, x)
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

// fastCandidates returns the function bestIDs asks for the k best match
// ids, or nil when the fast path does not apply to this query.
func (r *Reader) fastCandidates(ctx context.Context, tx *sql.Tx, table, query string) (func(k int) ([]int64, error), error) {
	if !fastSearch {
		return nil, nil
	}
	fq, ok := parseFastQuery(table, query)
	if !ok {
		return nil, nil
	}
	all, err := r.fastScores(ctx, tx, table, fq)
	if errors.Is(err, errUnsupportedIndex) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	fastSearches.Add(1)
	return func(k int) ([]int64, error) {
		best := bestOf(all, k)
		ids := make([]int64, len(best))
		for i, s := range best {
			ids[i] = s.id
		}
		return ids, nil
	}, nil
}
