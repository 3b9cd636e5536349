package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"hermes/events"
	pgtest "hermes/testfixtures/postgres"

	"github.com/jackc/pgx/v5"
)

// benchEvent is a turn completion, about 200 bytes of JSON (the SQLite
// store's benchmark event).
func benchEvent(i int) events.Event {
	tokens := int64(1200 + i%100)
	return events.TurnCompleted{
		TurnID:           fmt.Sprintf("turn-%08d", i),
		SessionID:        "20260301_090000_a1b2c3d4",
		InputTokens:      int64(i % 5000),
		OutputTokens:     321,
		CacheReadTokens:  4096,
		EstimatedCostUSD: 0.0123,
		CostStatus:       "estimated",
		LastPromptTokens: &tokens,
		At:               t0.Add(time.Duration(i) * time.Millisecond),
	}
}

// BenchmarkAppend measures durable appends (acknowledged after the
// server's commit, fsync on) of one event each from concurrent appenders,
// every append to a stream of its own (expected version NoStream): the
// shape of the SQLite store's BenchmarkAppend, on the tests' cluster
// (loopback TCP). The writer's group commit is what lets more appenders
// share each commit.
func BenchmarkAppend(b *testing.B) {
	for _, appenders := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) {
			benchmarkAppend(b, []*Store{openTemp(b)}, appenders, func(g, i int) string { return fmt.Sprintf("lane-bench-%09d", i) })
		})
	}
}

// BenchmarkAppendWriters is BenchmarkAppend at 16 appenders with 1 and 2
// writer connections, and for one writer several gathering waits.
func BenchmarkAppendWriters(b *testing.B) {
	for _, tc := range []struct {
		writers int
		gather  time.Duration
	}{{1, 0}, {1, 500 * time.Microsecond}, {1, 2 * time.Millisecond}, {2, 0}} {
		b.Run(fmt.Sprintf("writers=%d/gather=%v/appenders=16", tc.writers, tc.gather), func(b *testing.B) {
			s := openTemp(b, func(c *config) { c.writers, c.gatherWait = tc.writers, tc.gather })
			benchmarkAppend(b, []*Store{s}, 16, func(g, i int) string { return fmt.Sprintf("lane-bench-%09d", i) })
		})
	}
}

// BenchmarkAppendLongStreams is BenchmarkAppend with each appender writing
// to one long stream of its own (exact expected versions).
func BenchmarkAppendLongStreams(b *testing.B) {
	for _, appenders := range []int{1, 16} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) {
			benchmarkAppend(b, []*Store{openTemp(b)}, appenders, func(g, i int) string { return fmt.Sprintf("lane-bench-%d", g) })
		})
	}
}

// BenchmarkAppendNodes is BenchmarkAppend with the appenders spread over
// several Stores on one schema, as several hermes nodes: each has its own
// writer, and their transactions take turns at the order lock.
func BenchmarkAppendNodes(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d/appenders=16", nodes), func(b *testing.B) {
			url := tempSchema(b)
			stores := make([]*Store, nodes)
			for i := range stores {
				stores[i] = openAt(b, url)
			}
			walBefore := walSyncs(b)
			stop := sampleWaits(b)
			benchmarkAppend(b, stores, 16, func(g, i int) string { return fmt.Sprintf("lane-bench-%09d", i) })
			waits := stop()
			var tx int64
			for _, s := range stores {
				tx += s.stats.transactions.Load()
			}
			if tx > 0 {
				b.ReportMetric(float64(walSyncs(b)-walBefore)/float64(tx), "wal-syncs/tx")
			}
			b.Logf("nodes=%d: where the store's busy connections were, sampled every 2 ms: %s", nodes, waits)
		})
	}
}

// walSyncs is the server's count of WAL syncs (pg_stat_wal).
func walSyncs(b *testing.B) int64 {
	b.Helper()
	conn, err := pgx.Connect(context.Background(), pgtest.Shared(b).URL())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(context.Background(), "SELECT wal_sync FROM pg_stat_wal").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// sampleWaits samples, until the returned function is called, what the
// store's connections that are not idle are doing (pg_stat_activity:
// running, or waiting on a lock, on I/O, for the client), and returns
// the shares of the samples.
func sampleWaits(b *testing.B) func() string {
	b.Helper()
	conn, err := pgx.Connect(context.Background(), pgtest.Shared(b).URL())
	if err != nil {
		b.Fatal(err)
	}
	counts := map[string]int{}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			rows, err := conn.Query(context.Background(), `SELECT state, coalesce(wait_event_type, '') || ':' || coalesce(wait_event, ''), left(query, 30)
				FROM pg_stat_activity WHERE application_name = 'hermes' AND state <> 'idle' AND pid <> pg_backend_pid()`)
			if err != nil {
				return
			}
			for rows.Next() {
				var state, wait, query string
				if rows.Scan(&state, &wait, &query) == nil {
					if wait == ":" {
						wait = "running"
					}
					counts[state+" "+wait+" ["+strings.Fields(query + " ?")[0]+"]"]++
				}
			}
			rows.Close()
		}
	}()
	return func() string {
		close(done)
		<-stopped
		conn.Close(context.Background())
		total := 0
		keys := make([]string, 0, len(counts))
		for k, n := range counts {
			total += n
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int { return counts[b] - counts[a] })
		var out []string
		for _, k := range keys {
			out = append(out, fmt.Sprintf("%s %.0f%%", k, 100*float64(counts[k])/float64(max(total, 1))))
		}
		return fmt.Sprintf("%d samples: %s", total, strings.Join(out, "; "))
	}
}

