package transcripts

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"hermes/events"
	"hermes/projections/transcripts/fts5"
)

// rankCorpus is a generated history (Zipf words, one message in ten in
// Chinese) with some rewound messages, so that inactive rows are in both
// FTS indexes but must not be returned. Long messages (longMessages) and
// a few small segments at the end (words missing from some segments, a
// term's doclist ending a segment) give the small corpus the index
// layouts a large one has by its size.
func rankCorpus(t *testing.T) (*Projection, *corpus) {
	t.Helper()
	// OrderRecent's window scales with the corpus: its common words have
	// far more matches than the window.
	defer func(old int) { t.Cleanup(func() { rankWindow = old }) }(rankWindow)
	rankWindow = sized(128, 1024)
	p := openTemp(t)
	c := newCorpus(11, 20)
	// The rewinds come early, while the two sessions hold a few messages:
	// each rewound row is deleted from and re-inserted into both FTS
	// indexes, and a secure-delete is costly (minutes under -race when the
	// sessions held a hundred messages each).
	mustApply(t, p, c.events(sized(100, 300)))
	var rewinds []events.Envelope
	for _, sid := range []string{"20260301_000000_00000003", "20260301_000000_00000007"} {
		rewinds = append(rewinds, c.h.tr(sid, events.TurnsRewound{SessionID: sid, TargetMessageID: 0, TurnsUndone: 1, At: c.now})...)
	}
	mustApply(t, p, rewinds)
	mustApply(t, p, c.longMessages(12))
	mustApply(t, p, c.events(sized(1200, 3700)))
	if !largeCorpora {
		// FTS5 merges segments by itself once 64 leaf pages were written
		// (FTS5_WORK_UNIT), which the large corpus does and the small one
		// does not: the rewound rows, re-indexed in a newer segment, end
		// up in one segment with the rest as in the large corpus.
		for _, table := range ftsTables {
			if _, err := p.conn.ExecContext(context.Background(), "INSERT INTO "+table+"("+table+", rank) VALUES ('merge', 500)"); err != nil {
				t.Fatalf("merge %s: %v", table, err)
			}
		}
	}
	for range 3 {
		mustApply(t, p, c.events(2))
	}
	return p, c
}

