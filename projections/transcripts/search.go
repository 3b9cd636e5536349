package transcripts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"hermes/projections/transcripts/fts5"
)

// SearchQuery is a full-text search (Hermes' search_messages).
type SearchQuery struct {
	// Query is the user's text, FTS5 syntax allowed (it is sanitised).
	Query string
	// Sources keeps only sessions of these sources when not nil: an empty,
	// non-nil slice therefore matches nothing. Nil: every source.
	Sources []string
	// ExcludeSources drops sessions of these sources when not nil (an
	// empty slice drops nothing).
	ExcludeSources []string
	// Roles keeps only messages of these roles when not empty.
	Roles []string
	// Limit is the page size (< 1: 20); Offset skips that many matches.
	Limit, Offset int
	// Order is how full-text matches are ordered: OrderRank (""; the
	// default, Hermes' order) or OrderRecent. The LIKE path of short CJK
	// terms is newest first either way, as in Hermes.
	Order string
}

// The orders of full-text results.
const (
	// OrderRank is Hermes' order: every match scored by FTS5's bm25(),
	// best first; equal scores by ascending message id.
	OrderRank = ""
	// OrderRecent ranks by bm25() only the rankWindow most recent matches:
	// bounded time on a common word, but not Hermes' results. Only on
	// request.
	OrderRecent = "recent"
)

// SearchResult is one matching message.
type SearchResult struct {
	ID        int64  `json:"id"`
	SessionID string `json:"session_id"`
	Role      string `json:"role"`
	// Snippet is the match in context with >>> and <<< around the
	// matched terms (FTS), or up to 120 characters of content around the
	// first term (the LIKE path for short CJK terms; "" when the message
	// has no content and matched on its tool name or calls).
	Snippet        string         `json:"snippet"`
	Timestamp      float64        `json:"timestamp"`
	ToolName       *string        `json:"tool_name"`
	Source         string         `json:"source"`
	Model          *string        `json:"model"`
	SessionStarted float64        `json:"session_started"`
	Context        []ContextEntry `json:"context"`
}

// match is a search result with its stored content, for the context.
type match struct {
	SearchResult
	content sql.NullString
}

// ContextEntry is a message around a match (the one before, the match,
// the one after, by timestamp then id), its text cut to 200 characters.
type ContextEntry struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

const defaultSearchLimit = 20

