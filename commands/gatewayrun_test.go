package commands_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"hermes/commands"
	"hermes/domain"
	"hermes/events"
	"hermes/testfixtures"
)

// runFixture is a handler over a real store with two lanes (alice, bob).
func runFixture(t *testing.T) (*fixture, testfixtures.StoreDirectory) {
	t.Helper()
	f := newFixture(t, idleConfig())
	for _, src := range []domain.SessionSource{alice, {Platform: "telegram", ChatID: "77", ChatType: "dm"}} {
		if _, err := f.handler.ResolveSession(context.Background(), commands.ResolveSession{Source: src}); err != nil {
			t.Fatal(err)
		}
	}
	return f, testfixtures.StoreDirectory{Store: f.store}
}

const bobKey = "agent:main:telegram:dm:77"

func startRun(t *testing.T, f *fixture, dir commands.RunDirectory, runID string) commands.GatewayRunOutcome {
	t.Helper()
	out, err := f.handler.StartGatewayRun(context.Background(), dir, commands.StartGatewayRun{Start: domain.RunStart{
		Gateway: "default", RunID: runID, PID: 100, Host: "h", Lease: time.Minute}})
	if err != nil {
		t.Fatalf("StartGatewayRun(%s) error = %v", runID, err)
	}
	return out
}

func startRunTurn(t *testing.T, f *fixture, key, runID, turnID string) {
	t.Helper()
	if _, _, err := f.handler.StartTurn(context.Background(), commands.StartTurn{Key: key, TurnID: turnID, Gateway: "default", RunID: runID}); err != nil {
		t.Fatalf("StartTurn(%s, run %s) error = %v", key, runID, err)
	}
}

