package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
)

func benchLaneCount() int {
	if n, err := strconv.Atoi(os.Getenv("HERMES_BENCH_SERVE_LANES")); err == nil && n > 0 {
		return n
	}
	return 10_000
}

// resolveBody is the resolve request of lane i.
func resolveBody(i int) []byte {
	return fmt.Appendf(nil, `{"source":{"platform":"telegram","chat_id":"%d","chat_type":"dm"}}`, 1_000_000+i)
}

// hammer sends resolves for random lanes from conc clients for d and
// returns the latencies.
func hammer(b *testing.B, addr string, lanes, conc int, d time.Duration) []time.Duration {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}}
	lat := make([][]time.Duration, conc)
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for c := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 9))
			for time.Now().Before(deadline) {
				start := time.Now()
				resp, err := client.Post("http://"+addr+"/v1/sessions/resolve", "application/json", bytes.NewReader(resolveBody(rng.IntN(lanes))))
				if err != nil {
					b.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("resolve = %d", resp.StatusCode)
					return
				}
				lat[c] = append(lat[c], time.Since(start))
			}
		}()
	}
	wg.Wait()
	all := slices.Concat(lat...)
	slices.Sort(all)
	return all
}

// BenchmarkServe measures the running binary over loopback HTTP: resolve
// req/s and p99 at 64 concurrent clients on existing lanes, the resident
// memory with every lane loaded, and restart-to-ready time.
func BenchmarkServe(b *testing.B) {
	lanes := benchLaneCount()
	home := b.TempDir()
	h := homeLayout{dir: home}
	if err := h.ensure(); err != nil {
		b.Fatal(err)
	}
	store, err := sqlite.Open(h.eventsDB())
	if err != nil {
		b.Fatal(err)
	}
	if err := seedCreatedLanes(store, lanes); err != nil {
		b.Fatal(err)
	}
	store.Close()

	s := startServer(b, home, nil, debugArgs()...)
	// Touch every lane once so the server holds all of them (RSS).
	all := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range all {
				resp, err := http.Post("http://"+s.addr+"/v1/sessions/resolve", "application/json", bytes.NewReader(resolveBody(i)))
				if err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	for i := range lanes {
		all <- i
	}
	close(all)
	wg.Wait()
	rss := rssKB(s.cmd.Process.Pid)

	b.ResetTimer()
	lat := hammer(b, s.addr, lanes, 64, 5*time.Second)
	b.StopTimer()
	if len(lat) > 0 {
		b.ReportMetric(float64(len(lat))/5, "resolve-req/s")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	b.ReportMetric(float64(rss)/1024, "RSS-MB")
	b.ReportMetric(float64(rss)/1024*100_000/float64(lanes), "MB-per-100k-lanes")
	if code := s.stop(syscall.SIGTERM); code != 0 {
		b.Fatalf("stop = %d", code)
	}
	start := time.Now()
	s2 := startServer(b, home, nil)
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "restart-to-ready-ms")
	s2.stop(syscall.SIGTERM)
}

func debugArgs() []string {
	if a := os.Getenv("HERMES_BENCH_DEBUG_ADDR"); a != "" {
		return []string{"--debug-addr", a}
	}
	return nil
}

func seedCreatedLanes(store *sqlite.Store, n int) error {
	ctx := context.Background()
	errs := make(chan error, 1)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := appendCreated(ctx, store, i); err != nil {
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
		return err
	default:
		return nil
	}
}

func rssKB(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}
