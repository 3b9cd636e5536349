package node

import (
	"context"
	"log/slog"
	goruntime "runtime"
	"testing"
	"time"
)

// TestFollowingLimit: the soft limit sits above the heap gc_percent allows
// for the live data (so it never makes the collector run more often than
// gc_percent does) by the runtime's own memory and a sixteenth of the
// live heap, and grows with the live heap.
func TestFollowingLimit(t *testing.T) {
	for _, c := range []struct {
		live      uint64
		gcPercent int
		want      int64
	}{
		{0, 50, limitMargin},
		{16 << 20, 50, 24<<20 + 1<<20 + limitMargin},
		{160 << 20, 100, 320<<20 + 10<<20 + limitMargin},
		{1 << 62, 1000, 1<<63 - 1},
	} {
		if got := followingLimit(c.live, c.gcPercent); got != c.want {
			t.Errorf("followingLimit(%d, %d) = %d, want %d", c.live, c.gcPercent, got, c.want)
		}
	}
}

// TestFollowLiveHeapAfterEachCollection: the following limit moves with
// the collections: given a live heap that grows between them, after each
// collection a limit comes that is above the heap gc_percent allows for
// the data then live.
func TestFollowLiveHeapAfterEachCollection(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	limits := make(chan int64, 64)
	followLiveHeap(ctx, 100, slog.New(slog.DiscardHandler), func(limit int64) {
		select {
		case limits <- limit:
		default: // the test stopped reading
		}
	})
	var kept [][]byte
	for i := range 3 {
		// Given 8 MiB more live data,
		kept = append(kept, make([]byte, 8<<20))
		want := followingLimit(uint64(len(kept))*8<<20, 100)
		// when a collection runs,
		goruntime.GC()
		// then a limit follows it (the runtime's own collections may
		// come first, with the data live before).
		// A collection that found the next cleanup not armed yet is
		// followed by another one, so the test does not hang on it.
		timeout := time.After(30 * time.Second)
		retry := time.NewTicker(time.Second)
		for got := int64(0); got < want; {
			select {
			case got = <-limits:
			case <-retry.C:
				goruntime.GC()
			case <-timeout:
				t.Fatalf("collection %d: no limit of at least %d MiB", i, want>>20)
			}
		}
		retry.Stop()
	}
	goruntime.KeepAlive(kept)
}
