package main

import (
	"context"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"hermes/adapters/config"
)

// Memory settings of hermes serve (memory.gc_percent, memory.soft_limit_mib).
//
// A server's live heap is small (the lane cache, ~10 MB at 10k lanes), but
// bursts of requests leave garbage: with Go's defaults the heap grows to
// twice the live data and the freed pages go back to the system over
// minutes. hermes collects at gc_percent (Go's 100 by default) and, unless a
// fixed limit is configured, keeps Go's soft memory limit just above the
// heap that gc_percent allows for the current live data, so the runtime
// returns what a burst freed at once. The limit follows the live heap, so
// it never makes the collector run more often than gc_percent does.

const (
	// limitMargin is added to the heap gc_percent allows: Go's own memory
	// besides the heap (stacks, GC metadata, free spans), a few MiB, and
	// one sixteenth of the live heap.
	limitMargin = 8 << 20
	// limitPoll is how often the live heap is looked at.
	limitPoll = 250 * time.Millisecond
)

// followingLimit is the soft memory limit for a live heap of live bytes at
// gcPercent.
func followingLimit(live uint64, gcPercent int) int64 {
	heap := float64(live) * (1 + float64(gcPercent)/100)
	limit := heap + float64(live)/16 + limitMargin
	if limit >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(limit)
}

// applyMemorySettings sets the collector's target and soft limit from cfg,
// leaving each alone when its environment variable (GOGC, GOMEMLIMIT) is
// set. With a following limit it starts a goroutine that moves the limit
// after each collection, until ctx ends.
func applyMemorySettings(ctx context.Context, cfg config.Memory, log *slog.Logger) {
	gcPercent := cfg.GCPercent
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	} else {
		gcPercent = debug.SetGCPercent(-1)
		debug.SetGCPercent(gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") != "" || gcPercent < 0 {
		return
	}
	if cfg.SoftLimitMiB > 0 {
		debug.SetMemoryLimit(int64(cfg.SoftLimitMiB) << 20)
		return
	}
	go followLiveHeap(ctx, gcPercent, log)
}

// followLiveHeap sets the soft memory limit from the live heap after each
// collection.
func followLiveHeap(ctx context.Context, gcPercent int, log *slog.Logger) {
	samples := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"}}
	tick := time.NewTicker(limitPoll)
	defer tick.Stop()
	var cycles uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		metrics.Read(samples)
		if samples[0].Value.Kind() != metrics.KindUint64 || samples[1].Value.Kind() != metrics.KindUint64 {
			log.Warn("memory: the Go runtime does not report the live heap; soft memory limit left off")
			return
		}
		if c := samples[0].Value.Uint64(); c != cycles {
			cycles = c
			debug.SetMemoryLimit(followingLimit(samples[1].Value.Uint64(), gcPercent))
		}
	}
}
