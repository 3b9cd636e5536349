package commands_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/commands"
)

// benchLoadSizes are the lane lengths BenchmarkLoadLane loads
// (HERMES_BENCH_LOAD_EVENTS, comma-separated; default 1000,20000).
func benchLoadSizes() []int {
	out := []int{1000, 20000}
	if v := os.Getenv("HERMES_BENCH_LOAD_EVENTS"); v != "" {
		out = out[:0]
		for _, f := range strings.Split(v, ",") {
			if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
				out = append(out, n)
			}
		}
	}
	return out
}

// refLaneKey is the 1,000-event lane each load is compared with.
const refLaneKey = "agent:main:telegram:dm:1000"

// BenchmarkLoadLane measures a cold load of a lane (a handler with an empty
// cache folding it from the store, as after a restart or an eviction) of
// events=N events, with and without snapshots. Each op loads the N-event
// lane and, separately timed, a 1,000-event lane of the same file: p50-µs
// is the N-event load's median, ref-p50-µs the 1,000-event one's, and
// x-ref-p50 their ratio (the goal: at most 2 at N = 1,000,000 with
// snapshots). cpu-µs/op is the process's CPU time for both loads.
func BenchmarkLoadLane(b *testing.B) {
	for _, n := range benchLoadSizes() {
		dir := b.TempDir()
		store, err := sqlite.Open(filepath.Join(dir, "events.db"))
		if err != nil {
			b.Fatal(err)
		}
		appendLane(b, store, refLaneKey, 0, 1000)
		appendLane(b, store, longLaneKey, 0, n)
		for _, snaps := range []bool{true, false} {
			name := "events=" + strconv.Itoa(n) + "/snapshots=off"
			var opts []commands.Option
			if snaps {
				name = "events=" + strconv.Itoa(n) + "/snapshots=on"
				opts = []commands.Option{commands.WithSnapshots(store, 0)}
			}
			b.Run(name, func(b *testing.B) {
				load := func(key string) time.Duration {
					h := commands.NewHandler(store, commands.DefaultConfig(), opts...)
					start := time.Now()
					if _, v, err := h.Lane(b.Context(), key); err != nil || v == 0 {
						b.Fatalf("Lane(%s) = version %d, %v", key, v, err)
					}
					d := time.Since(start)
					h.WaitSnapshots()
					return d
				}
				// The first loads write the snapshots the timed ones read.
				load(refLaneKey)
				load(longLaneKey)
				lane := make([]time.Duration, 0, b.N)
				ref := make([]time.Duration, 0, b.N)
				cpu0 := cpuTime()
				b.ResetTimer()
				for range b.N {
					lane = append(lane, load(longLaneKey))
					ref = append(ref, load(refLaneKey))
				}
				b.StopTimer()
				cpu := cpuTime() - cpu0
				p50, refP50 := median(lane), median(ref)
				b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
				b.ReportMetric(float64(refP50.Microseconds()), "ref-p50-µs")
				b.ReportMetric(float64(p50)/float64(refP50), "x-ref-p50")
				b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
		if err := store.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
