package api

import (
	"strings"
	"testing"
)

// TestFollowerQueueBound: what an event stream holds for its client,
// queued or being written, never passes the bound (one frame larger than
// the bound passes alone); the first frame that does not fit drops the
// stream, remembering its position as the one to resume from.
func TestFollowerQueueBound(t *testing.T) {
	frame := func(n int) []byte { return []byte(strings.Repeat("x", n)) }
	tests := []struct {
		name string
		// pushes are frame sizes; takeAfter, when > 0, takes (and does not
		// release) everything after that many pushes: frames being written
		// still count.
		pushes     []int
		takeAfter  int
		wantQueued int    // frames pushed before the drop
		wantResume uint64 // 0: not dropped
	}{
		{name: "within the bound", pushes: []int{40, 40, 20}, wantQueued: 3},
		{name: "one byte over", pushes: []int{40, 40, 21}, wantQueued: 2, wantResume: 13},
		{name: "a frame larger than the bound alone", pushes: []int{250}, wantQueued: 1},
		{name: "a large frame after another", pushes: []int{1, 250}, wantQueued: 1, wantResume: 12},
		{name: "frames being written count", pushes: []int{60, 60}, takeAfter: 1, wantQueued: 1, wantResume: 12},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := newFollowerQueue(100, 10)
			queued := 0
			for i, n := range tc.pushes {
				if tc.takeAfter > 0 && i == tc.takeAfter {
					q.take()
				}
				if !q.push(frame(n), uint64(11+i)) {
					break
				}
				queued++
				if q.size > q.limit && queued > 1 {
					t.Fatalf("after push %d: %d bytes held, bound %d", i+1, q.size, q.limit)
				}
			}
			b := q.take()
			if queued != tc.wantQueued || b.dropped != (tc.wantResume != 0) || b.resumeFrom != tc.wantResume {
				t.Fatalf("pushes %v = %d queued, dropped %v at %d, want %d queued, resume from %d",
					tc.pushes, queued, b.dropped, b.resumeFrom, tc.wantQueued, tc.wantResume)
			}
			if b.dropped && b.lastQueued != b.resumeFrom-1 {
				t.Fatalf("dropped batch last queued %d, want %d (the dropped event's id)", b.lastQueued, b.resumeFrom-1)
			}
			if b.dropped && q.push(frame(1), 99) {
				t.Fatal("push after the drop = true, want false")
			}
		})
	}
}
