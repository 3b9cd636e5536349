package sessions_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"hermes/projections/sessions"
)

// TestBulkLoadEqualsBatchByBatch: a bulk load, whatever its batches, its
// commit interval, redeliveries and crashes (a close without EndBulk, then
// a new bulk load from the checkpoint), leaves the rows one Apply of the
// whole log leaves.
func TestBulkLoadEqualsBatchByBatch(t *testing.T) {
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		w := newWorld(t)
		all := randomHistory(ctx, rt, w)
		defer sessions.SetBulkCommitEvents(rapid.IntRange(1, 12).Draw(rt, "commit every"))()

		fresh := w.open(t, fmt.Sprintf("fresh-%d.db", time.Now().UnixNano()), sessions.Exports{})
		if err := fresh.Apply(ctx, all); err != nil {
			rt.Fatal(err)
		}

		path := filepath.Join(w.dir, fmt.Sprintf("bulk-%d.db", time.Now().UnixNano()))
		open := func() (*sessions.Projection, int) {
			p, err := sessions.Open(path, sessions.Exports{})
			if err != nil {
				rt.Fatal(err)
			}
			cp, err := p.Checkpoint(ctx)
			if err != nil {
				rt.Fatal(err)
			}
			if err := p.BeginBulk(ctx); err != nil {
				rt.Fatal(err)
			}
			// The runner resumes after the checkpoint.
			return p, sort.Search(len(all), func(i int) bool { return all[i].Position > cp })
		}
		bulk, i := open()
		for i < len(all) {
			end := min(i+rapid.IntRange(1, 7).Draw(rt, "batch"), len(all))
			from := i
			if rapid.IntRange(0, 3).Draw(rt, "redeliver") == 0 {
				from = max(0, i-rapid.IntRange(1, 5).Draw(rt, "back"))
			}
			if err := bulk.Apply(ctx, all[from:end]); err != nil {
				rt.Fatal(err)
			}
			i = end
			if rapid.IntRange(0, 5).Draw(rt, "crash") == 0 {
				bulk.Close() // no EndBulk: what was not committed is lost
				bulk, i = open()
			}
		}
		if err := bulk.EndBulk(ctx); err != nil {
			rt.Fatal(err)
		}
		defer bulk.Close()
		if diff := cmp.Diff(dump(t, fresh), dump(t, bulk)); diff != "" {
			rt.Fatalf("bulk load differs from one batch (-one batch +bulk):\n%s", diff)
		}
	})
}
