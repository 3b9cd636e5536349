package main

import (
	"testing"
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
