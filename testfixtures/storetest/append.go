package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"hermes/events"

	"github.com/google/go-cmp/cmp"
)

func testAppendAndRead(t *testing.T, s events.Store) {
	a, b := lane(1), lane(2)
	pa := touched(a, "one", "two", "three")
	ra := mustAppend(t, s, a, events.NoStream(), pa)
	if diff := cmp.Diff([]uint64{1, 2, 3}, ra.Versions); diff != "" {
		t.Errorf("Append(%s) versions mismatch (-want +got):\n%s", a, diff)
	}
	if ra.Duplicate {
		t.Errorf("Append(%s).Duplicate = true, want false", a)
	}
	checkStrictlyIncreasing(t, "first append", ra.Positions)

	pb := []events.Proposed{created(b, "created", "Alice")}
	pb = append(pb, touched(b, "t1")...)
	rb := mustAppend(t, s, b, events.NoStream(), pb)
	if diff := cmp.Diff([]uint64{1, 2}, rb.Versions); diff != "" {
		t.Errorf("Append(%s) versions mismatch (-want +got):\n%s", b, diff)
	}
	if rb.Positions[0] <= ra.LastPosition() {
		t.Errorf("Append(%s) first position = %d, want after %d", b, rb.Positions[0], ra.LastPosition())
	}

	pa2 := touched(a, "four")
	ra2 := mustAppend(t, s, a, events.ExactVersion(3), pa2)
	if got, want := ra2.LastVersion(), uint64(4); got != want {
		t.Errorf("Append(%s, version 3).LastVersion() = %d, want %d", a, got, want)
	}

	wantA := append(wantEnvelopes(a, pa, ra), wantEnvelopes(a, pa2, ra2)...)
	diffEnvelopes(t, "ReadStream(a)", readStream(t, s, a, 1, 100, events.Forwards), wantA)
	wantB := wantEnvelopes(b, pb, rb)
	diffEnvelopes(t, "ReadStream(b)", readStream(t, s, b, 1, 100, events.Forwards), wantB)

	all := readAll(t, s, 0, 100)
	want := append(append(wantEnvelopes(a, pa, ra), wantB...), wantEnvelopes(a, pa2, ra2)...)
	diffEnvelopes(t, "ReadAll(0)", all, want)
	for _, e := range all {
		if e.RecordedAt.IsZero() {
			t.Errorf("ReadAll: event %d RecordedAt is zero", e.Position)
		}
	}
}

func testVersionsContiguous(t *testing.T, s events.Store) {
	st := lane(1)
	var version uint64
	var last uint64
	for i, n := range []int{1, 2, 5, 1, 10, 3} {
		res := mustAppend(t, s, st, events.ExactVersion(version), numbered(st, fmt.Sprint(i), n))
		for k, v := range res.Versions {
			if want := version + uint64(k) + 1; v != want {
				t.Fatalf("append %d: version[%d] = %d, want %d", i, k, v, want)
			}
			if res.Positions[k] <= last {
				t.Fatalf("append %d: position[%d] = %d, want after %d", i, k, res.Positions[k], last)
			}
			last = res.Positions[k]
		}
		version = res.LastVersion()
	}
	envs := readStream(t, s, st, 1, 1000, events.Forwards)
	for i, e := range envs {
		if e.Version != uint64(i)+1 {
			t.Fatalf("ReadStream: event %d has version %d, want %d", i, e.Version, i+1)
		}
	}
	if uint64(len(envs)) != version {
		t.Errorf("ReadStream: %d events, want %d", len(envs), version)
	}
}

func testExpectedVersion(t *testing.T, s events.Store) {
	st := lane(1)
	wrong := func(x events.ExpectedVersion, ps []events.Proposed, actual uint64) {
		t.Helper()
		before := head(t, s)
		_, err := s.Append(t.Context(), st, x, ps)
		call := fmt.Sprintf("Append(%s, %s)", st, x)
		wantErrIs(t, call, err, events.ErrWrongExpectedVersion)
		var wv *events.WrongVersionError
		if !errors.As(err, &wv) {
			t.Fatalf("%s error = %v, want a *events.WrongVersionError", call, err)
		}
		if wv.Stream != st || wv.Expected != x || wv.Actual != actual {
			t.Errorf("%s error = {%s, %s, %d}, want {%s, %s, %d}", call, wv.Stream, wv.Expected, wv.Actual, st, x, actual)
		}
		if got := head(t, s); got != before {
			t.Errorf("%s moved Head from %d to %d, want nothing appended", call, before, got)
		}
	}

	wrong(events.ExactVersion(1), touched(st, "a"), 0)
	mustAppend(t, s, st, events.NoStream(), touched(st, "b"))
	wrong(events.NoStream(), touched(st, "c"), 1)
	wrong(events.ExactVersion(0), touched(st, "c"), 1)
	wrong(events.ExactVersion(2), touched(st, "c"), 1)
	if got := mustAppend(t, s, st, events.ExactVersion(1), touched(st, "d", "e")).LastVersion(); got != 3 {
		t.Errorf("Append(version 1).LastVersion() = %d, want 3", got)
	}
	if got := mustAppend(t, s, st, events.AnyVersion(), touched(st, "f")).LastVersion(); got != 4 {
		t.Errorf("Append(any version).LastVersion() = %d, want 4", got)
	}
	other := lane(2)
	if got := mustAppend(t, s, other, events.AnyVersion(), touched(other, "g")).LastVersion(); got != 1 {
		t.Errorf("Append(new stream, any version).LastVersion() = %d, want 1", got)
	}
	wrong(events.ExactVersion(3), touched(st, "h"), 4)
	if n := len(readStream(t, s, st, 1, 100, events.Forwards)); n != 4 {
		t.Errorf("ReadStream(%s) = %d events, want 4", st, n)
	}
}

