package commands

import (
	"fmt"
	"strings"
	"testing"

	"hermes/domain"
)

// laneAt is a lane state whose key is stream, at version, with a display
// name of size bytes (to make entries grow).
func laneAt(stream string, version uint64, size int) laneState {
	return laneState{lane: domain.Lane{SessionKey: stream, DisplayName: strings.Repeat("x", size)}, version: version}
}

// TestLaneCacheStaysWithinItsBound: given a cache bounded at max lanes,
// when more distinct lanes are put, then it never holds more than max, the
// lane put last is always there, and a lane already cached is updated in
// place without evicting anything.
func TestLaneCacheStaysWithinItsBound(t *testing.T) {
	for _, max := range []int{1, 2, 8, 100, 3000, 5000} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			c := laneCache{max: max}
			for i := range 3 * max {
				stream := fmt.Sprintf("lane-%d", i)
				c.put(stream, laneAt(stream, 1, 0))
				if n := c.len(); n > max {
					t.Fatalf("after %d puts the cache holds %d lanes, bound %d", i+1, n, max)
				}
				if got, ok := c.get(stream); !ok || got.lane.SessionKey != stream {
					t.Fatalf("lane %s put last is not cached (ok=%v)", stream, ok)
				}
			}
			before := c.len()
			last := fmt.Sprintf("lane-%d", 3*max-1)
			c.put(last, laneAt(last, 2, 0))
			if c.len() != before {
				t.Fatalf("updating a cached lane changed the size %d -> %d", before, c.len())
			}
			if got, _ := c.get(last); got.version != 2 {
				t.Fatalf("cached lane at version %d, want 2", got.version)
			}
		})
	}
}

// TestLaneCacheKeepsEveryLaneAsLastPut: given lanes put, then put again
// at later versions in place, grown past their entry, shrunk, dropped and
// put back (so that entries move and the slab is compacted), every lane
// reads back as it was last put, and the slab holds no more than the live
// entries and a bounded share of dead ones.
func TestLaneCacheKeepsEveryLaneAsLastPut(t *testing.T) {
	const lanes = 2000
	c := laneCache{max: 10 * lanes}
	want := map[string]laneState{}
	put := func(stream string, st laneState) {
		c.put(stream, st)
		want[stream] = st
	}
	for round := range 6 {
		for i := range lanes {
			stream := fmt.Sprintf("lane-%d", i)
			size := (i * (round + 1) * 37) % 300 // grows, shrinks, moves
			put(stream, laneAt(stream, uint64(round+1), size))
			if round == 3 && i%5 == 0 {
				c.drop(stream)
				delete(want, stream)
			}
		}
	}
	if c.len() != len(want) {
		t.Fatalf("cache holds %d lanes, want %d", c.len(), len(want))
	}
	for stream, st := range want {
		got, ok := c.get(stream)
		if !ok || got.version != st.version || got.lane.SessionKey != stream || got.lane.DisplayName != st.lane.DisplayName {
			t.Fatalf("get(%s) = v%d %q (ok=%v), want v%d %d bytes", stream, got.version, got.lane.DisplayName, ok, st.version, len(st.lane.DisplayName))
		}
	}
	for i := range c.shards {
		s := &c.shards[i]
		if live := len(s.slab) - s.dead; s.dead > live+4096 {
			t.Fatalf("shard %d: %d dead bytes beside %d live", i, s.dead, live)
		}
	}
}

