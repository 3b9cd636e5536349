package node

import (
	"context"
	"log/slog"
	"math"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"runtime/metrics"

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
// set. With a following limit, the limit moves after each collection
// until ctx ends (followLiveHeap).
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
	followLiveHeap(ctx, gcPercent, log, func(limit int64) { debug.SetMemoryLimit(limit) })
}

// followLiveHeap sets the soft memory limit through set from the live heap
// right after each collection, until ctx ends: a cleanup attached to an
// object that is unreachable at once runs after the next cycle and arms the
// next one. A limit polled on a timer lagged bursts: a restart sweep of
// 10,000 lanes grows the live heap from about 7 to 18 MB in 150 ms, and a
// limit still set for the heap before it made the collector run back to
// back, 12-19 cycles and 80-105 ms of CPU in one sweep against 3 cycles
// and 22-37 ms at gc_percent alone.
func followLiveHeap(ctx context.Context, gcPercent int, log *slog.Logger, set func(limit int64)) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var arm func()
	arm = func() {
		goruntime.AddCleanup(&gcCycle{}, func(struct{}) {
			if ctx.Err() != nil {
				return
			}
			metrics.Read(sample)
			if sample[0].Value.Kind() != metrics.KindUint64 {
				log.Warn("memory: the Go runtime does not report the live heap; soft memory limit left off")
				return
			}
			// Armed before the limit is set, so that the collection a
			// reader of the limit may start at once is seen too.
			arm()
			set(followingLimit(sample[0].Value.Uint64(), gcPercent))
		}, struct{}{})
	}
	arm()
}

// gcCycle is the object whose collection marks the end of a cycle. It holds
// a pointer so that the runtime never packs it with other small objects
// (whose cleanups may then wait for their neighbours).
type gcCycle struct{ _ *byte }
