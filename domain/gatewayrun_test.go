package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hermes/domain"
	"hermes/events"
)

func TestGatewayRuns_Decide(t *testing.T) {
	lease := time.Minute
	started := events.GatewayRunStarted{Gateway: "default", RunID: "r1", PID: 7, Host: "h", LeaseSeconds: 60, LeaseUntil: t0.Add(lease), At: t0}
	start := func(runID string, open ...string) domain.RunStart {
		return domain.RunStart{Gateway: "default", RunID: runID, PID: 8, Host: "h", Lease: lease, PreviousOpenLanes: open}
	}
	later := t0.Add(50 * time.Second)
	tests := []struct {
		name    string
		given   []events.Event
		when    func(g domain.GatewayRuns) ([]events.Event, error)
		want    []events.Event
		wantErr error
	}{
		{
			name: "the first run starts with a lease",
			when: func(g domain.GatewayRuns) ([]events.Event, error) { return g.StartRun(start("r1"), t0) },
			want: []events.Event{events.GatewayRunStarted{Gateway: "default", RunID: "r1", PID: 8, Host: "h", LeaseSeconds: 60, LeaseUntil: t0.Add(lease), At: t0}},
		},
		{
			name:  "announcing the running run again changes nothing",
			given: []events.Event{started},
			when:  func(g domain.GatewayRuns) ([]events.Event, error) { return g.StartRun(start("r1"), later) },
		},
		{
			name:  "a new run while the last is open loses it first, cutting its turns",
			given: []events.Event{started},
			when:  func(g domain.GatewayRuns) ([]events.Event, error) { return g.StartRun(start("r2", "k1"), later) },
			want: []events.Event{
				events.GatewayRunLost{RunID: "r1", Cause: events.RunLostRestarted, LeaseUntil: t0.Add(lease), OpenLanes: []string{"k1"}, At: later},
				events.GatewayRunStarted{Gateway: "default", RunID: "r2", PID: 8, Host: "h", LeaseSeconds: 60, LeaseUntil: later.Add(lease), At: later},
			},
		},
		{
			name:  "a new run after a clean stop just starts",
			given: []events.Event{started, events.GatewayRunStopped{RunID: "r1", OpenLanes: []string{}, At: t0}},
			when:  func(g domain.GatewayRuns) ([]events.Event, error) { return g.StartRun(start("r2"), later) },
			want:  []events.Event{events.GatewayRunStarted{Gateway: "default", RunID: "r2", PID: 8, Host: "h", LeaseSeconds: 60, LeaseUntil: later.Add(lease), At: later}},
		},
		{
			name:    "the id of the ended run is not reused",
			given:   []events.Event{started, events.GatewayRunStopped{RunID: "r1", OpenLanes: []string{}, At: t0}},
			when:    func(g domain.GatewayRuns) ([]events.Event, error) { return g.StartRun(start("r1"), later) },
			wantErr: domain.ErrRunEnded,
		},
		{
			name: "a lease out of bounds is refused",
			when: func(g domain.GatewayRuns) ([]events.Event, error) {
				s := start("r1")
				s.Lease = time.Second
				return g.StartRun(s, t0)
			},
			wantErr: domain.ErrInvalidArgument,
		},
		{
			name:    "a run id that cannot name a stream is refused",
			when:    func(g domain.GatewayRuns) ([]events.Event, error) { return g.StartRun(start("r/1"), t0) },
			wantErr: domain.ErrInvalidArgument,
		},
		{
			name:  "a heartbeat with most of the lease left appends nothing",
			given: []events.Event{started},
			when:  func(g domain.GatewayRuns) ([]events.Event, error) { return g.Heartbeat("r1", t0.Add(10*time.Second)) },
		},
		{
			name:  "a heartbeat past a third of the lease renews it",
			given: []events.Event{started},
			when:  func(g domain.GatewayRuns) ([]events.Event, error) { return g.Heartbeat("r1", t0.Add(20*time.Second)) },
			want:  []events.Event{events.LeaseRenewed{Holder: "r1", Until: t0.Add(80 * time.Second), At: t0.Add(20 * time.Second)}},
		},
		{
			name:    "a heartbeat of a lost run is refused",
			given:   []events.Event{started, events.GatewayRunLost{RunID: "r1", Cause: events.RunLostLeaseExpired, At: t0}},
			when:    func(g domain.GatewayRuns) ([]events.Event, error) { return g.Heartbeat("r1", later) },
			wantErr: domain.ErrRunEnded,
		},
		{
			name:    "a heartbeat of an unknown run is refused",
			given:   []events.Event{started},
			when:    func(g domain.GatewayRuns) ([]events.Event, error) { return g.Heartbeat("r9", later) },
			wantErr: domain.ErrRunNotFound,
		},
		{
			name:  "a stop records the turns it cut",
			given: []events.Event{started},
			when: func(g domain.GatewayRuns) ([]events.Event, error) {
				return g.StopRun("r1", true, []string{"k1"}, later)
			},
			want: []events.Event{events.GatewayRunStopped{RunID: "r1", Restart: true, OpenLanes: []string{"k1"}, At: later}},
		},
		{
			name:  "a second stop changes nothing",
			given: []events.Event{started, events.GatewayRunStopped{RunID: "r1", OpenLanes: []string{}, At: t0}},
			when:  func(g domain.GatewayRuns) ([]events.Event, error) { return g.StopRun("r1", false, nil, later) },
		},
		{
			name:    "a lost run cannot stop",
			given:   []events.Event{started, events.GatewayRunLost{RunID: "r1", Cause: events.RunLostLeaseExpired, At: t0}},
			when:    func(g domain.GatewayRuns) ([]events.Event, error) { return g.StopRun("r1", false, nil, later) },
			wantErr: domain.ErrRunEnded,
		},
		{
			name:  "a run is lost when its lease ran out",
			given: []events.Event{started},
			when: func(g domain.GatewayRuns) ([]events.Event, error) {
				return g.LoseExpired("r1", time.Time{}, []string{"k1"}, t0.Add(lease)), nil
			},
			want: []events.Event{events.GatewayRunLost{RunID: "r1", Cause: events.RunLostLeaseExpired, LeaseUntil: t0.Add(lease), OpenLanes: []string{"k1"}, At: t0.Add(lease)}},
		},
		{
			name:  "a run is kept while its lease lasts",
			given: []events.Event{started},
			when: func(g domain.GatewayRuns) ([]events.Event, error) {
				return g.LoseExpired("r1", time.Time{}, nil, t0.Add(lease-time.Nanosecond)), nil
			},
		},
		{
			name:  "a renewed lease keeps the run",
			given: []events.Event{started, events.LeaseRenewed{Holder: "r1", Until: t0.Add(2 * lease), At: later}},
			when: func(g domain.GatewayRuns) ([]events.Event, error) {
				return g.LoseExpired("r1", time.Time{}, nil, t0.Add(lease)), nil
			},
		},
		{
			name:  "after a hermes start the run has a lease's grace",
			given: []events.Event{started},
			when: func(g domain.GatewayRuns) ([]events.Event, error) {
				return g.LoseExpired("r1", t0.Add(3*lease), nil, t0.Add(2*lease)), nil
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g domain.GatewayRuns
			for _, e := range tt.given {
				g = g.Evolve(e)
			}
			got, err := tt.when(g)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || len(got) != 0 {
					t.Fatalf("got %v, %v; want no events and %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				got = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decided events (-want +got):\n%s", diff)
			}
		})
	}
}