// TestLaneCacheVersions: a put never replaces a later version; install
// replaces only the version the append moved from, keeps a later one,
// drops another earlier one, and adds no lane that was not cached.
func TestLaneCacheVersions(t *testing.T) {
	tests := []struct {
		name     string
		cached   uint64 // 0: not cached
		do       func(c *laneCache)
		want     uint64 // 0: not cached
		wantSize int
	}{
		{name: "put of an earlier version", cached: 5, do: func(c *laneCache) { c.put("s", laneAt("s", 4, 9)) }, want: 5},
		{name: "put of the same version", cached: 5, do: func(c *laneCache) { c.put("s", laneAt("s", 5, 9)) }, want: 5, wantSize: 9},
		{name: "install from the cached version", cached: 5, do: func(c *laneCache) { c.install("s", 5, packLane(laneAt("s", 7, 9))) }, want: 7, wantSize: 9},
		{name: "install when a later one is cached", cached: 8, do: func(c *laneCache) { c.install("s", 5, packLane(laneAt("s", 7, 9))) }, want: 8},
		{name: "install from another earlier version", cached: 4, do: func(c *laneCache) { c.install("s", 5, packLane(laneAt("s", 7, 9))) }},
		{name: "install of a lane not cached", do: func(c *laneCache) { c.install("s", 5, packLane(laneAt("s", 7, 9))) }},
		{name: "install of a truncated lane", cached: 5, do: func(c *laneCache) { c.install("s", 5, nil) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := laneCache{max: 10}
			if tc.cached > 0 {
				c.put("s", laneAt("s", tc.cached, 0))
			}
			tc.do(&c)
			got, ok := c.get("s")
			if ok != (tc.want > 0) || got.version != tc.want || len(got.lane.DisplayName) != tc.wantSize {
				t.Fatalf("cached = v%d with %d bytes (ok=%v), want v%d with %d", got.version, len(got.lane.DisplayName), ok, tc.want, tc.wantSize)
			}
		})
	}
}

// TestLaneCacheHashSharedByTwoStreams: when the entry a stream's hash
// leads to is another stream's, the stream is a miss, dropping it leaves
// the other lane, and putting it replaces the other lane.
func TestLaneCacheHashSharedByTwoStreams(t *testing.T) {
	c := laneCache{max: 10}
	c.put("lane-a", laneAt("lane-a", 3, 0))
	s, ha := c.shard("lane-a")
	// Make "lane-b" hash to lane-a's entry, as a collision would.
	hb := ha ^ 1
	s.index[hb] = s.index[ha]
	delete(s.index, ha)
	if _, ok := s.lookup(hb, "lane-b"); ok {
		t.Fatal("lookup of lane-b found lane-a's entry")
	}
	if _, ok := s.lookup(hb, "lane-a"); !ok {
		t.Fatal("lane-a's entry is gone")
	}
	s.mu.Lock()
	if _, ok := s.lookup(hb, "lane-b"); !ok {
		s.store(hb, "lane-b", packLane(laneAt("lane-b", 9, 0)))
	}
	s.mu.Unlock()
	p, ok := s.lookup(hb, "lane-b")
	if !ok {
		t.Fatal("lane-b not cached after its store")
	}
	if st, err := p.unpack(); err != nil || st.version != 9 || st.lane.SessionKey != "lane-b" {
		t.Fatalf("lane-b = %+v, %v", st, err)
	}
	if _, ok := s.lookup(hb, "lane-a"); ok {
		t.Fatal("lane-a still found under the shared hash")
	}
}

// TestLaneCacheDropsWhatItCannotUnpack: a cache entry that does not
// unpack is a miss, and is gone.
func TestLaneCacheDropsWhatItCannotUnpack(t *testing.T) {
	var c laneCache
	c.put("lane-a", laneState{lane: domain.Lane{SessionKey: "a"}, version: 2})
	if st, ok := c.get("lane-a"); !ok || st.lane.SessionKey != "a" || st.version != 2 {
		t.Fatalf("get = %+v, %v; want the lane at version 2", st, ok)
	}
	s, h := c.shard("lane-a")
	s.mu.Lock()
	s.store(h, "lane-a", packLane(laneState{lane: domain.Lane{SessionKey: "a"}, version: 2})[:3])
	s.mu.Unlock()
	if _, ok := c.get("lane-a"); ok {
		t.Fatal("get of a truncated entry = ok, want a miss")
	}
	if c.len() != 0 {
		t.Fatal("the truncated entry is still cached")
	}
}