// benchmarkAppend runs b.N appends from the given number of goroutines,
// appender g on stores[g % len(stores)]; appender g's i-th overall append
// goes to streamOf(g, i).
func benchmarkAppend(b *testing.B, stores []*Store, appenders int, streamOf func(g, i int) string) {
	ctx := context.Background()
	var next atomic.Int64
	latencies := make([][]time.Duration, appenders)
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu0 := time.Now(), benchCPU()
	for g := range appenders {
		s := stores[g%len(stores)]
		wg.Go(func() {
			versions := map[string]uint64{}
			for {
				i := int(next.Add(1))
				if i > b.N {
					return
				}
				stream := streamOf(g, i)
				ps := []events.Proposed{{ID: fmt.Sprintf("e-%09d", i), Event: benchEvent(i)}}
				t := time.Now()
				res, err := s.Append(ctx, stream, events.ExactVersion(versions[stream]), ps)
				latencies[g] = append(latencies[g], time.Since(t))
				if err != nil {
					b.Error(err)
					return
				}
				versions[stream] = res.LastVersion()
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), benchCPU()-cpu0
	b.StopTimer()
	all := slices.Concat(latencies...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(percentile(all, 50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(all, 99).Microseconds()), "p99-µs")
	// The client's CPU per append; the server's is in its own processes.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	var tx, reqs int64
	for _, s := range stores {
		tx, reqs = tx+s.stats.transactions.Load(), reqs+s.stats.requests.Load()
	}
	if tx > 0 {
		b.ReportMetric(float64(reqs)/float64(tx), "appends/tx")
	}
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}

func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRawCommit is what the server gives without the store: one
// single-row INSERT per transaction into the events table, from each of
// the connections at once, without and with the order lock taken first.
// Without it PostgreSQL's own group commit lets concurrent transactions
// share a WAL flush (and positions commit out of order); with it they
// commit one after the other, a flush each. The store's group commit
// (BenchmarkAppend) is how it gets the throughput back with the lock.
func BenchmarkRawCommit(b *testing.B) {
	for _, lock := range []bool{false, true} {
		for _, conns := range []int{1, 16} {
			b.Run(fmt.Sprintf("lock=%v/conns=%d", lock, conns), func(b *testing.B) {
				s := openTemp(b)
				data, err := events.Encode(benchEvent(0))
				if err != nil {
					b.Fatal(err)
				}
				insert := "INSERT INTO " + s.sql.schema + ".events (stream, version, event_id, type, data, metadata, recorded_at) VALUES ($1, 1, $2, $3, $4, '{}', 0)"
				if lock {
					insert = "WITH l AS (SELECT pg_advisory_xact_lock($5)) " +
						strings.Replace(insert, "VALUES ($1, 1, $2, $3, $4, '{}', 0)", "SELECT $1, 1, $2, $3, $4, '{}', 0 FROM l", 1)
				}
				ctx := context.Background()
				cs := make([]*pgx.Conn, conns)
				for i := range cs {
					if cs[i], err = s.connect(ctx); err != nil {
						b.Fatal(err)
					}
					defer cs[i].Close(ctx)
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for _, c := range cs {
					wg.Go(func() {
						for {
							i := next.Add(1)
							if i > int64(b.N) {
								return
							}
							args := []any{fmt.Sprintf("lane-raw-%d", i), fmt.Sprintf("e-%d", i), events.TypeTurnCompleted, string(data)}
							if lock {
								args = append(args, s.keys.order)
							}
							if _, err := c.Exec(ctx, insert, args...); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
			})
		}
	}
}

// BenchmarkReplicationLag measures, between two Stores on one schema (two
// nodes), the time from an append on one to its delivery by a
// subscription on the other: the commit, the notification (LISTEN/NOTIFY)
// and the subscription's read.
func BenchmarkReplicationLag(b *testing.B) {
	url := tempSchema(b)
	writer, reader := openAt(b, url), openAt(b, url, WithPollInterval(time.Hour))
	sub, err := reader.Subscribe(context.Background(), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	lags := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		res, err := writer.Append(context.Background(), "lane-lag", events.ExactVersion(uint64(i)), []events.Proposed{{ID: fmt.Sprintf("lag-%d", i), Event: benchEvent(i)}})
		if err != nil {
			b.Fatal(err)
		}
		for e := range sub.Events() {
			if e.Position == res.LastPosition() {
				break
			}
		}
		lags = append(lags, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lags)
	b.ReportMetric(float64(percentile(lags, 50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(lags, 99).Microseconds()), "p99-µs")
}
