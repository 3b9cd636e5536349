package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/node"
	"hermes/testfixtures"
)

// benchDurableEvents is the log size of BenchmarkBackupRestore
// (HERMES_BENCH_EVENTS, default 100000; the figures in the README are for
// 1000000).
func benchDurableEvents() int {
	if n, err := strconv.Atoi(os.Getenv("HERMES_BENCH_EVENTS")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// BenchmarkBackupRestore measures, on a generated mixed history (the one
// of BenchmarkRebuild): a backup of the log (MB/s and events/s), hermes
// check over it, and the time from `hermes restore` into an empty home to
// a ready `hermes serve` (restore, read-model rebuild, start, quick checks,
// recovery).
//
//	HERMES_BENCH_EVENTS=1000000 go test -run '^$' -bench BackupRestore -benchtime=1x -timeout 60m ./cmd/hermes
func BenchmarkBackupRestore(b *testing.B) {
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
	start := time.Now()
	o := testfixtures.HistoryOptions{Events: n, Lanes: max(100, n/100), Seed: 42, Start: testfixtures.Date(2026, 1, 1, 0, 0, 0, 0), CJKShare: 0.2}
	if err := testfixtures.LoadHistory(ctx, store, o, 64); err != nil {
		b.Fatal(err)
	}
	if err := store.Close(); err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %d events in %s", n, time.Since(start).Round(time.Millisecond))
	b.ResetTimer()
	for i := range b.N {
		m, dir, took, err := node.Backup(ctx, h, filepath.Join(b.TempDir(), "backups"), time.Now(), version, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(m.Bytes)/1e6/took.Seconds(), "backup-MB/s")
		b.ReportMetric(float64(m.Events)/took.Seconds(), "backup-events/s")
		b.ReportMetric(float64(m.Bytes)/1e6, "log-MB")
		b.ReportMetric(took.Seconds(), "backup-s")

		began := time.Now()
		rep, err := sqlite.Check(ctx, h.EventsDB(), sqlite.CheckOptions{})
		if err != nil || !rep.OK() {
			b.Fatalf("check: %v %s", err, rep.Summary())
		}
		b.ReportMetric(time.Since(began).Seconds(), "check-s")

		into := node.Home{Dir: filepath.Join(b.TempDir(), "restored-"+strconv.Itoa(i))}
		began = time.Now()
		if _, err := restore(ctx, into, dir, false, io.Discard); err != nil {
			b.Fatal(err)
		}
		restored := time.Since(began)
		s := startServer(b, into.Dir, nil)
		ready := time.Since(began)
		b.ReportMetric(restored.Seconds(), "restore-s")
		b.ReportMetric(ready.Seconds(), "restore-to-ready-s")
		b.ReportMetric((ready - restored).Seconds(), "start-to-ready-s")
		b.Logf("backup %.1f MB in %s (%.1f MB/s, %.0f events/s); restore %s, ready %s after the restore began",
			float64(m.Bytes)/1e6, took.Round(time.Millisecond), float64(m.Bytes)/1e6/took.Seconds(), float64(m.Events)/took.Seconds(),
			restored.Round(time.Millisecond), ready.Round(time.Millisecond))
		// Only readiness is measured: the generated history leaves
		// thousands of turns open, which a graceful stop would drain.
		s.kill()
	}
}
