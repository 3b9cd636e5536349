package domain_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"hermes/domain"
	"hermes/events"
	"hermes/testfixtures"
)

// laneCommand is one decide method drawn by the property test.
type laneCommand struct {
	name string
	run  func(l domain.Lane, now time.Time) ([]events.Event, error)
}

func drawCommand(t *rapid.T, r domain.LaneRules) laneCommand {
	sources := []domain.SessionSource{
		alice,
		{Platform: "telegram", ChatID: "99", ChatType: "dm", UserName: "Alice (renamed)"},
	}
	entropy := rapid.StringMatching(`[0-9a-f]{8}`).Draw(t, "entropy")
	switch rapid.IntRange(0, 12).Draw(t, "command") {
	case 0, 1, 2:
		src := rapid.SampledFrom(sources).Draw(t, "source")
		force := rapid.IntRange(0, 9).Draw(t, "force") == 0
		return laneCommand{"resolve", func(l domain.Lane, now time.Time) ([]events.Event, error) {
			return l.Resolve(domain.ResolveRequest{Source: src, SessionKey: laneKey, ForceNew: force, Rules: r, Entropy: entropy}, now)
		}}
	case 3:
		return laneCommand{"reset", func(l domain.Lane, now time.Time) ([]events.Event, error) {
			return l.Reset("", r, entropy, now)
		}}
	case 4:
		target := rapid.SampledFrom([]string{"20260101_000000_cccccccc", "20260102_000000_dddddddd"}).Draw(t, "target")
		return laneCommand{"switch", func(l domain.Lane, now time.Time) ([]events.Event, error) { return l.Switch(target, now) }}
	case 5:
		reason := rapid.SampledFrom([]string{events.SuspendStopCommand, events.SuspendStuckLoop}).Draw(t, "suspend reason")
		return laneCommand{"suspend", func(l domain.Lane, now time.Time) ([]events.Event, error) { return l.Suspend(reason, now) }}
	case 6:
		reason := rapid.SampledFrom([]string{"restart_timeout", "shutdown_timeout", "restart_interrupted"}).Draw(t, "resume reason")
		return laneCommand{"mark resume", func(l domain.Lane, now time.Time) ([]events.Event, error) { return l.MarkResumePending(reason, now) }}
	case 7:
		return laneCommand{"clear resume", func(l domain.Lane, now time.Time) ([]events.Event, error) { return l.ClearResumePending(now) }}
	case 8:
		var tokens *int64
		if rapid.Bool().Draw(t, "with tokens") {
			v := rapid.Int64Range(0, 100000).Draw(t, "last prompt tokens")
			tokens = &v
		}
		return laneCommand{"touch", func(l domain.Lane, now time.Time) ([]events.Event, error) { return l.Touch(tokens, now) }}
	case 9:
		turn := rapid.SampledFrom([]string{"t1", "t2", "t3"}).Draw(t, "turn")
		return laneCommand{"start turn", func(l domain.Lane, now time.Time) ([]events.Event, error) { return l.StartTurn(turn, now) }}
	case 10:
		o := domain.TurnOutcome{
			InputTokens:  rapid.Int64Range(0, 5000).Draw(t, "input"),
			OutputTokens: rapid.Int64Range(0, 5000).Draw(t, "output"),
			Failed:       rapid.IntRange(0, 4).Draw(t, "failed") == 0,
		}
		return laneCommand{"complete turn", func(l domain.Lane, now time.Time) ([]events.Event, error) { return l.CompleteTurn(o, now) }}
	case 11:
		n := rapid.IntRange(0, 2).Draw(t, "processes")
		return laneCommand{"active processes", func(l domain.Lane, now time.Time) ([]events.Event, error) { return l.SetActiveProcesses(n, now) }}
	default:
		return laneCommand{"recovery", func(l domain.Lane, now time.Time) ([]events.Event, error) {
			out := l.MarkInterruptedIfRecent(2*time.Minute, now)
			if len(out) == 0 {
				out = l.FinalizeExpiry(r, false, now)
			}
			if len(out) == 0 {
				out = l.Prune(30*24*time.Hour, now)
			}
			return out, nil
		}}
	}
}

