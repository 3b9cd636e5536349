package fts5

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// TestPostingsReadEveryEntry: given an index of several segments whose
// doclists run over many pages (of 512 bytes), with position lists that
// run over a page end, lists longer than a page (a row holding the same
// words hundreds of times) and offsets past one byte, when a cursor walks
// a term entry by entry and when it skips to rowids, then it gives exactly
// the entries (rowid and position list) the page-by-page reader gives
// (termDoclists); and the phrases of those terms score as SQLite's bm25()
// does, read streamed and by segments.
func TestPostingsReadEveryEntry(t *testing.T) {
	const pgsz = 512
	d := openDB(t, filepath.Join(t.TempDir(), "postings.db"))
	d.exec(t, `CREATE VIRTUAL TABLE t USING fts5(content)`,
		fmt.Sprintf(`INSERT INTO t(t, rank) VALUES ('pgsz', %d)`, pgsz), `INSERT INTO t(t, rank) VALUES ('automerge', 0)`)
	rng := rand.New(rand.NewPCG(9, 9))
	words := []string{"alpha", "beta", "gamma", "delta"}
	message := func(i int) string {
		switch {
		case i%150 == 7:
			return strings.Repeat("alpha beta gamma ", 1500)
		case i%50 == 23:
			return "alpha " + strings.Repeat("filler ", 300) + "beta alpha beta"
		}
		var b strings.Builder
		for range 5 + rng.IntN(60) {
			b.WriteString(words[rng.IntN(len(words))] + " ")
		}
		return b.String()
	}
	n := int64(1)
	for range 3 {
		batch := map[int64]string{}
		var order []int64
		for range 300 {
			batch[n], order = message(int(n)), append(order, n)
			n++
		}
		d.insert(t, "t", batch, order)
	}
	p := d.r

	ctx := context.Background()
	err := d.readTx(ctx, func(tx *sql.Tx) error {
		x := &ftsIndex{ctx: ctx, tx: tx, table: "t", r: p}
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
		if longest <= 2*pgsz {
			t.Errorf("longest position list %d bytes, want one over several pages", longest)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	for _, parallelPages := range []int64{-1, 1} {
		d.r = New(d.readTx, Options{LoadLengthsInline: true, ParallelPages: parallelPages})
		for _, query := range []string{`"alpha beta"`, `"beta alpha"`, `"alpha beta gamma"`, `"beta alpha beta"`,
			`"alpha alpha"`, `"gamma delta"`, `"filler beta"`, `"delta filler"`} {
			want := d.sqliteScores(t, "t", query)
			got, err := d.goScores(t, Table{Name: "t"}, query)
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
		if parallelPages > 0 && d.r.Stats().BySegments == 0 {
			t.Errorf("no phrase was read by segments")
		}
		d.r.Close()
	}
}
