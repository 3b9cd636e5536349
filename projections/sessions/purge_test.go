package sessions_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"hermes/commands"
	"hermes/domain"
	"hermes/events"
	"hermes/projections/sessions"
	"hermes/testfixtures/ondisk"
)

// TestPurge_LeavesNoCopyOfAnErasedOrigin: given lanes whose origins name a
// person, rewritten (marked resume-pending, as after a crash) in batches of
// several lanes before the person is forgotten, when the erasure is applied
// and lanes.db purged, then no byte of lanes.db holds the person's name.
// secure_delete alone leaves, in some of these histories, a copy of an
// origin in the unused middle of a page a rebalance rewrote (the control:
// a bare WAL checkpoint finds one in at least one history, so the check can
// fail); Purge's VACUUM leaves none. The histories are deterministic
// (seeded batch sizes, rows written in key order) and depend on the rows'
// width: with the lanes columns of schema step 6, seed 10 with a name of 26
// or 27 bytes leaves a copy (no seed of the first 240 does with 24 bytes;
// before step 6, seeds 8 and 13 did). Marking every lane in one batch, as
// the recovery after a crash does, is what moves the rows.
func TestPurge_LeavesNoCopyOfAnErasedOrigin(t *testing.T) {
	ctx := context.Background()
	copiesBeforePurge := 0
	for _, history := range []struct {
		seed uint64
		pad  string
	}{{10, "xx"}, {10, "xxx"}} {
		seed := history.seed
		w := newWorld(t)
		p := w.open(t, "lanes.db", sessions.Exports{})
		rng := rand.New(rand.NewPCG(seed, 0))
		name := fmt.Sprintf("Bo kmark%016x", seed) + history.pad
		var applied uint64
		applyInBatches := func(max int) {
			envs, err := w.store.ReadAll(ctx, applied, 100000)
			if err != nil {
				t.Fatal(err)
			}
			for len(envs) > 0 {
				n := min(len(envs), 1+rng.IntN(max))
				if err := p.Apply(ctx, envs[:n]); err != nil {
					t.Fatal(err)
				}
				applied, envs = envs[n-1].Position, envs[n:]
			}
		}
		const lanes = 25
		for g := range lanes {
			src := domain.SessionSource{Platform: "telegram", ChatID: fmt.Sprintf("g%d", g), ChatType: "group", UserID: "u-1", UserName: name}
			if _, err := w.handler.ResolveSession(ctx, commands.ResolveSession{Source: src}); err != nil {
				t.Fatal(err)
			}
			if rng.IntN(3) == 0 {
				applyInBatches(6)
			}
		}
		applyInBatches(6)
		for g := range lanes {
			key := fmt.Sprintf("agent:main:telegram:group:g%d:u-1", g)
			if _, _, err := w.handler.MarkResumePending(ctx, commands.MarkResumePending{Key: key, Reason: events.ResumeRestartInterrupted}); err != nil {
				t.Fatal(err)
			}
		}
		applyInBatches(1000) // recovery marks every lane at once: one batch
		if _, err := w.handler.Forget(ctx, commands.Forget{Platform: "telegram", UserID: "u-1"}); err != nil {
			t.Fatal(err)
		}
		applyInBatches(6)

		path := filepath.Join(w.dir, "lanes.db")
		ondisk.BareCheckpoint(t, path)
		if ondisk.Holds(t, path, []byte(name)) {
			copiesBeforePurge++
		}
		if err := p.Purge(ctx); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{path, path + "-wal"} {
			if ondisk.Holds(t, f, []byte(name)) {
				t.Errorf("history %d: after Purge, %s still holds the erased name", seed, filepath.Base(f))
			}
		}
	}
	if copiesBeforePurge == 0 {
		t.Fatal("control: no history left a copy of an erased origin after a bare checkpoint; the check cannot fail")
	}
}
