package commands

import (
	"fmt"
	"testing"

	"hermes/domain"
)

// TestLaneCacheStaysWithinItsBound: given a cache bounded at max lanes,
// when more distinct lanes are put, then it never holds more than max, the
// lane put last is always there, and a lane already cached is updated in
// place without evicting anything.
func TestLaneCacheStaysWithinItsBound(t *testing.T) {
	for _, max := range []int{1, 2, 8, 100} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			c := laneCache{max: max}
			for i := range 3 * max {
				stream := fmt.Sprintf("lane-%d", i)
				c.put(stream, laneState{lane: domain.Lane{SessionKey: stream}, version: 1})
				if n := len(c.lanes); n > max {
					t.Fatalf("after %d puts the cache holds %d lanes, bound %d", i+1, n, max)
				}
				if got, ok := c.get(stream); !ok || got.lane.SessionKey != stream {
					t.Fatalf("lane %s put last is not cached (ok=%v)", stream, ok)
				}
			}
			before := len(c.lanes)
			last := fmt.Sprintf("lane-%d", 3*max-1)
			c.put(last, laneState{lane: domain.Lane{SessionKey: last}, version: 2})
			if len(c.lanes) != before {
				t.Fatalf("updating a cached lane changed the size %d -> %d", before, len(c.lanes))
			}
			if got, _ := c.get(last); got.version != 2 {
				t.Fatalf("cached lane at version %d, want 2", got.version)
			}
		})
	}
}
