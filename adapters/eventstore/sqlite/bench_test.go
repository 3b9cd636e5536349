package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"hermes/events"
)

// benchEvent is a turn completion, about 200 bytes of JSON.
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

// BenchmarkAppend measures durable appends (synchronous=FULL, acknowledged
// after the fsync) of one event each from concurrent appenders, every append
// to a stream of its own (a new lane: expected version NoStream). The group
// commit is what lets more appenders share each fsync.
func BenchmarkAppend(b *testing.B) {
	for _, appenders := range []int{1, 8, 16, 64} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) {
			benchmarkAppend(b, appenders, func(g, i int) string { return fmt.Sprintf("lane-bench-%09d", i) })
		})
	}
}

// BenchmarkAppendLongStreams is BenchmarkAppend with each appender writing
// to one long stream of its own (exact expected versions). Every commit then
// dirties one (stream, version) index page per stream it touches, so it
// writes several times more WAL than BenchmarkAppend for the same events.
func BenchmarkAppendLongStreams(b *testing.B) {
	for _, appenders := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) {
			benchmarkAppend(b, appenders, func(g, i int) string { return fmt.Sprintf("lane-bench-%d", g) })
		})
	}
}

// benchmarkAppend runs b.N appends from the given number of goroutines;
// appender g's i-th overall append goes to streamOf(g, i).
func benchmarkAppend(b *testing.B, appenders int, streamOf func(g, i int) string) {
	s, err := Open(filepath.Join(b.TempDir(), "events.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var next atomic.Int64
	latencies := make([][]time.Duration, appenders)
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu0 := time.Now(), benchCPU()
	for g := range appenders {
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
	// CPU per append, what the process spent (the machine is shared, so
	// wall-clock rates are noisy).
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}

// rawFile opens a bare SQLite file with the driver and pragmas of the
// writer, and the events schema, without the store around it.
func rawFile(b *testing.B) *sql.DB {
	b.Helper()
	db, err := sql.Open("sqlite", dsn(filepath.Join(b.TempDir(), "raw.db"), false, defaultBusyTimeout))
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	if _, err := db.Exec("PRAGMA journal_mode = WAL"); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(schemaSQL); err != nil {
		b.Fatal(err)
	}
	return db
}

func rawRow(i int) []any {
	data, _ := events.Encode(benchEvent(i))
	return []any{"lane-raw", int64(i + 1), fmt.Sprintf("e-%d", i), events.TypeTurnCompleted, string(data), `{"schema_version":1}`, int64(i)}
}

// BenchmarkRawCommit is the physical limit of one appender: one single-row
// transaction per op, each commit an fsync of the WAL.
func BenchmarkRawCommit(b *testing.B) {
	db := rawFile(b)
	stmt, err := db.Prepare("INSERT INTO events (stream, version, event_id, type, data, metadata, recorded_at) VALUES (?,?,?,?,?,?,?)")
	if err != nil {
		b.Fatal(err)
	}
	defer stmt.Close()
	rows := make([][]any, b.N)
	for i := range rows {
		rows[i] = rawRow(i)
	}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if _, err := stmt.Exec(rows[i]...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
}

// BenchmarkRawBatchedInsert is the physical limit of the insert itself:
// b.N rows in transactions of 1000, with single-row or multi-row INSERTs.
func BenchmarkRawBatchedInsert(b *testing.B) {
	for _, perStmt := range []int{1, 64} {
		b.Run(fmt.Sprintf("rows-per-insert=%d", perStmt), func(b *testing.B) {
			db := rawFile(b)
			q := "INSERT INTO events (stream, version, event_id, type, data, metadata, recorded_at) VALUES " +
				strings.TrimSuffix(strings.Repeat("(?,?,?,?,?,?,?),", perStmt), ",")
			stmt, err := db.Prepare(q)
			if err != nil {
				b.Fatal(err)
			}
			defer stmt.Close()
			n := (b.N + perStmt - 1) / perStmt * perStmt
			args := make([][]any, n/perStmt)
			for i := range n {
				args[i/perStmt] = append(args[i/perStmt], rawRow(i)...)
			}
			const perTx = 1000
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < len(args); {
				tx, err := db.Begin()
				if err != nil {
					b.Fatal(err)
				}
				txStmt := tx.Stmt(stmt)
				for end := min(i+max(perTx/perStmt, 1), len(args)); i < end; i++ {
					if _, err := txStmt.Exec(args[i]...); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "rows/s")
		})
	}
}