// bm25Reference is the page of a full-text query computed independently
// of Search's statement: bm25() of every match of the table (no ORDER BY
// rank), the filters checked in Go, then sorted by score and ascending id.
func bm25Reference(t *testing.T, p *Projection, table, match string, roles []string, limit, offset int) (page []int64, matches int) {
	t.Helper()
	ctx := context.Background()
	type scored struct {
		id    int64
		score float64
	}
	var all []scored
	err := p.readTx(ctx, func(tx *sql.Tx) error {
		meta := map[int64]struct {
			role   string
			active bool
		}{}
		rows, err := tx.QueryContext(ctx, `SELECT id, role, active FROM messages`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			var role string
			var active bool
			if err := rows.Scan(&id, &role, &active); err != nil {
				return err
			}
			meta[id] = struct {
				role   string
				active bool
			}{role, active}
		}
		if err := rows.Close(); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT rowid, bm25(`+table+`) FROM `+table+` WHERE `+table+` MATCH ?`, match)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s scored
			if err := rows.Scan(&s.id, &s.score); err != nil {
				return err
			}
			matches++
			m := meta[s.id]
			if m.active && (len(roles) == 0 || slices.Contains(roles, m.role)) {
				all = append(all, s)
			}
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatalf("reference %s MATCH %q: %v", table, match, err)
	}
	slices.SortFunc(all, func(a, b scored) int {
		return cmp.Or(cmp.Compare(a.score, b.score), cmp.Compare(a.id, b.id))
	})
	page = []int64{}
	for _, s := range all[min(offset, len(all)):min(offset+limit, len(all))] {
		page = append(page, s.id)
	}
	return page, matches
}

// likeReference is the LIKE path of short CJK terms computed in Go: any
// term in content, tool name or tool calls, newest first.
func likeReference(t *testing.T, p *Projection, terms []string, limit int) []int64 {
	t.Helper()
	ctx := context.Background()
	type row struct {
		id int64
		ts float64
	}
	var all []row
	err := p.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, timestamp, coalesce(content, ''), coalesce(tool_name, ''), coalesce(tool_calls, '') FROM messages WHERE active = 1`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r row
			var content, tool, calls string
			if err := rows.Scan(&r.id, &r.ts, &content, &tool, &calls); err != nil {
				return err
			}
			for _, term := range terms {
				if strings.Contains(content, term) || strings.Contains(tool, term) || strings.Contains(calls, term) {
					all = append(all, r)
					break
				}
			}
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatalf("LIKE reference %q: %v", terms, err)
	}
	slices.SortFunc(all, func(a, b row) int { return cmp.Or(cmp.Compare(b.ts, a.ts), cmp.Compare(b.id, a.id)) })
	out := []int64{}
	for _, r := range all[:min(limit, len(all))] {
		out = append(out, r.id)
	}
	return out
}

func inOrder(res []SearchResult) []int64 {
	out := []int64{}
	for _, r := range res {
		out = append(out, r.ID)
	}
	return out
}

// TestSearchMatchesBM25Reference: for each class of query, Search returns
// the page that bm25() over every match gives (Hermes' ranking), including
// for words with far more matches than OrderRecent's window; both ways of
// bestIDs (the best candidates filtered in Go, and the statement that
// joins every match).
func TestSearchMatchesBM25Reference(t *testing.T) {
	p, c := rankCorpus(t)
	for _, fast := range []bool{true, false} {
		for _, candidates := range []int{maxCandidates, 0} {
			t.Run(fmt.Sprintf("fast=%t/candidates=%d", fast, candidates), func(t *testing.T) {
				defer func(old int) { maxCandidates = old }(maxCandidates)
				maxCandidates = candidates
				useRanker(t, p, fts5.Options{LoadLengthsInline: true, Off: !fast})
				testSearchMatchesBM25Reference(t, p, c)
			})
		}
	}
}

func testSearchMatchesBM25Reference(t *testing.T, p *Projection, c *corpus) {
	w := c.words
	cjk3, cjk2 := "", ""
	for _, word := range c.cjkWords {
		switch n := runeLen(word); {
		case n >= 4 && cjk3 == "":
			cjk3 = word
		case n == 2 && cjk2 == "":
			cjk2 = word
		}
	}
	for _, tc := range []struct {
		class, query string
		table, match string // the FTS table and query the reference runs
		roles        []string
		limit, off   int
		minMatches   int
		slow         bool // the fast path does not rank this class
	}{
		{class: "common word", query: w[0], match: w[0], minMatches: 2 * rankWindow},
		{class: "common word, page 3", query: w[1], match: w[1], limit: 20, off: 40, minMatches: rankWindow},
		{class: "rare word", query: w[300], match: w[300]},
		{class: "two words", query: w[1] + " " + w[3], match: w[1] + " " + w[3], minMatches: rankWindow},
		{class: "phrase", query: `"` + w[0] + " " + w[1] + `"`, match: `"` + w[0] + " " + w[1] + `"`},
		{class: "prefix", query: w[0][:3] + "*", match: w[0][:3] + "*", minMatches: rankWindow},
		{class: "OR", query: w[3] + " OR " + w[40], match: w[3] + " OR " + w[40], minMatches: rankWindow},
		{class: "NOT", query: w[0] + " NOT " + w[1], match: w[0] + " NOT " + w[1], slow: true},
		{class: "AND", query: w[2] + " AND " + w[5], match: w[2] + " AND " + w[5]},
		{class: "three-word phrase", query: `"` + w[0] + " " + w[1] + " " + w[0] + `"`, match: `"` + w[0] + " " + w[1] + " " + w[0] + `"`},
		{class: "phrase and word", query: `"` + w[0] + " " + w[2] + `" ` + w[7], match: `"` + w[0] + " " + w[2] + `" ` + w[7]},
		{class: "joined words", query: w[0] + "-" + w[1] + "_" + w[2], match: `"` + w[0] + " " + w[1] + " " + w[2] + `"`},
		{class: "upper case", query: strings.ToUpper(w[6]), match: strings.ToUpper(w[6])},
		{class: "long prefix", query: w[20][:4] + "*", match: w[20][:4] + "*"},
		{class: "three ORs", query: w[8] + " OR " + w[30] + " OR " + w[200], match: w[8] + " OR " + w[30] + " OR " + w[200]},
		{class: "role filter", query: w[0], match: w[0], roles: []string{"user"}, minMatches: rankWindow},
		{class: "role filter, deep page", query: w[0], match: w[0], roles: []string{"assistant"}, limit: 100, off: 300, minMatches: rankWindow},
		{class: "CJK trigram", query: cjk3, table: "messages_fts_trigram", match: `"` + cjk3 + `"`},
		{class: "long page", query: w[4], match: w[4], limit: 200},
	} {
		t.Run(tc.class, func(t *testing.T) {
			table := cmp.Or(tc.table, "messages_fts")
			limit := cmp.Or(tc.limit, defaultSearchLimit)
			want, matches := bm25Reference(t, p, table, tc.match, tc.roles, limit, tc.off)
			if matches < tc.minMatches || len(want) == 0 {
				t.Fatalf("%q: %d matches, %d in the page: the corpus does not exercise this class", tc.query, matches, len(want))
			}
			before := rankedByFTS5(p)
			got := inOrder(search(t, p, SearchQuery{Query: tc.query, Roles: tc.roles, Limit: tc.limit, Offset: tc.off}))
			if ranked := rankedByFTS5(p) > before; !p.ranker.Options().Off && ranked == tc.slow {
				t.Errorf("Search(%q): ranked by the fast path %t, want %t", tc.query, ranked, !tc.slow)
			}
			if diff := gocmp.Diff(want, got); diff != "" {
				t.Errorf("Search(%q) ids, best first (-bm25 reference +got):\n%s", tc.query, diff)
			}
		})
	}
	t.Run("CJK LIKE", func(t *testing.T) {
		want := likeReference(t, p, []string{cjk2}, defaultSearchLimit)
		if len(want) < defaultSearchLimit {
			t.Fatalf("%q: %d matches, want a full page", cjk2, len(want))
		}
		if diff := gocmp.Diff(want, inOrder(search(t, p, SearchQuery{Query: cjk2}))); diff != "" {
			t.Errorf("Search(%q) ids, newest first (-reference +got):\n%s", cjk2, diff)
		}
	})
	t.Run("recent order is another answer", func(t *testing.T) {
		best, _ := bm25Reference(t, p, "messages_fts", w[0], nil, defaultSearchLimit, 0)
		recent := inOrder(search(t, p, SearchQuery{Query: w[0], Order: OrderRecent}))
		if slices.Equal(best, recent) {
			t.Errorf("Search(%q, recent) = the best matches of all; want the best of the most recent %d", w[0], rankWindow)
		}
	})
}

// TestSearchTiesByAscendingID: messages with equal scores come by
// ascending id, on every page, as Hermes' statement returns them.
func TestSearchTiesByAscendingID(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	h.lane("k", created("k", "s1", at(0)))
	for i := range 60 {
		body := "same words here"
		if i%4 == 3 {
			body = "same same words here" // scores better: first
		}
		h.tr("s1", appended("s1", text("user", body), at(1+i)))
	}
	mustApply(t, p, h.all)
	var better, rest []int64
	for id := int64(1); id <= 60; id++ {
		if id%4 == 0 {
			better = append(better, id)
		} else {
			rest = append(rest, id)
		}
	}
	want := append(better, rest...)
	var got []int64
	for off := 0; off < 60; off += 7 {
		got = append(got, inOrder(search(t, p, SearchQuery{Query: "same", Limit: 7, Offset: off}))...)
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("pages of Search(same) (-want +got):\n%s", diff)
	}
}