func testIdempotentAppend(t *testing.T, s events.Store) {
	st := lane(1)
	ps := touched(st, "a", "b")
	first := mustAppend(t, s, st, events.NoStream(), ps)
	h := head(t, s)

	for _, x := range []events.ExpectedVersion{events.NoStream(), events.AnyVersion()} {
		again := mustAppend(t, s, st, x, ps)
		if !again.Duplicate {
			t.Errorf("re-Append(%s) Duplicate = false, want true", x)
		}
		if diff := cmp.Diff(first.Versions, again.Versions); diff != "" {
			t.Errorf("re-Append(%s) versions mismatch (-want +got):\n%s", x, diff)
		}
		if diff := cmp.Diff(first.Positions, again.Positions); diff != "" {
			t.Errorf("re-Append(%s) positions mismatch (-want +got):\n%s", x, diff)
		}
	}
	if got := head(t, s); got != h {
		t.Errorf("Head() after re-appends = %d, want %d", got, h)
	}

	mustAppend(t, s, st, events.ExactVersion(2), touched(st, "c"))
	late := mustAppend(t, s, st, events.NoStream(), ps)
	if !late.Duplicate || !cmp.Equal(late.Positions, first.Positions) {
		t.Errorf("re-Append after the stream moved on = %+v, want Duplicate at %v", late, first.Positions)
	}
	one := mustAppend(t, s, st, events.ExactVersion(7), ps[1:])
	if !one.Duplicate || !cmp.Equal(one.Versions, []uint64{2}) || one.Positions[0] != first.Positions[1] {
		t.Errorf("re-Append of the second event alone = %+v, want Duplicate at version 2, position %d", one, first.Positions[1])
	}
	if n := len(everything(t, s)); n != 3 {
		t.Errorf("ReadAll: %d events, want 3", n)
	}
}

func testPartialDuplicate(t *testing.T, s events.Store) {
	st := lane(1)
	mustAppend(t, s, st, events.NoStream(), touched(st, "a", "b"))
	h := head(t, s)
	for _, x := range []events.ExpectedVersion{events.ExactVersion(2), events.AnyVersion()} {
		_, err := s.Append(t.Context(), st, x, touched(st, "b", "c"))
		wantErrIs(t, fmt.Sprintf("Append(b, c; %s) after (a, b)", x), err, events.ErrInvalidAppend)
	}
	if got := head(t, s); got != h {
		t.Errorf("Head() = %d after a rejected append, want %d", got, h)
	}
	if n := len(readStream(t, s, st, 1, 100, events.Forwards)); n != 2 {
		t.Errorf("ReadStream = %d events, want 2", n)
	}
}

func testInvalidAppend(t *testing.T, s events.Store) {
	st := lane(1)
	noID := touched(st, "a")
	noID[0].ID = ""
	repeated := touched(st, "a", "b")
	repeated[1].ID = repeated[0].ID
	for _, tc := range []struct {
		name   string
		stream string
		ps     []events.Proposed
	}{
		{"empty stream name", "", touched(st, "a")},
		{"nil events", st, nil},
		{"no events", st, []events.Proposed{}},
		{"empty id", st, noID},
		{"id repeated in the append", st, repeated},
	} {
		_, err := s.Append(t.Context(), tc.stream, events.AnyVersion(), tc.ps)
		wantErrIs(t, "Append with "+tc.name, err, events.ErrInvalidAppend)
	}
	if got := head(t, s); got != 0 {
		t.Errorf("Head() = %d after invalid appends, want 0", got)
	}
}

func testConcurrentSameStream(t *testing.T, s events.Store) {
	const writers, appendsEach = 8, 10
	st := lane(1)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := 0; i < appendsEach; {
				last, err := s.ReadStream(t.Context(), st, 0, 1, events.Backwards)
				var version uint64
				switch {
				case errors.Is(err, events.ErrStreamNotFound):
				case err != nil:
					errs <- err
					return
				default:
					version = last[0].Version
				}
				_, err = s.Append(t.Context(), st, events.ExactVersion(version), touched(st, fmt.Sprintf("w%d-%d", w, i)))
				switch {
				case errors.Is(err, events.ErrWrongExpectedVersion):
				case err != nil:
					errs <- err
					return
				default:
					i++
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("writer error = %v", err)
	}
	envs := readStream(t, s, st, 1, 1000, events.Forwards)
	if len(envs) != writers*appendsEach {
		t.Fatalf("ReadStream = %d events, want %d", len(envs), writers*appendsEach)
	}
	seen := make(map[string]bool)
	for i, e := range envs {
		if e.Version != uint64(i)+1 {
			t.Fatalf("event %d has version %d: the stream forked or skipped", i, e.Version)
		}
		if seen[e.ID] {
			t.Fatalf("event id %s stored twice", e.ID)
		}
		seen[e.ID] = true
	}
}
