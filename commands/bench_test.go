package commands_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/commands"
	"hermes/domain"
	"hermes/events"
)

// benchLanes is how many lanes the resolve benchmarks create
// (HERMES_BENCH_LANES, default 10000).
func benchLanes() []int {
	if v := os.Getenv("HERMES_BENCH_LANES"); v != "" {
		var out []int
		for _, f := range filepathSplit(v) {
			if n, err := strconv.Atoi(f); err == nil && n > 0 {
				out = append(out, n)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return []int{10000}
}

func filepathSplit(s string) []string {
	var out []string
	cur := ""
	for _, r := range s {
		if r == ',' {
			out = append(out, cur)
			cur = ""
			continue
		}
		cur += string(r)
	}
	return append(out, cur)
}

func laneSource(i int) domain.SessionSource {
	return domain.SessionSource{Platform: "telegram", ChatID: strconv.Itoa(1_000_000 + i), ChatType: "dm"}
}

// seedLanes creates n lanes directly in the store, 64 appends in flight.
func seedLanes(b *testing.B, store events.Store, n int) {
	b.Helper()
	at := time.Date(2026, 5, 9, 10, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	next := make(chan int)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				src := laneSource(i)
				key := domain.BuildSessionKey(src, domain.DefaultKeyOptions())
				_, err := store.Append(context.Background(), events.LaneStream(key), events.NoStream(), []events.Proposed{{
					ID: fmt.Sprintf("seed-%d", i),
					Event: events.SessionCreated{SessionKey: key, SessionID: fmt.Sprintf("20260509_100000_%08x", i),
						Origin: src.Event(), Platform: src.Platform, ChatType: src.ChatType, At: at},
				}})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// BenchmarkResolveExisting measures get_or_create_session on existing lanes
// (a durable touch), with the lane cache warm, at 1, 16 and 64 concurrent
// callers; it reports p50/p99 latency. HERMES_BENCH_LANES sets the lane
// counts (default 10000; `make bench` uses 10000,100000).
func BenchmarkResolveExisting(b *testing.B) {
	for _, lanes := range benchLanes() {
		store, err := sqlite.Open(filepath.Join(b.TempDir(), "events.db"))
		if err != nil {
			b.Fatal(err)
		}
		seedLanes(b, store, lanes)
		clock := time.Date(2026, 5, 9, 10, 1, 0, 0, time.UTC)
		h := commands.NewHandler(store, commands.DefaultConfig(), commands.WithClock(func() time.Time { return clock }))
		warm(b, h, lanes)
		for _, conc := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("lanes=%d/callers=%d", lanes, conc), func(b *testing.B) {
				lat := make([][]time.Duration, conc)
				b.ResetTimer()
				var wg sync.WaitGroup
				per := max(1, b.N/conc)
				for c := range conc {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(c), 1))
						for range per {
							start := time.Now()
							if _, err := h.ResolveSession(context.Background(), commands.ResolveSession{Source: laneSource(rng.IntN(lanes))}); err != nil {
								b.Error(err)
								return
							}
							lat[c] = append(lat[c], time.Since(start))
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				all := slices.Concat(lat...)
				slices.Sort(all)
				if len(all) > 0 {
					b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
					b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
					b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "resolves/s")
				}
			})
		}
		store.Close()
	}
}

// warm resolves every lane once, as a running server has, so the lane
// cache holds them all.
func warm(b *testing.B, h *commands.Handler, lanes int) {
	b.Helper()
	next := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if _, err := h.ResolveSession(context.Background(), commands.ResolveSession{Source: laneSource(i)}); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := range lanes {
		next <- i
	}
	close(next)
	wg.Wait()
}
