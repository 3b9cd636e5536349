package node

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

// roomToAck reports whether the file systems of dirs (the log's and the
// read models' directories) have earlyAckMinFree free each, from a statfs
// at most every interval (an append must not pay a system call each).
type roomToAck struct {
	dirs     []string
	interval time.Duration
	free     func(string) (uint64, error)
	now      func() time.Time

	mu      sync.Mutex
	checked time.Time
	room    bool
}

func newRoomToAck(dirs ...string) *roomToAck {
	return &roomToAck{dirs: dirs, interval: 250 * time.Millisecond, free: statfsFree, now: time.Now}
}

// Room is api.Deps.RoomToAck. A failed statfs says no room.
func (r *roomToAck) Room() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); r.checked.IsZero() || now.Sub(r.checked) >= r.interval {
		r.room, r.checked = true, now
		for _, dir := range r.dirs {
			if free, err := r.free(dir); err != nil || free < earlyAckMinFree {
				r.room = false
			}
		}
	}
	return r.room
}
