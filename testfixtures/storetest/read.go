package storetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"hermes/events"

	"github.com/google/go-cmp/cmp"
)

func versions(envs []events.Envelope) []uint64 {
	vs := make([]uint64, len(envs))
	for i, e := range envs {
		vs[i] = e.Version
	}
	return vs
}

func testReadStreamRanges(t *testing.T, s events.Store) {
	st := lane(1)
	mustAppend(t, s, st, events.NoStream(), numbered(st, "e", 10))
	other := lane(2)
	mustAppend(t, s, other, events.NoStream(), numbered(other, "e", 3))
	for _, tc := range []struct {
		from  uint64
		count int
		dir   events.Direction
		want  []uint64
	}{
		{1, 3, events.Forwards, []uint64{1, 2, 3}},
		{0, 2, events.Forwards, []uint64{1, 2}},
		{4, 100, events.Forwards, []uint64{4, 5, 6, 7, 8, 9, 10}},
		{10, 5, events.Forwards, []uint64{10}},
		{11, 5, events.Forwards, nil},
		{0, 3, events.Backwards, []uint64{10, 9, 8}},
		{5, 2, events.Backwards, []uint64{5, 4}},
		{2, 10, events.Backwards, []uint64{2, 1}},
		{100, 2, events.Backwards, []uint64{10, 9}},
	} {
		got := versions(readStream(t, s, st, tc.from, tc.count, tc.dir))
		if diff := cmp.Diff(tc.want, got, cmpEquateEmpty); diff != "" {
			t.Errorf("ReadStream(from %d, count %d, dir %d) versions mismatch (-want +got):\n%s", tc.from, tc.count, tc.dir, diff)
		}
	}
	for _, e := range readStream(t, s, st, 0, 100, events.Backwards) {
		if e.Stream != st {
			t.Fatalf("ReadStream(%s) returned an event of %s", st, e.Stream)
		}
	}
}

func testStreamNotFound(t *testing.T, s events.Store) {
	mustAppend(t, s, lane(1), events.NoStream(), touched(lane(1), "a"))
	for _, dir := range []events.Direction{events.Forwards, events.Backwards} {
		_, err := s.ReadStream(t.Context(), lane(2), 0, 10, dir)
		wantErrIs(t, fmt.Sprintf("ReadStream(missing, dir %d)", dir), err, events.ErrStreamNotFound)
	}
}

func testReadAllRanges(t *testing.T, s events.Store) {
	var want []uint64
	for i := range 4 {
		st := lane(i)
		res := mustAppend(t, s, st, events.NoStream(), numbered(st, "e", 3))
		want = append(want, res.Positions...)
	}
	all := positions(readAll(t, s, 0, 100))
	if diff := cmp.Diff(want, all); diff != "" {
		t.Fatalf("ReadAll(0) positions mismatch (-want +got):\n%s", diff)
	}
	if got := positions(readAll(t, s, 0, 3)); !cmp.Equal(got, want[:3]) {
		t.Errorf("ReadAll(0, 3) = %v, want %v", got, want[:3])
	}
	if got := positions(readAll(t, s, want[2], 4)); !cmp.Equal(got, want[3:7]) {
		t.Errorf("ReadAll(%d, 4) = %v, want %v", want[2], got, want[3:7])
	}
	between := want[2] + 1
	var after []uint64
	for _, p := range want {
		if p > between && len(after) < 2 {
			after = append(after, p)
		}
	}
	if got := positions(readAll(t, s, between, 2)); !cmp.Equal(got, after) {
		t.Errorf("ReadAll(%d, 2) = %v, want %v", between, got, after)
	}
	if got := readAll(t, s, want[len(want)-1], 10); len(got) != 0 {
		t.Errorf("ReadAll(head, 10) = %v, want nothing", positions(got))
	}
}

func testHead(t *testing.T, s events.Store) {
	if got := head(t, s); got != 0 {
		t.Errorf("Head() of an empty store = %d, want 0", got)
	}
	res := mustAppend(t, s, lane(1), events.NoStream(), touched(lane(1), "a", "b"))
	if got := head(t, s); got != res.LastPosition() {
		t.Errorf("Head() = %d, want %d", got, res.LastPosition())
	}
	res = mustAppend(t, s, lane(2), events.NoStream(), touched(lane(2), "c"))
	if got := head(t, s); got != res.LastPosition() {
		t.Errorf("Head() = %d, want %d", got, res.LastPosition())
	}
}

func testReadAfterAppend(t *testing.T, s events.Store) {
	st := lane(1)
	for i := range 30 {
		ps := touched(st, fmt.Sprint(i))
		res := mustAppend(t, s, st, events.ExactVersion(uint64(i)), ps)
		last := readStream(t, s, st, 0, 1, events.Backwards)
		if len(last) != 1 || last[0].ID != ps[0].ID || last[0].Version != res.Versions[0] {
			t.Fatalf("append %d: ReadStream(backwards, 1) = %+v, want the event just appended", i, last)
		}
		all := readAll(t, s, res.Positions[0]-1, 1)
		if len(all) != 1 || all[0].ID != ps[0].ID {
			t.Fatalf("append %d: ReadAll just before it = %+v, want the event just appended", i, all)
		}
		if h := head(t, s); h != res.Positions[0] {
			t.Fatalf("append %d: Head() = %d, want %d", i, h, res.Positions[0])
		}
	}
}

func testLargeEvents(t *testing.T, s events.Store) {
	st := lane(1)
	big := strings.Repeat("x", 1<<20)
	ps := []events.Proposed{created(st, "big-1", big), created(st, "big-2", "y"+big)}
	ps[1].ID = id(st + "/big-2")
	res := mustAppend(t, s, st, events.NoStream(), ps)
	diffEnvelopes(t, "ReadStream(large events)", readStream(t, s, st, 1, 10, events.Forwards), wantEnvelopes(st, ps, res))
}

func testManyStreams(t *testing.T, s events.Store) {
	const streams, workers = 1000, 16
	next := make(chan int)
	go func() {
		defer close(next)
		for i := range streams {
			next <- i
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for i := range next {
				st := lane(i)
				if _, err := s.Append(t.Context(), st, events.NoStream(), numbered(st, "e", 2)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append error = %v", err)
	}
	for i := range streams {
		got := versions(readStream(t, s, lane(i), 1, 10, events.Forwards))
		if !cmp.Equal(got, []uint64{1, 2}) {
			t.Fatalf("ReadStream(%s) versions = %v, want [1 2]", lane(i), got)
		}
	}
	all := everything(t, s)
	if len(all) != 2*streams {
		t.Errorf("ReadAll: %d events, want %d", len(all), 2*streams)
	}
	checkStrictlyIncreasing(t, "ReadAll", positions(all))
}
