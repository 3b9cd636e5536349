package transcripts

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"hermes/events"
	"hermes/projections/transcripts/fts5"
)

// TestFastScoresEqualBM25: given a history applied in many small batches
// (many FTS5 segments, merged and not), with rewound rows and cleared
// sessions (delete markers in newer segments), when the fast path scores a
// query, then it finds exactly the rows SQLite's MATCH finds, each with
// bm25()'s double bit for bit — after appends (the document lengths
// brought up to date) and after deletions (read again) alike. Long
// messages first (corpus.longMessages) put position lists over page ends
// into a corpus too small to have them by its size.
func TestFastScoresEqualBM25(t *testing.T) {
	p := openTemp(t)
	useRanker(t, p, inlineRanker)
	c := newCorpus(23, 12)
	apply := func(n int) {
		for range n / 50 {
			mustApply(t, p, c.events(50))
		}
	}
	w := c.words
	queries := func() []struct{ table, query string } {
		var qs []struct{ table, query string }
		add := func(table, query string) { qs = append(qs, struct{ table, query string }{table, query}) }
		for i := 0; i < 600; i += sized(60, 7) {
			add("messages_fts", w[i])
		}
		for _, i := range []int{0, 1, 3, 17, 40, 300} {
			add("messages_fts", w[i][:2]+"*")
			add("messages_fts", w[i][:3]+"*")
			add("messages_fts", w[i]+"*")
		}
		add("messages_fts", `"`+w[0]+" "+w[1]+`"`)
		add("messages_fts", `"`+w[1]+" "+w[0]+" "+w[2]+`"`)
		add("messages_fts", w[0]+" "+w[5])
		add("messages_fts", w[2]+" AND "+w[9]+" AND "+w[33])
		add("messages_fts", w[3]+" OR "+w[40]+" OR "+w[2][:3]+"*")
		add("messages_fts", `"`+w[0]+" "+w[0]+`" OR `+w[11])
		for _, cw := range c.cjkWords[:sized(12, 40)] {
			if runeLen(cw) >= 3 {
				add("messages_fts_trigram", `"`+cw+`"`)
			}
		}
		return qs
	}()
	checkScores := func(stage string) {
		t.Helper()
		ctx := context.Background()
		for _, q := range queries {
			want, got := map[int64]uint64{}, map[int64]uint64{}
			err := p.readTx(ctx, func(tx *sql.Tx) error {
				rows, err := tx.QueryContext(ctx, `SELECT rowid, bm25(`+q.table+`) FROM `+q.table+` WHERE `+q.table+` MATCH ?`, q.query)
				if err != nil {
					return err
				}
				defer rows.Close()
				for rows.Next() {
					var id int64
					var score float64
					if err := rows.Scan(&id, &score); err != nil {
						return err
					}
					want[id] = math.Float64bits(score)
				}
				if err := rows.Err(); err != nil {
					return err
				}
				rk, err := p.ranker.Rank(ctx, tx, ftsTable(q.table), q.query)
				if err != nil {
					return err
				}
				for _, m := range rk.All() {
					got[m.ID] = math.Float64bits(m.Score)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("%s: %s MATCH %q: %v", stage, q.table, q.query, err)
			}
			if diff := gocmp.Diff(want, got); diff != "" {
				t.Errorf("%s: %s MATCH %q: rowid → bm25 bits (-SQLite +fast):\n%s", stage, q.table, q.query, diff)
			}
		}
	}
	// check scores every query with a ranker that reads phrases streamed,
	// then with one that reads them by segments; it returns how many
	// phrases both read merged.
	check := func(stage string) (merged int64) {
		t.Helper()
		for _, parallelPages := range []int64{fts5.DefaultParallelPages, 1} {
			useRanker(t, p, fts5.Options{LoadLengthsInline: true, ParallelPages: parallelPages})
			checkScores(fmt.Sprintf("%s, phrases of %d+ pages by segments", stage, parallelPages))
			if parallelPages == 1 && p.ranker.Stats().BySegments == 0 {
				t.Errorf("%s: no phrase was read by segments", stage)
			}
			merged += p.ranker.Stats().Merged
		}
		return merged
	}
	mustApply(t, p, c.longMessages(22))
	apply(sized(700, 1500))
	merged := check("appended")
	apply(sized(300, 700))
	if merged += check("more appended"); merged != 0 {
		t.Errorf("rows only appended: %d phrases read merged, want every one streamed", merged)
	}
	var gone []events.Envelope
	for _, sid := range []string{"20260301_000000_00000002", "20260301_000000_00000005"} {
		gone = append(gone, c.h.tr(sid, events.TranscriptCleared{SessionID: sid, At: c.now})...)
	}
	sid := "20260301_000000_00000003"
	gone = append(gone, c.h.tr(sid, events.TurnsRewound{SessionID: sid, TargetMessageID: 0, TurnsUndone: 1, At: c.now})...)
	mustApply(t, p, gone)
	if check("cleared and rewound") == 0 {
		t.Errorf("after rows were re-indexed, no phrase was read merged: the merged path is not exercised")
	}
	apply(sized(200, 600))
	check("appended after deletions")
}

// TestFastSearchResultsEqualSlow: the whole results (ids, snippets,
// context) of the fast path are those of SQLite's statements, including
// prefix queries whose snippets come from the query with the row's only
// term in place of the prefix, or from the scratch table (rows with
// several terms of the prefix), and trigram queries, whose snippets all
// come from the scratch table.
func TestFastSearchResultsEqualSlow(t *testing.T) {
	p, c := rankCorpus(t)
	useRanker(t, p, inlineRanker)
	w := c.words
	queries := []SearchQuery{
		{Query: w[0][:2] + "*"},
		{Query: w[1][:3] + "*", Limit: 50},
		{Query: w[17][:4] + "*", Offset: 5},
		{Query: w[0][:2] + "* " + w[3]},
		{Query: w[3] + " OR " + w[2][:2] + "*"},
		{Query: w[5] + " " + w[0][:3] + "*", Roles: []string{"assistant"}},
		{Query: `"` + w[0] + " " + w[1] + `"`},
		{Query: w[2]},
		{Query: `"` + w[0] + " " + w[0] + `"`},
		{Query: `"` + w[2] + " " + w[0] + " " + w[1] + `"`, Limit: 40},
	}
	var cjk []string
	for _, cw := range c.cjkWords {
		if runeLen(cw) >= 3 && len(cjk) < 3 {
			cjk = append(cjk, cw)
		}
	}
	queries = append(queries,
		SearchQuery{Query: cjk[0]},
		SearchQuery{Query: cjk[1], Limit: 50, Offset: 3},
		SearchQuery{Query: cjk[1] + " " + cjk[2]},
		SearchQuery{Query: cjk[0] + " OR " + cjk[2], Roles: []string{"user"}},
	)
	scratchBefore := scratchPages.Load()
	for _, q := range queries {
		before := rankedByFTS5(p)
		fast := search(t, p, q)
		if rankedByFTS5(p) == before {
			t.Errorf("Search(%q) was not ranked by the fast path", q.Query)
		}
		func() {
			useRanker(t, p, fts5.Options{Off: true})
			defer useRanker(t, p, inlineRanker)
			slow := search(t, p, q)
			if len(slow) == 0 {
				t.Fatalf("Search(%q): no results; the corpus does not exercise it", q.Query)
			}
			if diff := gocmp.Diff(slow, fast); diff != "" {
				t.Errorf("Search(%+v) (-SQLite's statements +fast path):\n%s", q, diff)
			}
		}()
	}
	if scratchPages.Load() == scratchBefore {
		t.Errorf("no page had rows with several terms of a prefix: the scratch snippets are not exercised")
	}
}

// TestWarmSearch: after WarmSearch has read the lengths, the first search
// of either index is ranked by the fast path.
func TestWarmSearch(t *testing.T) {
	p := openTemp(t)
	c := newCorpus(37, 8)
	mustApply(t, p, c.events(800))
	p.WarmSearch()
	p.ranker.WaitLengths()
	var cjk string
	for _, w := range c.cjkWords {
		if runeLen(w) >= 3 {
			cjk = w
			break
		}
	}
	for _, q := range []string{c.words[0], cjk} {
		before := rankedByFTS5(p)
		if res := search(t, p, SearchQuery{Query: q}); len(res) == 0 {
			t.Fatalf("Search(%q): no results; the corpus does not exercise it", q)
		}
		if rankedByFTS5(p) == before {
			t.Errorf("Search(%q) after WarmSearch was not ranked by the fast path", q)
		}
	}
}

// TestFastPathDeclinesASparseIDSpace: given a state.db whose highest
// message id is far above its number of rows (an imported id), when it is
// searched, then the row lengths are not copied (the copy is 4 bytes an
// id: it would be hundreds of MB for a few thousand rows) and SQLite's
// statement ranks it, with bm25()'s answer.
func TestFastPathDeclinesASparseIDSpace(t *testing.T) {
	p := openTemp(t)
	useRanker(t, p, inlineRanker)
	c := newCorpus(41, 8)
	c.events(1200)
	sid := "20260301_000000_sparse"
	far := int64(1<<27) - 1 // past what the ranker keeps the row lengths of
	c.h.tr(sid, events.MessagesImported{SessionID: sid, At: c.now, Messages: []events.ImportedMessage{
		{ID: far, Role: "user", Content: ptr(c.words[1] + " imported far away"), Timestamp: 1},
	}})
	mustApply(t, p, c.h.all)
	word := c.words[1]

	before := rankedByFTS5(p)
	got := search(t, p, SearchQuery{Query: word})

	if rankedByFTS5(p) != before {
		t.Fatalf("a table of ~1,000 rows with id %d was ranked by the fast path", far)
	}
	want, _ := bm25Reference(t, p, "messages_fts", word, nil, defaultSearchLimit, 0)
	if diff := gocmp.Diff(want, inOrder(got)); diff != "" {
		t.Errorf("Search(%q) ids (-bm25 reference +got):\n%s", word, diff)
	}
	if !slices.Contains(inOrder(got), far) && len(want) < defaultSearchLimit {
		t.Errorf("the far message %d is not among %v", far, inOrder(got))
	}
}
