package commands

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"sync"
)

// DefaultCachedLanes bounds the lane cache unless [WithCachedLanes] says
// otherwise: about 300 bytes a lane resident (packed state, key and index
// entry), so 60 MB when full. Past the bound an arbitrary 1/64 of a
// shard's entries is dropped and reloaded on demand (a snapshot and a
// stream read).
const DefaultCachedLanes = 200_000

// laneCache holds lane states this process has loaded or written, packed
// (packedlane.go). An append never trusts it over the store: it carries
// the cached version as its expectation, and a conflict drops the entry. A
// command that appends nothing trusts it only when the handler is the
// store's only writer (WithSoleWriter).
//
// The cache holds no pointers the garbage collector has to follow: each
// shard keeps its lanes in one byte slab, found through a map from a hash
// of the stream name to an offset. With a map of strings to slices, each
// of the 100,000 lanes of make bench's resolve load was two objects that
// every collection marked again: a collection cost 36 ms of CPU instead of
// 11, several times a second under that load. A hash shared by two streams
// makes one of them a miss, never a wrong lane: an entry keeps its stream's
// name and a lookup compares it.
type laneCache struct {
	// max bounds how many lanes the cache holds; set before first use.
	max int

	once     sync.Once
	seed     maphash.Seed
	shards   []laneShard
	perShard int
}

const (
	// maxLaneShards bounds the shards of a cache; fewer are used when
	// each would hold fewer than minLanesPerShard lanes, so that the
	// bound of each (max divided among them) adds up to at most max.
	maxLaneShards    = 64
	minLanesPerShard = 1024
)

// shard returns the shard of stream and the hash that keys it there.
func (c *laneCache) shard(stream string) (*laneShard, uint64) {
	c.once.Do(func() {
		n := 1
		for n < maxLaneShards && 2*n*minLanesPerShard <= c.max {
			n *= 2
		}
		c.seed = maphash.MakeSeed()
		c.shards = make([]laneShard, n)
		c.perShard = max(c.max/n, 1)
	})
	h := maphash.String(c.seed, stream)
	return &c.shards[h&uint64(len(c.shards)-1)], h
}

func (c *laneCache) get(stream string) (laneState, bool) {
	s, h := c.shard(stream)
	s.mu.RLock()
	packed, ok := s.lookup(h, stream)
	var st laneState
	var err error
	if ok {
		st, err = packed.unpack() // copies what it keeps: the slab changes
	}
	s.mu.RUnlock()
	if !ok {
		return laneState{}, false
	}
	if err != nil {
		c.drop(stream) // read from the store instead
		return laneState{}, false
	}
	return st, true
}

// put caches st unless the cache holds the lane at a later version.
func (c *laneCache) put(stream string, st laneState) {
	s, h := c.shard(stream)
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, cached := s.lookup(h, stream); cached {
		if v, n := binary.Uvarint(cur); n > 0 && v > st.version {
			return
		}
	} else if _, taken := s.index[h]; !taken && len(s.index) >= c.perShard {
		s.evict(max(c.perShard/64, 1))
	}
	s.scratch = appendPackedLane(s.scratch[:0], st)
	s.store(h, stream, s.scratch)
}

// install puts next, the lane an append moved from version from (its
// version is next's), in place of the cached lane at from. A lane cached
// at a later version stays; one at another earlier version is dropped;
// one not cached is not added.
func (c *laneCache) install(stream string, from uint64, next packedLane) {
	to, n := binary.Uvarint(next)
	s, h := c.shard(stream)
	s.mu.Lock()
	defer s.mu.Unlock()
	packed, ok := s.lookup(h, stream)
	if !ok {
		return
	}
	cur, m := binary.Uvarint(packed)
	switch {
	case n <= 0 || m <= 0 || (cur != from && cur < to):
		s.remove(h)
	case cur >= to:
	default:
		s.store(h, stream, next)
	}
}

func (c *laneCache) drop(stream string) {
	s, h := c.shard(stream)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.lookup(h, stream); ok {
		s.remove(h)
	}
}

// len is how many lanes the cache holds.
func (c *laneCache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.index)
		s.mu.RUnlock()
	}
	return n
}