// Search finds active messages (rows hidden by a rewind never match) as
// Hermes' search_messages does. The query is sanitised; nothing left means
// no results. A query with CJK characters uses the trigram index when
// every CJK word has at least three CJK characters, else a substring
// (LIKE) search whose terms are ORed, newest first; any other query uses
// the unicode61 index, best match first (every match scored by bm25, equal
// scores by ascending id, as Hermes' SQLite returns them; q.Order may ask
// for OrderRecent instead). A query FTS5 cannot parse gives no results,
// not an error.
func (r *Reader) Search(ctx context.Context, q SearchQuery) ([]SearchResult, error) {
	if strings.TrimSpace(q.Query) == "" {
		return nil, nil
	}
	query := SanitizeFTS5Query(q.Query)
	if query == "" {
		return nil, nil
	}
	limit := q.Limit
	if limit < 1 {
		limit = defaultSearchLimit
	}
	offset := max(q.Offset, 0)
	var out []SearchResult
	err := r.readTx(ctx, func(tx *sql.Tx) error {
		matches, err := r.find(ctx, tx, query, q, limit, offset)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return nil // a query FTS5 refuses (or that fails) finds nothing
		}
		if len(matches) == 0 {
			return nil
		}
		neighbours, err := prepareNeighbours(ctx, tx)
		if err != nil {
			return err
		}
		defer neighbours.close()
		for _, m := range matches {
			m.Context = neighbours.searchContext(ctx, m)
			out = append(out, m.SearchResult)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", q.Query, err)
	}
	return out, nil
}

func (r *Reader) find(ctx context.Context, tx *sql.Tx, query string, q SearchQuery, limit, offset int) ([]match, error) {
	if !ContainsCJK(query) {
		return r.ftsMatch(ctx, tx, "messages_fts", query, q, limit, offset)
	}
	raw := strings.TrimSpace(strings.Trim(query, `"`))
	fields := strings.Fields(raw)
	var terms []string
	short := false
	for _, f := range fields {
		if isOperator(f) {
			continue
		}
		terms = append(terms, f)
		if ContainsCJK(f) && cjkCount(f) < 3 {
			short = true
		}
	}
	if cjkCount(raw) >= 3 && !short {
		parts := make([]string, len(fields))
		for i, f := range fields {
			if isOperator(f) {
				parts[i] = f
			} else {
				parts[i] = `"` + strings.ReplaceAll(f, `"`, `""`) + `"`
			}
		}
		return r.ftsMatch(ctx, tx, "messages_fts_trigram", strings.Join(parts, " "), q, limit, offset)
	}
	if len(terms) == 0 {
		terms = []string{raw}
	}
	return likeMatch(ctx, tx, terms, q, limit, offset)
}

func isOperator(word string) bool {
	switch strings.ToUpper(word) {
	case "AND", "OR", "NOT":
		return true
	}
	return false
}

// cjkCount counts the characters ContainsCJK looks for.
func cjkCount(s string) int {
	n := 0
	for _, r := range s {
		if ContainsCJK(string(r)) {
			n++
		}
	}
	return n
}

// filters appends the source, exclusion and role conditions.
func filters(q SearchQuery, where []string, args []any) ([]string, []any) {
	if q.Sources != nil {
		where = append(where, "s.source IN ("+placeholders(len(q.Sources))+")")
		args = append(args, anySlice(q.Sources)...)
	}
	if q.ExcludeSources != nil {
		where = append(where, "s.source NOT IN ("+placeholders(len(q.ExcludeSources))+")")
		args = append(args, anySlice(q.ExcludeSources)...)
	}
	if len(q.Roles) > 0 {
		where = append(where, "m.role IN ("+placeholders(len(q.Roles))+")")
		args = append(args, anySlice(q.Roles)...)
	}
	return where, args
}

// rankWindow bounds how many matches OrderRecent ranks: the best matches
// are chosen among the rankWindow most recent ones (or 4×(limit+offset),
// if more). A query with fewer matches is ranked as Hermes ranks it. A
// variable for tests, whose corpora are smaller.
var rankWindow = 1024

// ftsMatch queries one of the two FTS tables (a fixed name, never user
// input) for the page Hermes' statement returns: every match scored by
// bm25() (FTS5's rank), best first, equal scores by ascending message id —
// the order Hermes gets, since SQLite's sorter is stable and FTS5 feeds it
// ascending rowids (TestSearchTiesByAscendingID) — then the filters, then
// LIMIT and OFFSET. It gets there in two steps: bestIDs finds the ids of the
// page, then pageRows joins only those and computes their snippets.
// Hermes' own statement (ORDER BY rank) makes FTS5 sort every match
// before the first row comes out; a top-k ORDER BY keeps only the best
// limit+offset rows and does about half the work. With OrderRecent, only
// the rankWindow most recent matches are ranked (one statement).
func (r *Reader) ftsMatch(ctx context.Context, tx *sql.Tx, table, query string, q SearchQuery, limit, offset int) ([]match, error) {
	if q.Order == OrderRecent {
		return recentMatch(ctx, tx, table, query, q, limit, offset)
	}
	rk, err := r.ranker.Rank(ctx, tx, ftsTable(table), query)
	if errors.Is(err, fts5.ErrDeclined) {
		rk, err = nil, nil // SQLite's statement ranks it
	}
	if err != nil {
		return nil, err
	}
	cands := func(k int) ([]int64, error) {
		return queryIDs(tx.QueryContext(ctx, `SELECT rowid, bm25(`+table+`) AS score FROM `+table+`
			WHERE `+table+` MATCH ? ORDER BY score, rowid LIMIT ?`, query, k))
	}
	snippetQuery := func(int64) string { return query }
	if rk != nil {
		best := map[int64]fts5.Match{}
		cands = func(k int) ([]int64, error) {
			ranked := rk.Best(k)
			ids := make([]int64, len(ranked))
			for i, m := range ranked {
				ids[i], best[m.ID] = m.ID, m
			}
			return ids, nil
		}
		snippetQuery = func(id int64) string {
			if m, ok := best[id]; ok {
				return rk.SnippetQuery(query, m)
			}
			return query
		}
	}
	ids, err := bestIDs(ctx, tx, table, query, q, limit+offset, cands)
	if err != nil || len(ids) <= offset {
		return nil, err
	}
	var scratch *snippetScratch
	if rk != nil {
		scratch = &r.snippets
	}
	return pageRows(ctx, tx, table, snippetQuery, scratch, ids[offset:])
}

// The two FTS tables of state.db, as the fts5 ranker reads them.
var (
	wordIndex    = fts5.Table{Name: "messages_fts", Tokenizer: fts5.Unicode61}
	trigramIndex = fts5.Table{Name: "messages_fts_trigram", Tokenizer: fts5.Trigram}
)

// ftsTable is the FTS table named table (one of the two).
func ftsTable(table string) fts5.Table {
	if table == trigramIndex.Name {
		return trigramIndex
	}
	return wordIndex
}

// WarmSearch starts reading, in the background, the row lengths the fts5
// ranker needs (about 1 s of CPU and 8 MB at 1,000,000 messages), so that
// the first searches after a start are not ranked by SQLite's slower
// statement while they are read. A server calls it once its read models
// have caught up; a one-shot search does not.
func (r *Reader) WarmSearch() { r.ranker.Warm(wordIndex, trigramIndex) }

// maxCandidates bounds how many of the best matches bestIDs reads before
// it filters them in Go; past it, one statement joins every match. A
// variable for tests, which run both ways.
var maxCandidates = 8192

// bestIDs returns the ids of the n best matches that pass the filters
// (active, sources, roles), best first. It takes the k best matches from
// best (the fast path's scores, or SQLite's top-k statement) without
// joining them (k = 2n at first), keeps those that pass, and reads
// 8 times as many while fewer than n passed and more matches exist: the
// matches the filters drop cannot move the others, so the result is the
// same as filtering first. Over maxCandidates it joins every match to the
// filters in one statement instead.
func bestIDs(ctx context.Context, tx *sql.Tx, table, query string, q SearchQuery, n int, best func(k int) ([]int64, error)) ([]int64, error) {
	for k := max(2*n, 64); k <= maxCandidates; k *= 8 {
		cands, err := best(k)
		if err != nil || len(cands) == 0 {
			return nil, err
		}
		where, args := filters(q, []string{"m.id IN (" + placeholders(len(cands)) + ")", "m.active = 1"}, int64s(cands))
		pass, err := queryIDs(tx.QueryContext(ctx, `SELECT m.id, 0 FROM messages m JOIN sessions s ON s.id = m.session_id
			WHERE `+strings.Join(where, " AND "), args...))
		if err != nil {
			return nil, err
		}
		kept := make(map[int64]bool, len(pass))
		for _, id := range pass {
			kept[id] = true
		}
		out := make([]int64, 0, n)
		for _, id := range cands {
			if kept[id] && len(out) < n {
				out = append(out, id)
			}
		}
		if len(out) == n || len(cands) < k {
			return out, nil
		}
	}
	where, args := filters(q, []string{table + " MATCH ?", "m.active = 1"}, []any{query})
	return queryIDs(tx.QueryContext(ctx, `SELECT m.id, bm25(`+table+`) AS score FROM `+table+`
		JOIN messages m ON m.id = `+table+`.rowid
		JOIN sessions s ON s.id = m.session_id
		WHERE `+strings.Join(where, " AND ")+`
		ORDER BY score, m.id LIMIT ?`, append(args, n)...))
}

// queryIDs reads the first column of (id, anything) rows.
func queryIDs(rows *sql.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		var ignored any
		if err := rows.Scan(&id, &ignored); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func int64s(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// pageRows returns the result rows of ids, in that order, with the
// snippets of `table MATCH queryFor(id)`. The ids with the same query are
// read by one statement; with a scratch, the snippets of a prefix query
// or a trigram query are made there (snippetScratch, usesScratch).
func pageRows(ctx context.Context, tx *sql.Tx, table string, queryFor func(int64) string, scratch *snippetScratch, ids []int64) ([]match, error) {
	byQuery := map[string][]int64{}
	var queries []string
	for _, id := range ids {
		q := queryFor(id)
		if byQuery[q] == nil {
			queries = append(queries, q)
		}
		byQuery[q] = append(byQuery[q], id)
	}
	byID := make(map[int64]match, len(ids))
	for _, q := range queries {
		var rows []match
		var err error
		if scratch != nil && usesScratch(table, q) {
			rows, err = scratchPageRows(ctx, tx, table, q, scratch, byQuery[q])
		} else {
			rows, err = pageRowsOf(ctx, tx, table, q, byQuery[q])
		}
		if err != nil {
			return nil, err
		}
		for _, m := range rows {
			byID[m.ID] = m
		}
	}
	out := make([]match, 0, len(ids))
	for _, id := range ids {
		if m, ok := byID[id]; ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// pageRowsOf returns the result rows of ids under one query, in no order.
//
// FTS5 takes `rowid IN (...)` as one lookup per id, each of which sets
// up the query again; for a prefix query that set-up merges the document
// lists of every term with the prefix, so a prefix query is run once over
// the range of the ids instead, the ids checked by SQLite before the
// snippets are made (+rowid is not offered to FTS5).
func pageRowsOf(ctx context.Context, tx *sql.Tx, table, query string, ids []int64) ([]match, error) {
	where := table + `.rowid IN (` + placeholders(len(ids)) + `)`
	args := append([]any{query}, int64s(ids)...)
	if strings.Contains(query, "*") && len(ids) > 1 {
		where = table + `.rowid BETWEEN ? AND ? AND +` + where
		args = append([]any{query, slices.Min(ids), slices.Max(ids)}, int64s(ids)...)
	}
	return scanResults(tx.QueryContext(ctx, `
		SELECT m.id, m.session_id, m.role, snippet(`+table+`, 0, '>>>', '<<<', '...', 40) AS snippet,
			m.content, m.timestamp, m.tool_name, s.source, s.model, s.started_at AS session_started
		FROM `+table+`
		JOIN messages m ON m.id = `+table+`.rowid
		JOIN sessions s ON s.id = m.session_id
		WHERE `+table+` MATCH ? AND `+where, args...))
}

// scratchPageRows is pageRowsOf with the snippets made in scratch.
func scratchPageRows(ctx context.Context, tx *sql.Tx, table, query string, scratch *snippetScratch, ids []int64) ([]match, error) {
	snippets, err := scratch.snippets(ctx, tx, table, query, ids)
	if err != nil {
		return nil, err
	}
	rows, err := scanResults(tx.QueryContext(ctx, `
		SELECT m.id, m.session_id, m.role, NULL AS snippet,
			m.content, m.timestamp, m.tool_name, s.source, s.model, s.started_at AS session_started
		FROM messages m
		JOIN sessions s ON s.id = m.session_id
		WHERE m.id IN (`+placeholders(len(ids))+`)`, int64s(ids)...))
	if err != nil {
		return nil, err
	}
	out := rows[:0]
	for _, m := range rows {
		if snippet, ok := snippets[m.ID]; ok {
			m.Snippet = snippet.String
			out = append(out, m)
		}
	}
	return out, nil
}

// recentMatch is OrderRecent: Hermes' statement over the rankWindow most
// recent matches only.
func recentMatch(ctx context.Context, tx *sql.Tx, table, query string, q SearchQuery, limit, offset int) ([]match, error) {
	window := max(rankWindow, 4*(limit+offset))
	where, args := filters(q, []string{
		table + " MATCH ?",
		table + ".rowid >= (SELECT coalesce(min(rowid), 0) FROM (SELECT rowid FROM " + table + " WHERE " + table + " MATCH ? ORDER BY rowid DESC LIMIT ?))",
		"m.active = 1",
	}, []any{query, query, window})
	args = append(args, limit, offset)
	return scanResults(tx.QueryContext(ctx, `
		SELECT m.id, m.session_id, m.role, snippet(`+table+`, 0, '>>>', '<<<', '...', 40) AS snippet,
			m.content, m.timestamp, m.tool_name, s.source, s.model, s.started_at AS session_started
		FROM `+table+`
		JOIN messages m ON m.id = `+table+`.rowid
		JOIN sessions s ON s.id = m.session_id
		WHERE `+strings.Join(where, " AND ")+`
		ORDER BY rank
		LIMIT ? OFFSET ?`, args...))
}

// likeMatch is the substring search for short CJK terms, which neither
// FTS index can match: any term in content, tool name or tool calls.
func likeMatch(ctx context.Context, tx *sql.Tx, terms []string, q SearchQuery, limit, offset int) ([]match, error) {
	clauses := make([]string, len(terms))
	args := []any{terms[0]}
	for i, t := range terms {
		clauses[i] = `(m.content LIKE ? ESCAPE '\' OR m.tool_name LIKE ? ESCAPE '\' OR m.tool_calls LIKE ? ESCAPE '\')`
		pattern := "%" + escapeLike(t) + "%"
		args = append(args, pattern, pattern, pattern)
	}
	where, args := filters(q, []string{"(" + strings.Join(clauses, " OR ") + ")", "m.active = 1"}, args)
	args = append(args, limit, offset)
	return scanResults(tx.QueryContext(ctx, `
		SELECT m.id, m.session_id, m.role, substr(m.content, max(1, instr(m.content, ?) - 40), 120) AS snippet,
			m.content, m.timestamp, m.tool_name, s.source, s.model, s.started_at AS session_started
		FROM messages m INDEXED BY hermes_idx_messages_timestamp
		JOIN sessions s ON s.id = m.session_id
		WHERE `+strings.Join(where, " AND ")+`
		ORDER BY m.timestamp DESC, m.id DESC
		LIMIT ? OFFSET ?`, args...))
}

func scanResults(rows *sql.Rows, err error) ([]match, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []match
	for rows.Next() {
		var m match
		var snippet, toolName, model sql.NullString
		if err := rows.Scan(&m.ID, &m.SessionID, &m.Role, &snippet, &m.content, &m.Timestamp, &toolName,
			&m.Source, &model, &m.SessionStarted); err != nil {
			return nil, err
		}
		m.Snippet, m.ToolName, m.Model = snippet.String, ptrOf(toolName), ptrOf(model)
		out = append(out, m)
	}
	return out, rows.Err()
}

// neighbours holds the two statements of a match's context, prepared
// once for the page.
type neighbours struct {
	before, after *sql.Stmt
}

func prepareNeighbours(ctx context.Context, tx *sql.Tx) (*neighbours, error) {
	before, err := tx.PrepareContext(ctx, `SELECT role, content FROM messages
		WHERE session_id = ? AND active = 1 AND (timestamp, id) < (?, ?)
		ORDER BY timestamp DESC, id DESC LIMIT 1`)
	if err != nil {
		return nil, fmt.Errorf("prepare search context: %w", err)
	}
	after, err := tx.PrepareContext(ctx, `SELECT role, content FROM messages
		WHERE session_id = ? AND active = 1 AND (timestamp, id) > (?, ?)
		ORDER BY timestamp, id LIMIT 1`)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("prepare search context: %w", err), before.Close())
	}
	return &neighbours{before: before, after: after}, nil
}

func (n *neighbours) close() {
	_ = n.before.Close() // read-only statements of a transaction that ends
	_ = n.after.Close()
}

// searchContext returns the active message before the match, the match,
// and the one after, in the match's session by (timestamp, id); an error
// gives no context, as in Hermes.
func (n *neighbours) searchContext(ctx context.Context, res match) []ContextEntry {
	entry := func(role string, content sql.NullString) ContextEntry {
		return ContextEntry{Role: role, Content: firstRunes(previewText(decodeContent(content), " "), 200)}
	}
	neighbour := func(stmt *sql.Stmt) ([]ContextEntry, error) {
		var role string
		var content sql.NullString
		err := stmt.QueryRowContext(ctx, res.SessionID, res.Timestamp, res.ID).Scan(&role, &content)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []ContextEntry{entry(role, content)}, nil
	}
	before, err := neighbour(n.before)
	if err != nil {
		return []ContextEntry{}
	}
	after, err := neighbour(n.after)
	if err != nil {
		return []ContextEntry{}
	}
	out := append(before, entry(res.Role, res.content))
	return append(out, after...)
}
