package main

import (
	"sync"
	"time"
)

// earlyAckMinFree is the free space under which an append waits for the
// read models to commit it before it is answered, as every command did
// before answers stopped waiting (api.Deps.RoomToAck): with less, a batch
// acknowledged from the log could fail to reach the read models, which
// would then not show a message that was acknowledged.
const earlyAckMinFree = 64 << 20

// roomToAck reports whether the file system of dir has earlyAckMinFree
// free, from a statfs at most every interval (an append must not pay a
// system call each).
type roomToAck struct {
	dir      string
	interval time.Duration
	free     func(string) (uint64, error)
	now      func() time.Time

	mu      sync.Mutex
	checked time.Time
	room    bool
}

func newRoomToAck(dir string) *roomToAck {
	return &roomToAck{dir: dir, interval: 250 * time.Millisecond, free: statfsFree, now: time.Now}
}

// Room is api.Deps.RoomToAck. A failed statfs says no room.
func (r *roomToAck) Room() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); r.checked.IsZero() || now.Sub(r.checked) >= r.interval {
		free, err := r.free(r.dir)
		r.room, r.checked = err == nil && free >= earlyAckMinFree, now
	}
	return r.room
}
