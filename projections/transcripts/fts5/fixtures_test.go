package fts5

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// A fixture is a small SQLite database holding one FTS5 table t, laid out
// to exercise one part of the reader. TestFixtures makes each with -update
// (testdata/README.md), then checks, on the file as checked in, what the
// fixture must exercise and that the Ranker's answer to each query is
// SQLite's, bit for bit, or a decline where the contract says so.
type fixture struct {
	name string
	// ddl creates table t; setup runs next (FTS5 settings), then each
	// batch is inserted in a transaction of its own (one segment each);
	// after runs next, one transaction each, then the later batches.
	ddl     string
	setup   []string
	batches []map[int64]string
	after   []string
	later   []map[int64]string
	table   Table
	queries []string
	// check says whether the file as read holds what the fixture is for.
	check func(t *testing.T, d *testDB)
	// declined: every query is declined (SQLite answers).
	declined bool
}

// words is the vocabulary of the generated rows.
var words = []string{"alpha", "beta", "gamma", "delta", "Deploy", "deployment", "deploying", "redis", "memory", "leak", "docker", "compose"}

// repeated returns n rows from id on, each word repeated from min to max
// times (a long position list of one-byte offsets, of every length).
func repeated(from int64, n int, word string, min, max int) map[int64]string {
	out := map[int64]string{}
	for i := range n {
		out[from+int64(i)] = strings.Repeat(word+" ", min+i*(max-min)/n)
	}
	return out
}

// aardvarks is one row of n words that sort before every word of words.
func aardvarks(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "aardvark%04d ", i)
	}
	return b.String()
}

// manyWords returns n rows from id on of 5 to 40 words of a vocabulary of
// 1000 (w000 to w999): doclists of many terms, segments of many pages.
func manyWords(rng *rand.Rand, from int64, n int) map[int64]string {
	out := map[int64]string{}
	for i := range n {
		var b strings.Builder
		for range 5 + rng.IntN(36) {
			fmt.Fprintf(&b, "w%03d ", rng.IntN(1000))
		}
		out[from+int64(i)] = b.String()
	}
	return out
}

// sentences returns n rows of rng-drawn words from id on.
func sentences(rng *rand.Rand, from int64, n, minWords, maxWords int) map[int64]string {
	out := map[int64]string{}
	for i := range n {
		var b strings.Builder
		for range minWords + rng.IntN(maxWords-minWords+1) {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteString(" ")
		}
		out[from+int64(i)] = b.String()
	}
	return out
}

