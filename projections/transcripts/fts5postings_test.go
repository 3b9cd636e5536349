package transcripts

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"hermes/events"
)

// TestPostingsReadEveryEntry: given an index of several segments whose
// doclists run over many pages, with position lists that run over a page
// end, lists longer than a page (a row holding the same words thousands of
// times) and offsets past one byte, when a cursor walks a term entry by
// entry and when it skips to rowids, then it gives exactly the entries
// (rowid and position list) the page-by-page reader gives (termDoclists);
// and the phrases of those terms score as SQLite's bm25() does, read
// streamed and by segments.
func TestPostingsReadEveryEntry(t *testing.T) {
	defer func(old bool) { loadLengthsInline = old }(loadLengthsInline)
	loadLengthsInline = true
	p := openTemp(t)
	h := newHistory()
	key, sid := "agent:main:telegram:dm:1", "20260301_000000_00000001"
	mustApply(t, p, h.lane(key, created(key, sid, at(0))))
	rng := rand.New(rand.NewPCG(9, 9))
	words := []string{"alpha", "beta", "gamma", "delta"}
	message := func(i int) string {
		switch {
		case i%350 == 7:
			return strings.Repeat("alpha beta gamma ", 9000)
		case i%50 == 23:
			return "alpha " + strings.Repeat("filler ", 300) + "beta alpha beta"
		}
		var b strings.Builder
		for range 5 + rng.IntN(60) {
			b.WriteString(words[rng.IntN(len(words))] + " ")
		}
		return b.String()
	}
	n := 0
	for range 3 {
		var batch []events.Envelope
		for range sized(250, 700) {
			batch = append(batch, h.tr(sid, appended(sid, text("user", message(n)), at(n+1)))...)
			n++
		}
		mustApply(t, p, batch)
	}

	ctx := context.Background()
	err := p.readTx(ctx, func(tx *sql.Tx) error {
		x := &ftsIndex{ctx: ctx, tx: tx, table: "messages_fts"}
		defer x.release()
		s, err := x.structure()
		if err != nil {
			return err
		}
		if len(s.segments) < 2 {
			t.Errorf("%d segment(s), want several", len(s.segments))
		}
		longest := 0
		for _, term := range append(words, "filler") {
			byTerm, err := x.termDoclists(s, term, false, true)
			if err != nil {
				return err
			}
			want := byTerm[term]
			var wantEntries, gotEntries []string
			for i, id := range want.rowids {
				list := want.raw[want.starts[i] : want.starts[i]+want.counts[i]]
				wantEntries = append(wantEntries, fmt.Sprintf("%d %x", id, list))
				longest = max(longest, len(list))
			}
			c := x.postings(s, term)
			for c.next() {
				gotEntries = append(gotEntries, fmt.Sprintf("%d %x", c.rowid, c.poslist()))
			}
			c.close()
			if c.err != nil {
				return fmt.Errorf("%s: %w", term, c.err)
			}
			if diff := gocmp.Diff(wantEntries, gotEntries); diff != "" {
				t.Errorf("postings(%s) entries (-page reader +cursor):\n%s", term, diff)
			}

			c = x.postings(s, term)
			for target := int64(0); ; target += 1 + rng.Int64N(40) {
				i, _ := slices.BinarySearch(want.rowids, target)
				ok := c.skipTo(target)
				// A failure ends the transaction only once the cursor
				// is closed (its page is held until then).
				if ok != (i < len(want.rowids)) {
					c.close()
					return fmt.Errorf("postings(%s).skipTo(%d) = %t, want %t (err %v)", term, target, ok, !ok, c.err)
				}
				if !ok {
					break
				}
				list := want.raw[want.starts[i] : want.starts[i]+want.counts[i]]
				if c.rowid != want.rowids[i] || string(c.poslist()) != string(list) {
					c.close()
					return fmt.Errorf("postings(%s).skipTo(%d) at %d %x, want %d %x", term, target, c.rowid, c.poslist(), want.rowids[i], list)
				}
			}
			c.close()
			if c.err != nil {
				return fmt.Errorf("%s: %w", term, c.err)
			}
		}
		if longest <= 2*4096 {
			t.Errorf("longest position list %d bytes, want one over several pages", longest)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	defer func(old int64) { parallelPages = old }(parallelPages)
	for _, parallelPages = range []int64{math.MaxInt64, 0} {
		for _, query := range []string{`"alpha beta"`, `"beta alpha"`, `"alpha beta gamma"`, `"beta alpha beta"`,
			`"alpha alpha"`, `"gamma delta"`, `"filler beta"`, `"delta filler"`} {
			want, got := map[int64]uint64{}, map[int64]uint64{}
			err := p.readTx(ctx, func(tx *sql.Tx) error {
				rows, err := tx.QueryContext(ctx, `SELECT rowid, bm25(messages_fts) FROM messages_fts WHERE messages_fts MATCH ?`, query)
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
				fq, ok := parseFastQuery("messages_fts", query)
				if !ok {
					return fmt.Errorf("parseFastQuery(%q) refused", query)
				}
				rk, err := p.fastScores(ctx, tx, "messages_fts", fq)
				if err != nil {
					return err
				}
				for _, s := range rk.all {
					got[s.id] = math.Float64bits(s.score)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("MATCH %q: %v", query, err)
			}
			if len(want) == 0 && query != `"delta filler"` {
				t.Errorf("MATCH %q: no rows; the corpus does not exercise it", query)
			}
			if diff := gocmp.Diff(want, got); diff != "" {
				t.Errorf("MATCH %q, phrases of %d+ pages by segments: rowid → bm25 bits (-SQLite +fast):\n%s", query, parallelPages, diff)
			}
		}
	}
}