// laneShard is one part of the cache. Its slab holds one entry per lane:
//
//	uvarint slot | uvarint len(stream) | stream | uvarint len(packed) | packed | unused
//
// where slot is the size of what follows it. A lane put again is written
// over its entry when it fits there (a touch changes a few bytes), else
// appended; the bytes of entries left behind (dead) are reclaimed by
// copying the live entries to a new slab once they are a third of it (so
// each byte that dies costs at most two bytes copied: a sweep moves the
// entry of every lane it changes).
type laneShard struct {
	mu      sync.RWMutex
	index   map[uint64]uint32 // stream hash -> offset of its entry in slab
	slab    []byte
	dead    int
	scratch []byte // put packs here
}

// lookup returns the packed lane of stream (valid until the slab changes),
// or false.
func (s *laneShard) lookup(h uint64, stream string) (packedLane, bool) {
	off, ok := s.index[h]
	if !ok {
		return nil, false
	}
	key, packed, ok := s.entry(off)
	if !ok || string(key) != stream {
		return nil, false
	}
	return packed, true
}

// entry parses the entry at off; false if it does not hold together.
func (s *laneShard) entry(off uint32) (key []byte, packed packedLane, ok bool) {
	slot, b, ok := cutUvarint(s.slab[off:])
	if !ok || slot > uint64(len(b)) {
		return nil, nil, false
	}
	key, b, ok = cutBytes(b[:slot])
	if !ok {
		return nil, nil, false
	}
	packed, _, ok = cutBytes(b)
	return key, packed, ok
}

// slotAt returns the size of the entry at off, header included, and the
// size of its header.
func (s *laneShard) slotAt(off uint32) (size, header int) {
	slot, n := binary.Uvarint(s.slab[off:])
	return n + int(slot), n
}

// touchRoom is what an entry may grow in place. A touch moves the lane's
// version and time, whose varints may take a byte or two more; a restart
// sweep's resume mark adds a reason and a time (about 25 bytes) to every
// lane it changes, and entries that moved cost the sweep a compaction of
// every shard (SUSPEND=1 p7-rss-mem.sh: 10-30% more server CPU per sweep
// with 4 bytes of room, none with 32).
const touchRoom = 32

// store writes the entry of stream, over its old one when it fits.
func (s *laneShard) store(h uint64, stream string, packed []byte) {
	need := uvarintLen(len(stream)) + len(stream) + uvarintLen(len(packed)) + len(packed)
	if off, ok := s.index[h]; ok {
		size, header := s.slotAt(off)
		if need <= size-header {
			body := s.slab[int(off)+header : int(off)+header : int(off)+size]
			appendEntryBody(body, stream, packed)
			return
		}
		s.remove(h)
	}
	slot := need + touchRoom
	size := uvarintLen(slot) + slot
	if len(s.slab)+size > math.MaxUint32 {
		return // not cached: read from the store when next used
	}
	if s.dead > len(s.slab)/3 && cap(s.slab)-len(s.slab) < size {
		s.compact(size)
	}
	if s.index == nil {
		s.index = make(map[uint64]uint32)
	}
	off := len(s.slab)
	s.slab = binary.AppendUvarint(s.slab, uint64(slot))
	s.slab = appendEntryBody(s.slab, stream, packed)
	s.slab = append(s.slab, make([]byte, off+size-len(s.slab))...)
	s.index[h] = uint32(off)
}

func appendEntryBody(b []byte, stream string, packed []byte) []byte {
	b = append(binary.AppendUvarint(b, uint64(len(stream))), stream...)
	return append(binary.AppendUvarint(b, uint64(len(packed))), packed...)
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return len(binary.AppendUvarint(b[:0], uint64(n)))
}

// remove drops the entry of hash h.
func (s *laneShard) remove(h uint64) {
	if off, ok := s.index[h]; ok {
		size, _ := s.slotAt(off)
		s.dead += size
		delete(s.index, h)
	}
}

// evict drops n arbitrary entries.
func (s *laneShard) evict(n int) {
	for h := range s.index {
		if n == 0 {
			return
		}
		s.remove(h)
		n--
	}
}

// compact copies the live entries to a new slab with room for extra more
// bytes.
func (s *laneShard) compact(extra int) {
	live := len(s.slab) - s.dead
	slab := make([]byte, 0, live+live/8+extra)
	for h, off := range s.index {
		size, _ := s.slotAt(off)
		s.index[h] = uint32(len(slab))
		slab = append(slab, s.slab[off:int(off)+size]...)
	}
	s.slab, s.dead = slab, 0
}
