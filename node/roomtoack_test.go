package node

import (
	"errors"
	"testing"
	"time"
)

// TestRoomToAck: an append is answered early only with earlyAckMinFree
// free, from a statfs made at most once per interval.
func TestRoomToAck(t *testing.T) {
	for _, tc := range []struct {
		name string
		free uint64
		err  error
		want bool
	}{
		{"plenty", 1 << 30, nil, true},
		{"exactly the minimum", earlyAckMinFree, nil, true},
		{"below the minimum", earlyAckMinFree - 1, nil, false},
		{"statfs fails", 1 << 30, errors.New("no such file system"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given a file system with tc.free bytes free
			clock := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
			calls := 0
			free := tc.free
			r := &roomToAck{dirs: []string{"/x"}, interval: time.Second, now: func() time.Time { return clock },
				free: func(string) (uint64, error) { calls++; return free, tc.err }}
			// When asked twice within the interval
			first, second := r.Room(), r.Room()
			// Then one statfs answered both
			if first != tc.want || second != tc.want || calls != 1 {
				t.Fatalf("Room() = %v, %v with %d statfs calls; want %v, %v with 1", first, second, calls, tc.want, tc.want)
			}
			// When the space changes and the interval passes
			tc.err = nil
			if tc.want {
				free = earlyAckMinFree - 1
			} else {
				free = 1 << 30
			}
			clock = clock.Add(time.Second)
			// Then the answer follows it
			if got := r.Room(); got == tc.want || calls != 2 {
				t.Fatalf("Room() after the interval = %v with %d calls, want %v with 2", got, calls, !tc.want)
			}
		})
	}
}
