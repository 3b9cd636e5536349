package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/node"
	"hermes/testfixtures"
)

// benchWarmUp is how long the clients of BenchmarkLiveRebuild run before
// the rebuild starts.
const benchWarmUp = 10 * time.Second

// BenchmarkLiveRebuild runs `hermes projections rebuild` against a hermes
// serve holding a generated mixed history (the one of BenchmarkRebuild)
// while 16 clients resolve, write, and search (a fixed query and their own
// writes), and reports the live rebuild's rate, the request latencies
// during it and the swap's pause. A failed or wrong answer fails it.
//
//	HERMES_BENCH_EVENTS=100000 go test -run '^$' -bench LiveRebuild -benchtime=1x ./cmd/hermes
func BenchmarkLiveRebuild(b *testing.B) {
	n := benchDurableEvents()
	ctx := context.Background()
	h := node.Home{Dir: b.TempDir()}
	if err := h.Ensure(); err != nil {
		b.Fatal(err)
	}
	store, err := sqlite.Open(h.EventsDB())
	if err != nil {
		b.Fatal(err)
	}
	o := testfixtures.HistoryOptions{Events: n, Lanes: max(100, n/100), Seed: 42, Start: testfixtures.Date(2026, 1, 1, 0, 0, 0, 0), CJKShare: 0.2}
	if err := testfixtures.LoadHistory(ctx, store, o, 64); err != nil {
		b.Fatal(err)
	}
	if err := store.Close(); err != nil {
		b.Fatal(err)
	}
	s := startServer(b, h.Dir, nil, "--clock", "manual")
	const clients = 16
	const fixed = "/v1/search?q=deploy&order=recent&limit=20"
	var baseline json.RawMessage
	s.must("GET", fixed, nil, &baseline)
	ids := make([]string, clients)
	for c := range clients {
		var r resolved
		s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": fmt.Sprintf("bench%d", c), "chat_type": "dm"}}, &r)
		ids[c] = r.Entry.SessionID
	}
	b.ResetTimer()
	for range b.N {
		var running atomic.Bool
		var mu sync.Mutex
		var during, before []time.Duration
		var worst [4]time.Duration
		var worstAt [4]time.Time
		var warming atomic.Bool
		warming.Store(true)
		var failures atomic.Int64
		var firstFail atomic.Value
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				src := map[string]any{"platform": "telegram", "chat_id": fmt.Sprintf("bench%d", c), "chat_type": "dm"}
				for k := 0; ; k++ {
					select {
					case <-stop:
						return
					default:
					}
					probe := fmt.Sprintf("bprobe%dx%d", c, k)
					steps := []func() error{
						func() error {
							var r resolved
							if st, err := s.request("POST", "/v1/sessions/resolve", map[string]any{"source": src}, &r); err != nil || st != 200 || r.Entry.SessionID != ids[c] {
								return fmt.Errorf("resolve = %d %v %q", st, err, r.Entry.SessionID)
							}
							return nil
						},
						func() error {
							var raw json.RawMessage
							if st, err := s.request("GET", fixed, nil, &raw); err != nil || st != 200 || !bytes.Equal(raw, baseline) {
								return fmt.Errorf("search = %d %v %.200s", st, err, raw)
							}
							return nil
						},
						func() error {
							if st, err := s.request("POST", "/v1/transcripts/"+ids[c]+"/messages", map[string]any{"role": "user", "content": probe}, nil); err != nil || st != 200 {
								return fmt.Errorf("append = %d %v", st, err)
							}
							return nil
						},
						func() error {
							var found struct{ Results []json.RawMessage }
							if st, err := s.request("GET", "/v1/search?q="+probe, nil, &found); err != nil || st != 200 || len(found.Results) != 1 {
								return fmt.Errorf("search own write = %d %v %d", st, err, len(found.Results))
							}
							return nil
						},
					}
					for i, step := range steps {
						began := time.Now()
						err := step()
						if warming.Load() {
							mu.Lock()
							before = append(before, time.Since(began))
							mu.Unlock()
						}
						if running.Load() {
							d := time.Since(began)
							mu.Lock()
							during = append(during, d)
							if d > worst[i] {
								worst[i], worstAt[i] = d, began
							}
							mu.Unlock()
						}
						if err != nil {
							failures.Add(1)
							firstFail.CompareAndSwap(nil, err.Error())
						}
					}
				}
			})
		}
		// The clients run alone first: the requests' latency without a
		// rebuild (the first writes after a start pay for FTS5 merges of
		// the index the start built in bulk), to compare with.
		time.Sleep(benchWarmUp)
		warming.Store(false)
		running.Store(true)
		began := time.Now()
		cli := exec.Command(binary, "projections", "rebuild", "--home", h.Dir)
		cli.Env = append(os.Environ(), "NO_COLOR=1")
		out, err := cli.CombinedOutput()
		took := time.Since(began)
		running.Store(false)
		close(stop)
		wg.Wait()
		if err != nil {
			b.Fatalf("rebuild: %v\n%s", err, out)
		}
		if f := failures.Load(); f > 0 {
			b.Fatalf("%d requests failed during the live rebuild, first: %v", f, firstFail.Load())
		}
		slices.Sort(during)
		q := func(p int) time.Duration { return during[min(len(during)-1, len(during)*p/100)] }
		b.ReportMetric(float64(n)/took.Seconds(), "rebuild-events/s")
		b.ReportMetric(took.Seconds(), "rebuild-s")
		b.ReportMetric(float64(len(during))/took.Seconds(), "req/s-during")
		slices.Sort(before)
		b.ReportMetric(float64(before[len(before)*99/100].Microseconds())/1000, "p99-ms-before")
		b.ReportMetric(float64(before[len(before)-1].Microseconds())/1000, "max-ms-before")
		b.ReportMetric(float64(q(50).Microseconds())/1000, "p50-ms-during")
		b.ReportMetric(float64(q(99).Microseconds())/1000, "p99-ms-during")
		b.ReportMetric(float64(during[len(during)-1].Microseconds())/1000, "max-ms-during")
		for _, line := range strings.Split(s.stderr.String(), "\n") {
			if strings.Contains(line, "rebuild") {
				b.Log(line)
			}
		}
		for i, name := range []string{"resolve", "search", "append", "search own write"} {
			b.Logf("slowest %s during the rebuild: %s, sent at %s", name, worst[i], worstAt[i].UTC().Format("15:04:05.000"))
		}
		b.Logf("%s", bytes.TrimSpace(out))
	}
}
