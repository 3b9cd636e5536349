package projections_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/projections"
	"hermes/projections/sessions"
	"hermes/projections/transcripts"
	"hermes/testfixtures"
)

// benchEvents is the history size of the rebuild benchmark
// (HERMES_BENCH_EVENTS, default 100000; `make bench` uses 1000000).
func benchEvents() int {
	if n, err := strconv.Atoi(os.Getenv("HERMES_BENCH_EVENTS")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// BenchmarkRebuild measures a full rebuild of every read model (lanes and
// state.db with both FTS indexes) from a generated mixed history: ~30% lane
// events, ~70% messages of ~200 characters, 20% of them Chinese.
func BenchmarkRebuild(b *testing.B) {
	n := benchEvents()
	dir := b.TempDir()
	store, err := sqlite.Open(filepath.Join(dir, "events.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	start := time.Now()
	o := testfixtures.HistoryOptions{Events: n, Lanes: max(100, n/100), Seed: 42, Start: testfixtures.Date(2026, 1, 1, 0, 0, 0, 0), CJKShare: 0.2}
	if err := testfixtures.LoadHistory(context.Background(), store, o, 64); err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %d events in %s", n, time.Since(start).Round(time.Millisecond))
	// HERMES_BENCH_CPUPROFILE names a CPU profile of the rebuilds alone
	// (go test's -cpuprofile would include the generation).
	if f := os.Getenv("HERMES_BENCH_CPUPROFILE"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		defer out.Close()
		if err := pprof.StartCPUProfile(out); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		out := filepath.Join(dir, "rebuild-"+strconv.Itoa(i))
		b.StartTimer()
		err := projections.Rebuild(context.Background(), store, func(d string) ([]projections.Projection, error) {
			lanes, err := sessions.Open(filepath.Join(d, "lanes.db"), sessions.Exports{})
			if err != nil {
				return nil, err
			}
			state, err := transcripts.Open(filepath.Join(d, "state.db"))
			if err != nil {
				return nil, err
			}
			return []projections.Projection{lanes, state}, nil
		}, out, nil)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	// CPU time of the rebuilds (all threads): on a shared machine it
	// varies less than the wall time; events per CPU-second over the two
	// cores bounds what an idle machine would reach.
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")

	// A restart with that history: the read models reopen and catch up
	// from their checkpoints, which does not grow with the history.
	b.StopTimer()
	reopen := time.Now()
	lanes, err := sessions.Open(filepath.Join(dir, "rebuild-0", "lanes.db"), sessions.Exports{})
	if err != nil {
		b.Fatal(err)
	}
	state, err := transcripts.Open(filepath.Join(dir, "rebuild-0", "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	if err := projections.NewRunner(store, lanes, state).CatchUp(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(reopen).Milliseconds()), "reopen-ms")
	lanes.Close()
	state.Close()
}

// cpuTime is the user and system time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