func lane(t *testing.T, f *fixture, key string) domain.Lane {
	t.Helper()
	l, _, err := f.handler.Lane(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestGatewayRun_LeaseExpiryRecoversTheRunsTurns: given a gateway run with
// a turn open on one lane (and a turn of no run on another), when the
// clock passes its lease without a heartbeat, then the run is lost
// (lease_expired), its turn is closed with a resume mark
// (restart_interrupted), the other lane's turn stays, and the run can
// neither beat nor open turns again.
func TestGatewayRun_LeaseExpiryRecoversTheRunsTurns(t *testing.T) {
	ctx := context.Background()
	f, dir := runFixture(t)
	startRun(t, f, dir, "r1")
	startRunTurn(t, f, aliceKey, "r1", "t1")
	if _, _, err := f.handler.StartTurn(ctx, commands.StartTurn{Key: bobKey, TurnID: "b1"}); err != nil {
		t.Fatal(err)
	}
	recover := func() []commands.GatewayRunOutcome {
		t.Helper()
		out, err := f.handler.RecoverGatewayRuns(ctx, dir, commands.RecoverGatewayRuns{Gateways: []string{"default"}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	f.clock.Advance(59 * time.Second)
	if out := recover(); len(out) != 0 {
		t.Fatalf("before the lease ran out RecoverGatewayRuns = %+v, want nothing", out)
	}
	f.clock.Advance(time.Second)
	out := recover()
	if len(out) != 1 || !out[0].Appended || out[0].Ended.State != domain.RunLost || !slices.Equal(out[0].Interrupted, []string{aliceKey}) {
		t.Fatalf("at the lease's end RecoverGatewayRuns = %+v, want r1 lost with alice's turn cut", out)
	}
	if l := lane(t, f, aliceKey); l.TurnOpen() || !l.ResumePending || l.ResumeReason != events.ResumeRestartInterrupted {
		t.Errorf("alice after the loss: open %q, pending %v (%s); want closed and resume pending restart_interrupted", l.OpenTurnID, l.ResumePending, l.ResumeReason)
	}
	if l := lane(t, f, bobKey); l.OpenTurnID != "b1" {
		t.Errorf("bob's turn of no run = %q, want b1 kept open", l.OpenTurnID)
	}
	if out := recover(); len(out) != 0 {
		t.Errorf("a second round = %+v, want nothing", out)
	}
	if _, err := f.handler.HeartbeatGatewayRun(ctx, commands.HeartbeatGatewayRun{Gateway: "default", RunID: "r1"}); !errors.Is(err, domain.ErrRunEnded) {
		t.Errorf("heartbeat of the lost run error = %v, want ErrRunEnded", err)
	}
	if _, _, err := f.handler.StartTurn(ctx, commands.StartTurn{Key: aliceKey, TurnID: "t2", Gateway: "default", RunID: "r1"}); !errors.Is(err, domain.ErrRunEnded) {
		t.Errorf("a turn of the lost run error = %v, want ErrRunEnded", err)
	}
	lost := 0
	envs, _ := f.store.ReadStream(ctx, events.GatewayRunStream("default"), 1, 100, events.Forwards)
	for _, env := range envs {
		if e, ok := env.Event.(events.GatewayRunLost); ok && e.Cause == events.RunLostLeaseExpired && slices.Equal(e.OpenLanes, []string{aliceKey}) {
			lost++
		}
	}
	if lost != 1 {
		t.Errorf("gateway stream holds %d lease_expired losses cutting alice, want 1: %v", lost, envs)
	}
}

// TestGatewayRun_HeartbeatsKeepTheRun: heartbeats renew the lease (an event
// only past a third of it), and a run that beats is never lost.
func TestGatewayRun_HeartbeatsKeepTheRun(t *testing.T) {
	ctx := context.Background()
	f, dir := runFixture(t)
	startRun(t, f, dir, "r1")
	startRunTurn(t, f, aliceKey, "r1", "t1")
	renewals := 0
	for range 12 {
		f.clock.Advance(10 * time.Second)
		out, err := f.handler.HeartbeatGatewayRun(ctx, commands.HeartbeatGatewayRun{Gateway: "default", RunID: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		if out.Appended {
			renewals++
		}
		if rec, err := f.handler.RecoverGatewayRuns(ctx, dir, commands.RecoverGatewayRuns{Gateways: []string{"default"}}); err != nil || len(rec) != 0 {
			t.Fatalf("RecoverGatewayRuns of a beating run = %+v, %v; want nothing", rec, err)
		}
	}
	if renewals != 6 {
		t.Errorf("120 s of heartbeats every 10 s appended %d renewals, want 6 (one per third of a 60 s lease)", renewals)
	}
	if l := lane(t, f, aliceKey); l.OpenTurnID != "t1" {
		t.Errorf("alice's turn = %q, want t1 open", l.OpenTurnID)
	}
}

// TestGatewayRun_RestartWithoutStopRecoversAtOnce: a gateway that crashed
// and starts again before its lease ran out: the new start records the
// old run lost (restarted) and recovers its turn; announcing again changes
// nothing; a stop with a turn open cuts it (restart_timeout), a stop with
// none is a completed drain.
func TestGatewayRun_RestartWithoutStopRecoversAtOnce(t *testing.T) {
	ctx := context.Background()
	f, dir := runFixture(t)
	startRun(t, f, dir, "r1")
	startRunTurn(t, f, aliceKey, "r1", "t1")
	f.clock.Advance(5 * time.Second)
	out := startRun(t, f, dir, "r2")
	if out.Ended.RunID != "r1" || out.Ended.Cause != events.RunLostRestarted || !slices.Equal(out.Interrupted, []string{aliceKey}) {
		t.Fatalf("the new start = %+v, want r1 lost (restarted) and alice cut", out)
	}
	if again := startRun(t, f, dir, "r2"); again.Appended || len(again.Interrupted) != 0 {
		t.Errorf("announcing r2 again = %+v, want nothing new", again)
	}
	if _, err := f.handler.StartGatewayRun(ctx, dir, commands.StartGatewayRun{Start: domain.RunStart{Gateway: "default", RunID: "r1", Lease: time.Minute}}); !errors.Is(err, domain.ErrRunEnded) {
		t.Errorf("announcing the ended r1 again error = %v, want ErrRunEnded", err)
	}

	startRunTurn(t, f, aliceKey, "r2", "t2")
	stop, err := f.handler.StopGatewayRun(ctx, dir, commands.StopGatewayRun{Gateway: "default", RunID: "r2", Restart: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(stop.Interrupted, []string{aliceKey}) || stop.Ended.State != domain.RunStopped {
		t.Fatalf("stop with a turn open = %+v, want alice cut", stop)
	}
	l := lane(t, f, aliceKey)
	if l.TurnOpen() {
		t.Errorf("alice's turn %q stayed open after the stop", l.OpenTurnID)
	}
	var reasons []string
	for _, env := range f.history(t, aliceKey) {
		if e, ok := env.Event.(events.TurnInterrupted); ok {
			reasons = append(reasons, e.Reason)
		}
	}
	if want := []string{events.ResumeRestartInterrupted, events.ResumeRestartTimeout}; !slices.Equal(reasons, want) {
		t.Errorf("alice's interruptions = %v, want %v (the crash, then the restart's cut)", reasons, want)
	}
	if again, err := f.handler.StopGatewayRun(ctx, dir, commands.StopGatewayRun{Gateway: "default", RunID: "r2"}); err != nil || again.Appended {
		t.Errorf("a second stop = %+v, %v; want nothing new", again, err)
	}

	startRun(t, f, dir, "r3")
	clean, err := f.handler.StopGatewayRun(ctx, dir, commands.StopGatewayRun{Gateway: "default", RunID: "r3"})
	if err != nil || len(clean.Interrupted) != 0 || !clean.Appended {
		t.Errorf("a stop with no turn open = %+v, %v; want a recorded stop cutting nothing", clean, err)
	}
}

// TestGatewayRun_TurnMetadataNamesTheRun: a turn of a run carries the run
// in its metadata; OpenTurns reports it.
func TestGatewayRun_TurnMetadataNamesTheRun(t *testing.T) {
	ctx := context.Background()
	f, dir := runFixture(t)
	startRun(t, f, dir, "r1")
	startRunTurn(t, f, aliceKey, "r1", "t1")
	turns, err := f.handler.OpenTurns(ctx, []string{aliceKey})
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 1 || turns[0].GatewayRun != "default/r1" {
		t.Errorf("OpenTurns = %+v, want t1 of default/r1", turns)
	}
}
