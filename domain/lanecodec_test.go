package domain_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"hermes/domain"
)

// fillEvery sets every field reachable from v (a pointer) to a value of
// its own, different from the zero value: strings, numbers, flags, times
// in the three kinds of location, queue items with a message and merged
// ids. A field of a kind it does not know fails the test: give it one.
func fillEvery(t testing.TB, v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillEvery(t, v.Elem(), n)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			locs := []*time.Location{time.UTC, time.Local, time.FixedZone("CEST", 2*3600)}
			v.Set(reflect.ValueOf(time.Unix(1_770_000_000+int64(*n)*3671, int64(*n)*1_000_003).In(locs[*n%3])))
			return
		}
		for i := range v.NumField() {
			fillEvery(t, v.Field(i), n)
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes(fmt.Appendf(nil, `{"n":%d}`, *n))
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fillEvery(t, s.Index(i), n)
		}
		v.Set(s)
	case reflect.String:
		v.SetString(fmt.Sprintf("value %d", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n) * 1_000_000_007)
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.25)
	default:
		t.Fatalf("fillEvery: a field of type %s: give it a value here, and the lane codec a way to keep it", v.Type())
	}
}

// everyFieldLane is a lane with every field set.
func everyFieldLane(t testing.TB) domain.Lane {
	var l domain.Lane
	n := 0
	fillEvery(t, reflect.ValueOf(&l).Elem(), &n)
	return l
}

// TestLaneCodecKeepsEveryField: the lane codec gives back exactly the lane
// it was given, alone and in a snapshot, for a lane with every field set (a
// field added to Lane is set too, and fails here until AppendLane and
// DecodeLane keep it), an empty lane, and a lane whose queue holds items
// without a message or merged ids.
func TestLaneCodecKeepsEveryField(t *testing.T) {
	full := everyFieldLane(t)
	sparse := full
	sparse.Queue = domain.Queue{Overflow: []domain.QueueItem{{ID: "q1", QueuedAt: time.Unix(5, 0).UTC()}}}
	sparse.Origin = domain.SessionSource{Platform: "telegram", ChatID: "1", ChatType: "dm"}
	empties := domain.Lane{Queue: domain.Queue{Slot: &domain.QueueItem{Message: json.RawMessage{}, MergedIDs: []string{}}, Overflow: []domain.QueueItem{}}}
	for _, tc := range []struct {
		name string
		lane domain.Lane
	}{
		{"every field set", full},
		{"empty", domain.Lane{}},
		{"sparse queue", sparse},
		{"empty but not nil", empties},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := domain.DecodeLane(domain.AppendLane(nil, tc.lane))
			if err != nil {
				t.Fatalf("DecodeLane(AppendLane(l)) = %v", err)
			}
			if !reflect.DeepEqual(got, tc.lane) {
				t.Fatalf("DecodeLane(AppendLane(l)) differs:\n got %+v\nwant %+v", got, tc.lane)
			}
			snap, err := domain.DecodeLaneSnapshot(domain.LaneSchemaVersion, domain.EncodeLaneSnapshot(tc.lane))
			if err != nil || !reflect.DeepEqual(snap, tc.lane) {
				t.Fatalf("DecodeLaneSnapshot(EncodeLaneSnapshot(l)) = %+v, %v; want %+v", snap, err, tc.lane)
			}
		})
	}
}

// TestLaneCodecRoundTrip: any lane (every field drawn by reflection, so a
// field added to Lane is drawn too) comes back from the codec as it was,
// after whatever bytes were before it.
func TestLaneCodecRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var l domain.Lane
		drawEvery(t, reflect.ValueOf(&l).Elem(), "Lane")
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "prefix")
		b := domain.AppendLane(bytes.Clone(prefix), l)
		if !bytes.HasPrefix(b, prefix) {
			t.Fatalf("AppendLane changed the bytes before it")
		}
		got, err := domain.DecodeLane(b[len(prefix):])
		if err != nil {
			t.Fatalf("DecodeLane(AppendLane(l)) = %v", err)
		}
		if !reflect.DeepEqual(got, l) {
			t.Fatalf("DecodeLane(AppendLane(l)) differs:\n got %#v\nwant %#v", got, l)
		}
	})
}