func fixtures() []fixture {
	rng := rand.New(rand.NewPCG(35, 2))
	wordQueries := []string{"alpha", "Beta", "deploy*", "dep*", "d*", `"memory leak"`, `"alpha beta gamma"`, `"docker-compose"`,
		"alpha beta", "alpha AND redis AND leak", "redis OR docker OR deploy*", `"alpha alpha" OR gamma`, "nothing", "zeta*"}
	withLong := func(m map[int64]string, id int64, text string) map[int64]string { m[id] = text; return m }
	return []fixture{
		{
			name:    "one-segment.db",
			ddl:     `CREATE VIRTUAL TABLE t USING fts5(content)`,
			batches: []map[int64]string{sentences(rng, 1, 40, 3, 12)},
			table:   Table{Name: "t", Tokenizer: Unicode61},
			queries: wordQueries,
			check: func(t *testing.T, d *testDB) {
				if n := len(d.structureOf(t, "t").segments); n != 1 {
					t.Errorf("%d segments, want 1", n)
				}
			},
		},
		{
			// Pages of 64 bytes (FTS5's pgsz): every doclist runs over
			// page ends, some position lists too, one row's list is longer
			// than several pages, and lists of every length from 60 to 160
			// bytes end, some of them, exactly with a page that holds
			// nothing else. Automatic merges are off, so each batch stays
			// a segment of its own.
			name:  "small-pages.db",
			ddl:   `CREATE VIRTUAL TABLE t USING fts5(content)`,
			setup: []string{`INSERT INTO t(t, rank) VALUES ('pgsz', 64)`, `INSERT INTO t(t, rank) VALUES ('automerge', 0)`},
			batches: []map[int64]string{
				sentences(rng, 1, 50, 3, 30),
				withLong(sentences(rng, 51, 50, 3, 30), 77, strings.Repeat("alpha beta gamma ", 300)),
				sentences(rng, 101, 50, 3, 30),
				withLong(sentences(rng, 151, 50, 3, 30), 160, "alpha "+strings.Repeat("filler ", 200)+"beta alpha beta"),
				repeated(201, 100, "a", 60, 160),
			},
			table:   Table{Name: "t", Tokenizer: Unicode61},
			queries: append(wordQueries, `"alpha beta"`, `"beta alpha beta"`, `"filler beta"`, "filler", "a", `"a a"`, "a alpha"),
			check: func(t *testing.T, d *testDB) {
				s := d.structureOf(t, "t")
				if len(s.segments) != 5 {
					t.Errorf("%d segments, want 5", len(s.segments))
				}
				longest, pages := d.longestPositionList(t, "alpha")
				if longest <= 3*64 {
					t.Errorf("longest position list of alpha %d bytes, want one over several 64-byte pages", longest)
				}
				if pages <= int64(len(s.segments)) {
					t.Errorf("alpha's doclists take %d pages in %d segments, want doclists over page ends", pages, len(s.segments))
				}
				if n := d.listsEndingWithAPage(t, "t"); n == 0 {
					t.Errorf("no position list ends exactly at the end of a page that holds nothing else, before a page that goes on with the doclist")
				}
			},
		},
		{
			// Rows deleted and rows indexed again after their first
			// segment: a newer segment holds delete entries and rows of an
			// older one, so phrases and prefixes are read merged.
			name:  "rewritten.db",
			ddl:   `CREATE VIRTUAL TABLE t USING fts5(content)`,
			setup: []string{`INSERT INTO t(t, rank) VALUES ('automerge', 0)`},
			batches: []map[int64]string{
				sentences(rng, 1, 60, 3, 12),
				sentences(rng, 61, 30, 3, 12),
			},
			after: []string{
				`UPDATE t SET content = 'alpha beta deploy memory leak redis' WHERE rowid IN (3, 7, 11, 40)`,
				`DELETE FROM t WHERE rowid IN (5, 6, 62)`,
				`INSERT INTO t(rowid, content) VALUES (200, 'alpha beta gamma deploying'), (201, 'memory leak docker')`,
			},
			table:   Table{Name: "t", Tokenizer: Unicode61},
			queries: wordQueries,
			check: func(t *testing.T, d *testDB) {
				if n := len(d.structureOf(t, "t").segments); n != 5 {
					t.Errorf("%d segments, want 5", n)
				}
				before := d.r.Stats().Merged
				if _, err := d.goScores(t, Table{Name: "t"}, `"memory leak"`); err != nil {
					t.Fatal(err)
				}
				if _, err := d.goScores(t, Table{Name: "t"}, `deploy*`); err != nil {
					t.Fatal(err)
				}
				if d.r.Stats().Merged-before != 2 {
					t.Errorf("%d reads merged, want the phrase and the prefix read merged", d.r.Stats().Merged-before)
				}
			},
		},
		{
			// Segments merged into one of a higher level (optimize), and
			// newer ones of level 0 beside it.
			name:  "merged-levels.db",
			ddl:   `CREATE VIRTUAL TABLE t USING fts5(content)`,
			setup: []string{`INSERT INTO t(t, rank) VALUES ('automerge', 0)`},
			batches: []map[int64]string{
				sentences(rng, 1, 15, 3, 12), sentences(rng, 16, 15, 3, 12), sentences(rng, 31, 15, 3, 12),
				sentences(rng, 46, 15, 3, 12),
			},
			after:   []string{`INSERT INTO t(t) VALUES ('optimize')`, `UPDATE t SET content = 'alpha beta deploy' WHERE rowid = 20`},
			later:   []map[int64]string{sentences(rng, 61, 15, 3, 12), sentences(rng, 76, 15, 3, 12)},
			table:   Table{Name: "t", Tokenizer: Unicode61},
			queries: wordQueries,
			check: func(t *testing.T, d *testDB) {
				if n := len(d.structureOf(t, "t").segments); n != 4 {
					t.Errorf("%d segments, want the merged one and 3 newer", n)
				}
			},
		},
		{
			name: "trigram.db",
			ddl:  `CREATE VIRTUAL TABLE t USING fts5(content, tokenize='trigram')`,
			batches: []map[int64]string{{
				1: "记忆断裂的问题", 2: "今天的记忆很好", 3: "断裂问题已修复 记忆断裂", 4: "没有关系的句子", 5: "记忆断裂记忆断裂",
			}, {
				6: "问题已修复", 7: "记忆断裂 fix", 8: "记忆",
			}},
			table:   Table{Name: "t", Tokenizer: Trigram},
			queries: []string{`"记忆断裂"`, `"问题已修复"`, `"断裂问题"`, `"记忆断"`, `"没有关系"`},
		},
		{
			// A contentless-delete table writes the V2 structure record,
			// which the reader does not read: SQLite answers.
			name:     "contentless-delete.db",
			ddl:      `CREATE VIRTUAL TABLE t USING fts5(content, content='', contentless_delete=1)`,
			batches:  []map[int64]string{sentences(rng, 1, 20, 3, 8)},
			after:    []string{`DELETE FROM t WHERE rowid = 4`},
			table:    Table{Name: "t", Tokenizer: Unicode61},
			queries:  []string{"alpha", "deploy*"},
			declined: true,
			check: func(t *testing.T, d *testDB) {
				err := d.readTx(context.Background(), func(tx *sql.Tx) error {
					_, err := Segments(context.Background(), tx, "t")
					return err
				})
				if !errors.Is(err, ErrDeclined) {
					t.Errorf("Segments of a contentless-delete index = %v, want ErrDeclined", err)
				}
			},
		},
		{
			// Rowids too sparse for the row lengths to be kept 4 bytes
			// each: SQLite answers.
			name:     "sparse-ids.db",
			ddl:      `CREATE VIRTUAL TABLE t USING fts5(content)`,
			batches:  []map[int64]string{{1: "alpha beta", 2: "alpha", 10_000_000: "alpha gamma"}},
			table:    Table{Name: "t", Tokenizer: Unicode61},
			queries:  []string{"alpha", "alpha beta"},
			declined: true,
		},
		{
			// An incremental merge under way (FTS5 leaves one between
			// transactions): it has taken the whole of the first segment,
			// listed with first and last page 0 until the merge ends, and
			// part of the others.
			name:  "merging.db",
			ddl:   `CREATE VIRTUAL TABLE t USING fts5(content)`,
			setup: []string{`INSERT INTO t(t, rank) VALUES ('automerge', 0)`},
			batches: []map[int64]string{
				{1: aardvarks(1500)},
				manyWords(rng, 2, 200), manyWords(rng, 202, 200), manyWords(rng, 402, 200),
			},
			after:   []string{`INSERT INTO t(t, rank) VALUES ('merge', 8)`},
			table:   Table{Name: "t", Tokenizer: Unicode61},
			queries: append(wordQueries, "aardvark0000", "aardvark1499", "aardvark*", "w001", "w002 w003", `"w004 w005"`, "w01*"),
			check: func(t *testing.T, d *testDB) {
				var taken, partly bool
				for _, seg := range d.structureOf(t, "t").segments {
					taken = taken || seg.first == 0
					partly = partly || seg.first > 1
				}
				if !taken || !partly {
					t.Errorf("a segment taken whole by the merge %t, one taken in part %t; want both", taken, partly)
				}
			},
		},
	}
}

