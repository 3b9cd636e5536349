package commands

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"hermes/domain"
)

// fillEvery sets every field reachable from v (a pointer) to a value of
// its own, different from the zero value: strings, numbers, flags, times
// in the three kinds of location, queue items with and without a message.
func fillEvery(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillEvery(v.Elem(), n)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			locs := []*time.Location{time.UTC, time.Local, time.FixedZone("CEST", 2*3600)}
			v.Set(reflect.ValueOf(time.Unix(1_770_000_000+int64(*n)*3671, int64(*n)*1_000_003).In(locs[*n%3])))
			return
		}
		for i := range v.NumField() {
			fillEvery(v.Field(i), n)
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(fmt.Sprintf(`{"n":%d}`, *n)))
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fillEvery(s.Index(i), n)
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
		panic(fmt.Sprintf("fillEvery: add %s", v.Type()))
	}
}

// TestPackedLaneKeepsEveryField: the cache gives back exactly the lane it
// was given, for a lane with every field set (a field added to Lane is
// set too, and fails here until packLane keeps it), an empty lane, and a
// lane whose queue holds items without a message or merged ids.
func TestPackedLaneKeepsEveryField(t *testing.T) {
	var full domain.Lane
	n := 0
	fillEvery(reflect.ValueOf(&full).Elem(), &n)
	partial := full
	partial.Queue = domain.Queue{Overflow: []domain.QueueItem{{ID: "q1", QueuedAt: time.Unix(5, 0).UTC()}}}
	partial.Origin = domain.SessionSource{Platform: "telegram", ChatID: "1", ChatType: "dm"}
	for _, tc := range []struct {
		name string
		st   laneState
	}{
		{"every field set", laneState{lane: full, version: 1 << 40}},
		{"empty", laneState{}},
		{"sparse queue", laneState{lane: partial, version: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := packLane(tc.st).unpack()
			if err != nil {
				t.Fatalf("unpack() = %v", err)
			}
			if !reflect.DeepEqual(got, tc.st) {
				t.Fatalf("unpacked lane differs:\n got %+v\nwant %+v", got, tc.st)
			}
		})
	}
}

// TestPackedLaneTruncated: a packed lane cut anywhere is refused, never
// read as another lane (the cache then reads the store).
func TestPackedLaneTruncated(t *testing.T) {
	var full domain.Lane
	n := 0
	fillEvery(reflect.ValueOf(&full).Elem(), &n)
	p := packLane(laneState{lane: full, version: 3})
	for cut := range len(p) {
		if _, err := p[:cut].unpack(); err == nil {
			t.Fatalf("unpack of the first %d of %d bytes = nil error", cut, len(p))
		}
	}
}

// BenchmarkPackedLane: what the cache pays per get and put.
func BenchmarkPackedLane(b *testing.B) {
	st := laneState{version: 12, lane: domain.Lane{SessionKey: "agent:main:telegram:dm:300000001",
		SessionID: "20260301_090000_a1b2c3d4", CreatedAt: time.Now(), UpdatedAt: time.Now(),
		Origin:   domain.SessionSource{Platform: "telegram", ChatID: "300000001", ChatType: "dm"},
		Platform: "telegram", ChatType: "dm", HadActivity: true, InputTokens: 1200, OutputTokens: 800}}
	p := packLane(st)
	b.Run("pack", func(b *testing.B) {
		for b.Loop() {
			packLane(st)
		}
		b.ReportMetric(float64(len(p)), "packed-bytes")
	})
	b.Run("unpack", func(b *testing.B) {
		for b.Loop() {
			if _, err := p.unpack(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
