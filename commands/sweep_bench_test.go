package commands_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/commands"
	"hermes/domain"
	"hermes/events"
)

// keyList is a LaneDirectory over a fixed list of keys: the benchmark
// measures the sweep, not a read model.
type keyList []string

func (k keyList) SessionKeys(context.Context) ([]string, error) { return slices.Clone(k), nil }

// BenchmarkSuspendRecentlyActive measures the restart sweep of a server
// whose lane cache holds every lane (as after a day of traffic): every
// lane is marked, each mark an append of its own stream, all of them
// durable before the call returns. HERMES_BENCH_LANES sets the lane counts
// (default 10000). It reports the process CPU per sweep (cpu-ms/op), the
// share of the machine a sweep needs whatever the load.
func BenchmarkSuspendRecentlyActive(b *testing.B) {
	for _, lanes := range benchLanes() {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			template := filepath.Join(b.TempDir(), "seeded.db")
			store, err := sqlite.Open(template)
			if err != nil {
				b.Fatal(err)
			}
			seedLanes(b, store, lanes)
			if err := store.Close(); err != nil {
				b.Fatal(err)
			}
			keys := make(keyList, lanes)
			for i := range lanes {
				keys[i] = domain.BuildSessionKey(laneSource(i), domain.DefaultKeyOptions())
			}
			slices.Sort(keys)
			clock := time.Date(2026, 5, 9, 10, 1, 0, 0, time.UTC)
			var cpu time.Duration
			b.ResetTimer()
			b.StopTimer()
			for i := range b.N {
				path := filepath.Join(b.TempDir(), fmt.Sprintf("events-%d.db", i))
				copyFile(b, template, path)
				store, err := sqlite.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				h := commands.NewHandler(store, commands.DefaultConfig(),
					commands.WithClock(func() time.Time { return clock }), commands.WithDirectory(keys))
				for _, k := range keys {
					if _, _, err := h.Lane(context.Background(), k); err != nil {
						b.Fatal(err)
					}
				}
				before := processCPU()
				b.StartTimer()
				marked, err := h.SuspendRecentlyActive(context.Background(), commands.SuspendRecentlyActive{MaxAge: 24 * time.Hour})
				b.StopTimer()
				cpu += processCPU() - before
				if err != nil {
					b.Fatal(err)
				}
				if len(marked) != lanes {
					b.Fatalf("SuspendRecentlyActive marked %d lanes, want %d", len(marked), lanes)
				}
				if err := store.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// processCPU is the user and system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func copyFile(b *testing.B, from, to string) {
	b.Helper()
	src, err := os.Open(from)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		b.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		b.Fatal(err)
	}
}

var _ events.Store = (*sqlite.Store)(nil)