// TestFixtures: for each fixture (made again first with -update), the file
// holds what the fixture is for, and the Ranker answers each query as
// SQLite does, bit for bit, or declines where the contract says so.
func TestFixtures(t *testing.T) {
	if *update {
		makeFixtures(t)
	}
	for _, f := range fixtures() {
		t.Run(f.name, func(t *testing.T) {
			d := openFixture(t, f.name)
			if f.check != nil {
				f.check(t, d)
			}
			for _, q := range f.queries {
				want := d.sqliteScores(t, "t", q)
				got, err := d.goScores(t, f.table, q)
				if f.declined {
					if !errors.Is(err, ErrDeclined) {
						t.Errorf("MATCH %q = %d rows, %v; want ErrDeclined", q, len(got), err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("MATCH %q: %v", q, err)
				}
				if diff := gocmp.Diff(want, got); diff != "" {
					t.Errorf("MATCH %q: rowid → bm25 bits (-SQLite +Ranker):\n%s", q, diff)
				}
			}
		})
	}
}

// makeFixtures writes every fixture of fixtures() into testdata/, and the
// SQLite version that made them.
func makeFixtures(t *testing.T) {
	for _, f := range fixtures() {
		path := filepath.Join("testdata", f.name)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		d := &testDB{db: db}
		if _, err := db.Exec(`PRAGMA page_size = 1024`); err != nil {
			t.Fatal(err)
		}
		d.exec(t, append([]string{f.ddl}, f.setup...)...)
		insert := func(batches []map[int64]string) {
			for _, b := range batches {
				ids := make([]int64, 0, len(b))
				for id := range b {
					ids = append(ids, id)
				}
				slices.Sort(ids)
				d.insert(t, "t", b, ids)
			}
		}
		insert(f.batches)
		for _, s := range f.after {
			d.exec(t, s)
		}
		insert(f.later)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join("testdata", "sqlite-version"), []byte(linkedSQLite(t)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// linkedSQLite is the version of the SQLite this binary links.
func linkedSQLite(t testing.TB) string {
	t.Helper()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	if err := db.QueryRow(`SELECT sqlite_version()`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestLinkedSQLiteIsTheOneRead: the linked SQLite is SQLiteVersion, whose
// index layout, bm25() and log() the reader reproduces, and the one that
// made the fixtures. After an upgrade of the SQLite module this fails:
// make the fixtures again (testdata/README.md), check that every test of
// this package and of the transcripts projection passes, then move
// SQLiteVersion on.
func TestLinkedSQLiteIsTheOneRead(t *testing.T) {
	linked := linkedSQLite(t)
	if linked != SQLiteVersion {
		t.Errorf("the linked SQLite is %s, the reader reads %s's layout (and declines every query meanwhile): see SQLiteVersion", linked, SQLiteVersion)
	}
	made, err := os.ReadFile(filepath.Join("testdata", "sqlite-version"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(made)); got != SQLiteVersion {
		t.Errorf("the fixtures were made by SQLite %s, SQLiteVersion is %s: make them again with -update", got, SQLiteVersion)
	}
}

// TestRankerDeclinesAnotherSQLite: a Ranker over another SQLite than
// SQLiteVersion declines every query, so SQLite's statement answers.
func TestRankerDeclinesAnotherSQLite(t *testing.T) {
	d := openFixture(t, "one-segment.db")
	d.r.sqliteVersion = "3.0.0"
	if _, err := d.goScores(t, Table{Name: "t"}, "alpha"); !errors.Is(err, ErrDeclined) {
		t.Fatalf("Rank over another SQLite = %v, want ErrDeclined", err)
	}
	if d.r.Stats().Ranked != 0 {
		t.Errorf("Stats().Ranked = %d, want 0", d.r.Stats().Ranked)
	}
}

// TestRankerOptions: Off declines every query; without LoadLengthsInline the
// first query of a table is declined while its row lengths are read in
// the background, and the next is ranked.
func TestRankerOptions(t *testing.T) {
	d := openFixture(t, "one-segment.db")
	tb := Table{Name: "t"}
	d.r = New(d.readTx, Options{Off: true})
	if _, err := d.goScores(t, tb, "alpha"); !errors.Is(err, ErrDeclined) {
		t.Errorf("Rank with Off = %v, want ErrDeclined", err)
	}
	d.r = New(d.readTx, Options{})
	t.Cleanup(d.r.Close)
	if _, err := d.goScores(t, tb, "alpha"); !errors.Is(err, ErrDeclined) {
		t.Errorf("the first Rank before the lengths are read = %v, want ErrDeclined", err)
	}
	d.r.WaitLengths()
	if _, err := d.goScores(t, tb, "alpha"); err != nil {
		t.Errorf("Rank once the lengths are read = %v, want ranked", err)
	}
	if got := d.r.Stats().Ranked; got != 1 {
		t.Errorf("Stats().Ranked = %d, want 1", got)
	}
}

// longestPositionList returns the longest position list of term over the
// segments, and how many leaf pages its doclists take.
func (d *testDB) longestPositionList(t testing.TB, term string) (int, int64) {
	t.Helper()
	longest, pages := 0, int64(0)
	err := d.readTx(context.Background(), func(tx *sql.Tx) error {
		x := &ftsIndex{ctx: context.Background(), tx: tx, table: "t", r: d.r}
		defer x.release()
		s, err := x.structure()
		if err != nil {
			return err
		}
		byTerm, err := x.termDoclists(s, term, false, true)
		if err != nil {
			return err
		}
		dl := byTerm[term]
		if dl == nil {
			return fmt.Errorf("no doclist of %s", term)
		}
		for _, n := range dl.counts {
			longest = max(longest, int(n))
		}
		pages, err = x.termPages(s, term)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return longest, pages
}

// listsEndingWithAPage counts the leaf pages of table's segments that hold
// only the end of a position list, ending exactly at the page's end, with
// the next page going on with the same doclist (its first rowid at the
// start): the case where a doclist does not end with its page.
func (d *testDB) listsEndingWithAPage(t testing.TB, table string) int {
	t.Helper()
	n := 0
	err := d.readTx(context.Background(), func(tx *sql.Tx) error {
		segs, err := Segments(context.Background(), tx, table)
		if err != nil {
			return err
		}
		for _, seg := range segs {
			prevOnlyList := false
			for pg := seg.FirstPage; pg <= seg.LastPage; pg++ {
				var page []byte
				if err := tx.QueryRow(`SELECT block FROM `+table+`_data WHERE id = ?`, seg.ID<<37+pg).Scan(&page); err != nil {
					return err
				}
				firstRowid := int(page[0])<<8 | int(page[1])
				szLeaf := int(page[2])<<8 | int(page[3])
				if prevOnlyList && firstRowid == 4 {
					n++
				}
				prevOnlyList = firstRowid == 0 && szLeaf == len(page)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