// drawEvery sets v (and every field reachable from it) to a drawn value:
// zero or not, nil or empty or full, times in the three kinds of location
// the codec keeps.
func drawEvery(t *rapid.T, v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Pointer:
		if rapid.Bool().Draw(t, path+" set") {
			v.Set(reflect.New(v.Type().Elem()))
			drawEvery(t, v.Elem(), path)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(drawTime(t, path)))
			return
		}
		for i := range v.NumField() {
			drawEvery(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	case reflect.Slice:
		n := rapid.IntRange(-1, 3).Draw(t, path+" len")
		if n < 0 {
			return // nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes(append([]byte{}, rapid.SliceOfN(rapid.Byte(), n, n).Draw(t, path)...))
			return
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			drawEvery(t, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.String:
		v.SetString(string(rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, path)))
	case reflect.Bool:
		v.SetBool(rapid.Bool().Draw(t, path))
	case reflect.Int, reflect.Int64:
		v.SetInt(rapid.Int64().Draw(t, path))
	case reflect.Float64:
		v.SetFloat(rapid.Float64().Filter(func(f float64) bool { return !math.IsNaN(f) }).Draw(t, path))
	default:
		t.Fatalf("drawEvery: %s is a %s: draw it here, and give the lane codec a way to keep it", path, v.Type())
	}
}

func drawTime(t *rapid.T, path string) time.Time {
	sec := rapid.Int64Range(-62135596800, 253402300799).Draw(t, path+" unix") // years 1 to 9999
	nsec := rapid.Int64Range(0, 999_999_999).Draw(t, path+" nsec")
	switch rapid.IntRange(0, 3).Draw(t, path+" location") {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(sec, nsec).UTC()
	case 2:
		return time.Unix(sec, nsec).In(time.Local)
	default:
		name := rapid.SampledFrom([]string{"", "CEST", "+0530"}).Draw(t, path+" zone")
		offset := rapid.IntRange(-14*3600, 14*3600).Draw(t, path+" offset")
		return time.Unix(sec, nsec).In(time.FixedZone(name, offset))
	}
}

// TestLaneCodecRefusesWhatIsNotALane: a lane cut anywhere, or followed by
// more bytes, is refused with ErrLaneEncoding, never read as another lane.
func TestLaneCodecRefusesWhatIsNotALane(t *testing.T) {
	b := domain.AppendLane(nil, everyFieldLane(t))
	for cut := range len(b) {
		if _, err := domain.DecodeLane(b[:cut]); !errors.Is(err, domain.ErrLaneEncoding) {
			t.Fatalf("DecodeLane of the first %d of %d bytes = %v, want ErrLaneEncoding", cut, len(b), err)
		}
	}
	if _, err := domain.DecodeLane(append(b, 0)); !errors.Is(err, domain.ErrLaneEncoding) {
		t.Fatalf("DecodeLane of a lane and one more byte = %v, want ErrLaneEncoding", err)
	}
}

// FuzzDecodeLane: DecodeLane never panics, and a lane it accepts encodes
// to bytes that decode to it again.
func FuzzDecodeLane(f *testing.F) {
	f.Add(domain.AppendLane(nil, domain.Lane{}))
	f.Add(domain.AppendLane(nil, everyFieldLane(f)))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := domain.DecodeLane(data)
		if err != nil {
			return
		}
		again, err := domain.DecodeLane(domain.AppendLane(nil, l))
		if err != nil || !reflect.DeepEqual(again, l) {
			t.Fatalf("DecodeLane(AppendLane(DecodeLane(%q))) = %+v, %v; want %+v", data, again, err, l)
		}
	})
}

// TestLaneSnapshotGolden pins the bytes of a snapshot in the lane codec
// (testdata/lane_every_field.snapshot: everyFieldLane's, with times in UTC
// and fixed zones only, so the file does not depend on the machine's zone).
// Snapshots written by an earlier build of the same LaneSchemaVersion must
// load as the lane they were taken of: a change of the codec's layout needs
// a new LaneSchemaVersion, then -update.
func TestLaneSnapshotGolden(t *testing.T) {
	lane := everyFieldLane(t)
	inUTC := func(tm *time.Time) {
		if tm.Location() == time.Local {
			*tm = tm.UTC()
		}
	}
	for _, tm := range []*time.Time{&lane.CreatedAt, &lane.UpdatedAt, &lane.LastResumeMarkedAt, &lane.TurnStartedAt,
		&lane.Queue.Slot.QueuedAt, &lane.Queue.Slot.UpdatedAt} {
		inUTC(tm)
	}
	for i := range lane.Queue.Overflow {
		inUTC(&lane.Queue.Overflow[i].QueuedAt)
		inUTC(&lane.Queue.Overflow[i].UpdatedAt)
	}
	path := filepath.Join("testdata", "lane_every_field.snapshot")
	got := domain.EncodeLaneSnapshot(lane)
	if *updateGoldens {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden: %v (run with -update)", err)
	}
	loaded, err := domain.DecodeLaneSnapshot(domain.LaneSchemaVersion, want)
	if err != nil {
		t.Fatalf("DecodeLaneSnapshot(%s) = %v: snapshots of this schema written earlier no longer load; a new layout needs a new LaneSchemaVersion", path, err)
	}
	if !reflect.DeepEqual(loaded, lane) {
		t.Errorf("%s loads as another lane: a new layout needs a new LaneSchemaVersion, then -update\n got %+v\nwant %+v", path, loaded, lane)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("EncodeLaneSnapshot writes other bytes than %s: a new layout needs a new LaneSchemaVersion, then -update", path)
	}
}

// BenchmarkLaneCodec is what the lane cache pays per put (append) and get
// (decode) of a typical lane.
func BenchmarkLaneCodec(b *testing.B) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	l := domain.Lane{SessionKey: "agent:main:telegram:dm:300000001",
		SessionID: "20260301_090000_a1b2c3d4", CreatedAt: now, UpdatedAt: now,
		Origin:   domain.SessionSource{Platform: "telegram", ChatID: "300000001", ChatType: "dm"},
		Platform: "telegram", ChatType: "dm", HadActivity: true, InputTokens: 1200, OutputTokens: 800}
	data := domain.AppendLane(nil, l)
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for b.Loop() {
			buf = domain.AppendLane(buf[:0], l)
		}
		b.ReportMetric(float64(len(data)), "bytes")
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := domain.DecodeLane(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
