package fts5

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// lengthsDB is a WAL database with table t of n rows of sentences, and
// the rng that drew them.
func lengthsDB(t *testing.T, n int) (*testDB, *rand.Rand) {
	t.Helper()
	d := openDB(t, filepath.Join(t.TempDir(), "lengths.db"))
	if _, err := d.db.Exec(`PRAGMA journal_mode = WAL`); err != nil {
		t.Fatal(err)
	}
	d.exec(t, `CREATE VIRTUAL TABLE t USING fts5(content)`)
	rng := rand.New(rand.NewPCG(43, 8))
	d.insertSentences(t, rng, 1, n)
	return d, rng
}

// insertSentences adds n rows of sentences from id on, in one transaction.
func (d *testDB) insertSentences(t *testing.T, rng *rand.Rand, from int64, n int) {
	t.Helper()
	rows := sentences(rng, from, n, 3, 20)
	order := make([]int64, 0, n)
	for i := range n {
		order = append(order, from+int64(i))
	}
	d.insert(t, "t", rows, order)
}

// TestLengthsLoadInBackground: given a Ranker that has not read the row
// lengths, when it ranks, then that query is declined (a one-shot search
// never reads them all) while the lengths are read in the background;
// after that, queries are ranked, also after new rows (the lengths brought
// up to date), and after rows went away (the lowest id, or the highest: the
// highest id then goes down) the lengths are read again in the background;
// whatever is ranked is SQLite's answer.
func TestLengthsLoadInBackground(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order string // which row goes: the lowest or the highest id
	}{
		{"lowest id deleted", "ASC"},
		{"highest id deleted", "DESC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, rng := lengthsDB(t, 300)
			d.r = New(d.readTx, Options{})
			t.Cleanup(d.r.Close)
			const query = "alpha"
			ranked := func(stage string, want bool) {
				t.Helper()
				got, err := d.goScores(t, Table{Name: "t"}, query)
				switch {
				case want && err != nil:
					t.Errorf("%s: Rank(%q) = %v, want ranked", stage, query, err)
				case !want && !errors.Is(err, ErrDeclined):
					t.Errorf("%s: Rank(%q) = %d rows, %v; want ErrDeclined", stage, query, len(got), err)
				case want:
					if diff := gocmp.Diff(d.sqliteScores(t, "t", query), got); diff != "" {
						t.Errorf("%s: rowid → bm25 bits (-SQLite +Ranker):\n%s", stage, diff)
					}
				}
			}
			ranked("cold", false)
			d.r.WaitLengths()
			ranked("loaded", true)
			d.insertSentences(t, rng, 301, 50)
			ranked("appended", true)
			d.exec(t, `DELETE FROM t WHERE rowid = (SELECT rowid FROM t ORDER BY rowid `+tc.order+` LIMIT 1)`)
			ranked("a row went away", false)
			d.r.WaitLengths()
			ranked("read again", true)
		})
	}
}

// TestLengthsOfAnOlderSnapshot: given row lengths that a query brought up
// to date with new rows, when a query whose snapshot predates those rows
// ranks, then it is declined (the lengths describe rows it cannot see)
// without reading them again, and a query of the current snapshot is
// ranked.
func TestLengthsOfAnOlderSnapshot(t *testing.T) {
	d, rng := lengthsDB(t, 200)
	if _, err := d.goScores(t, Table{Name: "t"}, "alpha"); err != nil { // reads the lengths
		t.Fatal(err)
	}
	ctx := context.Background()
	err := d.readTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
			return err // the snapshot starts here
		}
		d.insertSentences(t, rng, 201, 40)
		if _, err := d.goScores(t, Table{Name: "t"}, "alpha"); err != nil { // another connection: the copy moves on
			return fmt.Errorf("Rank of the current snapshot = %w, want ranked", err)
		}
		fq, _ := parseFastQuery(Unicode61, "alpha")
		_, err := d.r.scores(ctx, tx, "t", fq)
		if !errors.Is(err, errUnsupportedIndex) || errors.Is(err, errLengthsNotLoaded) {
			t.Errorf("scores of the older snapshot = %v, want errUnsupportedIndex (not a new read of the lengths)", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
