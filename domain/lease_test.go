package domain_test

import (
	"testing"
	"time"

	"hermes/domain"
	"hermes/events"
)

func TestLease_Claim(t *testing.T) {
	const ttl = time.Minute
	held := domain.Lease{Holder: "n1", Until: t0.Add(ttl), Delivered: 10}
	tests := []struct {
		name      string
		lease     domain.Lease
		node      string
		at        time.Time
		delivered uint64
		want      events.Event
	}{
		{name: "a free lease is acquired", node: "n1", at: t0, want: events.LeaseAcquired{Holder: "n1", Until: t0.Add(ttl), At: t0}},
		{name: "the holder renews", lease: held, node: "n1", at: t0.Add(ttl / 3), delivered: 20,
			want: events.LeaseRenewed{Holder: "n1", Until: t0.Add(ttl/3 + ttl), Delivered: 20, At: t0.Add(ttl / 3)}},
		{name: "a renewal never moves the checkpoint back", lease: held, node: "n1", at: t0, delivered: 5,
			want: events.LeaseRenewed{Holder: "n1", Until: t0.Add(ttl), Delivered: 10, At: t0}},
		{name: "another node waits while it is held", lease: held, node: "n2", at: t0.Add(ttl - time.Nanosecond)},
		{name: "another node takes it at its end, with the checkpoint", lease: held, node: "n2", at: t0.Add(ttl),
			want: events.LeaseAcquired{Holder: "n2", Until: t0.Add(2 * ttl), Delivered: 10, At: t0.Add(ttl)}},
		{name: "a released lease is taken at once", lease: domain.Lease{Holder: "n1", Until: t0.Add(ttl), Delivered: 10, Released: true}, node: "n2", at: t0,
			want: events.LeaseAcquired{Holder: "n2", Until: t0.Add(ttl), Delivered: 10, At: t0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.lease.Claim(tt.node, tt.at, ttl, tt.delivered); got != tt.want {
				t.Fatalf("Claim = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestLease_HeldByStopsAMarginBeforeTheEnd(t *testing.T) {
	l := domain.Lease{}.Evolve(events.LeaseAcquired{Holder: "n1", Until: t0.Add(time.Minute), At: t0})
	margin := 20 * time.Second
	for _, tt := range []struct {
		node string
		at   time.Time
		want bool
	}{
		{"n1", t0, true},
		{"n1", t0.Add(40*time.Second - time.Nanosecond), true},
		{"n1", t0.Add(40 * time.Second), false},
		{"n2", t0, false},
	} {
		if got := l.HeldBy(tt.node, tt.at, margin); got != tt.want {
			t.Errorf("HeldBy(%s, +%v) = %t, want %t", tt.node, tt.at.Sub(t0), got, tt.want)
		}
	}
	if released := l.Evolve(events.LeaseReleased{Holder: "n1", At: t0}); released.HeldBy("n1", t0, margin) || !released.Free(t0) {
		t.Errorf("a released lease is still held, or not free")
	}
}

func TestNodeRun_Abandoned(t *testing.T) {
	const ttl = time.Minute
	started := events.GatewayStarted{At: t0}
	tests := []struct {
		name  string
		given []events.Event
		at    time.Time
		want  bool
	}{
		{name: "a run within its lease", given: []events.Event{started, events.LeaseAcquired{Holder: "n", Until: t0.Add(ttl)}}, at: t0.Add(ttl - 1), want: false},
		{name: "a run past its lease", given: []events.Event{started, events.LeaseAcquired{Holder: "n", Until: t0.Add(ttl)}}, at: t0.Add(ttl), want: true},
		{name: "a renewal extends it", given: []events.Event{started, events.LeaseAcquired{Holder: "n", Until: t0.Add(ttl)}, events.LeaseRenewed{Holder: "n", Until: t0.Add(2 * ttl)}}, at: t0.Add(ttl), want: false},
		{name: "a run with no lease yet holds one of ttl from its start", given: []events.Event{started}, at: t0.Add(ttl - 1), want: false},
		{name: "a run with no lease past ttl", given: []events.Event{started}, at: t0.Add(ttl), want: true},
		{name: "a stopped run is not adopted", given: []events.Event{started, events.GatewayStopped{Clean: true}}, at: t0.Add(time.Hour), want: false},
		{name: "an adopted run is not adopted again", given: []events.Event{started, events.RunAdopted{By: "m"}}, at: t0.Add(time.Hour), want: false},
		{name: "no run at all", at: t0.Add(time.Hour), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r domain.NodeRun
			for i, e := range tt.given {
				r = r.Evolve(e, uint64(i+1))
			}
			if got := r.Abandoned(tt.at, ttl); got != tt.want {
				t.Fatalf("Abandoned = %t, want %t (run %+v)", got, tt.want, r)
			}
		})
	}
}