// TestLane_ReplayMatchesDecisions: for random command sequences over random
// times, replaying the decided events gives the state the decide methods saw,
// and replaying any prefix equals StateAtVersion / StateAtTime there.
func TestLane_ReplayMatchesDecisions(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := domain.LaneRules{
			Policy: domain.ResetPolicy{
				Mode:        rapid.SampledFrom([]domain.ResetMode{domain.ResetNone, domain.ResetIdle, domain.ResetDaily, domain.ResetBoth}).Draw(t, "mode"),
				AtHour:      rapid.IntRange(0, 23).Draw(t, "at hour"),
				IdleMinutes: rapid.IntRange(0, 3000).Draw(t, "idle minutes"),
			},
			Location:        time.UTC,
			ResumeFreshness: time.Duration(rapid.IntRange(0, 7200).Draw(t, "freshness s")) * time.Second,
		}
		now := t0
		var lane domain.Lane
		var history []events.Event
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(30*time.Hour)).Draw(t, "advance")))
			cmd := drawCommand(t, r)
			before := lane
			decided, err := cmd.run(lane, now)
			if err != nil {
				if len(decided) != 0 {
					t.Fatalf("%s refused with %v but decided %v", cmd.name, err, decided)
				}
				continue
			}
			for _, e := range decided {
				if !e.OccurredAt().Equal(now) {
					t.Fatalf("%s decided %T at %v, want now %v", cmd.name, e, e.OccurredAt(), now)
				}
				lane = domain.Evolve(lane, e)
				history = append(history, e)
			}
			checkInvariants(t, cmd.name, before, lane, decided, now)
		}

		if diff := cmp.Diff(lane, domain.Replay(history)); diff != "" {
			t.Fatalf("Replay(history) differs from the decided state (-decided +replay):\n%s", diff)
		}
		envs := testfixtures.Envelopes(events.LaneStream(laneKey), history)
		v := rapid.IntRange(0, len(history)).Draw(t, "version")
		// A snapshot of the prefix, decoded and folded on with the rest,
		// is the lane (what a load from a snapshot does).
		data := domain.EncodeLaneSnapshot(domain.Replay(history[:v]))
		fromSnapshot, err := domain.DecodeLaneSnapshot(domain.LaneSchemaVersion, data)
		if err != nil {
			t.Fatalf("DecodeLaneSnapshot: %v", err)
		}
		for _, e := range history[v:] {
			fromSnapshot = domain.Evolve(fromSnapshot, e)
		}
		if diff := cmp.Diff(lane, fromSnapshot); diff != "" {
			t.Fatalf("a snapshot at version %d folded on differs from the lane (-lane +snapshot):\n%s", v, diff)
		}
		if diff := cmp.Diff(domain.Replay(history[:v]), domain.StateAtVersion(envs, uint64(v))); diff != "" {
			t.Fatalf("StateAtVersion(%d) differs from the replayed prefix:\n%s", v, diff)
		}
		if v > 0 {
			at := history[v-1].OccurredAt()
			last := v
			for last < len(history) && !history[last].OccurredAt().After(at) {
				last++
			}
			got, gotV := domain.StateAtTime(envs, at)
			if gotV != uint64(last) {
				t.Fatalf("StateAtTime(%v) version = %d, want %d", at, gotV, last)
			}
			if diff := cmp.Diff(domain.Replay(history[:last]), got); diff != "" {
				t.Fatalf("StateAtTime(%v) differs from the replayed prefix:\n%s", at, diff)
			}
		}
	})
}

func checkInvariants(t *rapid.T, name string, before, after domain.Lane, decided []events.Event, now time.Time) {
	if after.TotalTokens != after.InputTokens+after.OutputTokens {
		t.Fatalf("%s: total tokens %d != input %d + output %d", name, after.TotalTokens, after.InputTokens, after.OutputTokens)
	}
	switch name {
	case "resolve":
		if !after.Exists() || after.Suspended || !after.UpdatedAt.Equal(now) {
			t.Fatalf("resolve left lane %+v at %v", after, now)
		}
		res := domain.ResolutionOf(decided)
		if before.Suspended && res.ResetReason != domain.AutoResetSuspended && res.ResetReason != "" {
			t.Fatalf("resolve of a suspended lane reset for %q", res.ResetReason)
		}
		if res.Created && after.SessionID == before.SessionID {
			t.Fatalf("resolve created a session with the old id %q", after.SessionID)
		}
		if !res.Created && after.SessionID != before.SessionID {
			t.Fatalf("resolve changed the session id without creating one")
		}
	case "mark resume":
		if before.Suspended {
			t.Fatalf("mark resume pending succeeded on a suspended lane")
		}
	}
}
