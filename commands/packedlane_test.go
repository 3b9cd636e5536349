package commands

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"hermes/domain"
)

// packedTestLane is a lane with a queue and times in each kind of location
// (the lane codec itself is tested field by field in package domain).
func packedTestLane() domain.Lane {
	at := time.Unix(1_770_000_000, 123).In(time.FixedZone("CEST", 2*3600))
	return domain.Lane{SessionKey: "agent:main:telegram:dm:1", SessionID: "s1", CreatedAt: at.UTC(), UpdatedAt: at.In(time.Local),
		Origin: domain.SessionSource{Platform: "telegram", ChatID: "1", ChatType: "dm", IsBot: true}, InputTokens: 7,
		EstimatedCostUSD: 0.5, Suspended: true, Queue: domain.Queue{Slot: &domain.QueueItem{ID: "q1", Message: json.RawMessage(`{}`), QueuedAt: at},
			Overflow: []domain.QueueItem{{ID: "q2", MergedIDs: []string{"q3"}}}}}
}

// TestPackedLaneKeepsVersionAndLane: the cache gives back the version and
// the lane it was given.
func TestPackedLaneKeepsVersionAndLane(t *testing.T) {
	for _, st := range []laneState{{lane: packedTestLane(), version: 1 << 40}, {}, {lane: packedTestLane(), version: 7}} {
		got, err := packLane(st).unpack()
		if err != nil {
			t.Fatalf("unpack() = %v", err)
		}
		if !reflect.DeepEqual(got, st) {
			t.Fatalf("unpacked lane differs:\n got %+v\nwant %+v", got, st)
		}
	}
}

// TestPackedLaneTruncated: a packed lane cut anywhere is refused, never
// read as another lane (the cache then reads the store).
func TestPackedLaneTruncated(t *testing.T) {
	p := packLane(laneState{lane: packedTestLane(), version: 300})
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
		b.ReportAllocs()
		for b.Loop() {
			packLane(st)
		}
		b.ReportMetric(float64(len(p)), "packed-bytes")
	})
	b.Run("unpack", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.unpack(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
