package projections_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"hermes/events"
	"hermes/projections"
)

// TestRunnerHoldsOnTheFailuresItIsTold: given a projection whose Apply
// fails with damage the runner is told to hold on, when Run meets it, then
// Run returns ErrHeld, Held says why, a WaitFor already waiting keeps
// waiting instead of failing, WaitFresh answers at once; and once the
// projection applies again, the next Run goes on from its checkpoint and
// the waiter returns. A failure the hold does not pick fails the runner
// as before (WaitFor returns the error).
func TestRunnerHoldsOnTheFailuresItIsTold(t *testing.T) {
	damage := errors.New("apply: database disk image is malformed")
	for _, tc := range []struct {
		name     string
		fail     error
		wantHeld bool
	}{
		{"damage is held", damage, true},
		{"another failure fails", errors.New("boom"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := openEventStore(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res, err := store.Append(ctx, "s", events.AnyVersion(), []events.Proposed{{ID: "e1", Event: events.GatewayStarted{PID: 1}}})
			if err != nil {
				t.Fatal(err)
			}
			p := &flaky{failures: 1, fail: tc.fail}
			r := projections.NewRunner(store, p)
			var heldBy string
			r.SetHold(func(projection string, err error) bool {
				heldBy = projection
				return errors.Is(err, damage)
			})
			waited := make(chan error, 1)
			wctx, wcancel := context.WithTimeout(ctx, time.Minute)
			defer wcancel()
			go func() { waited <- r.WaitFor(wctx, res.LastPosition()) }()

			err = r.Run(ctx)
			if got := errors.Is(err, projections.ErrHeld); got != tc.wantHeld {
				t.Fatalf("Run() = %v, held %v, want held %v", err, got, tc.wantHeld)
			}
			if !tc.wantHeld {
				if werr := <-waited; werr == nil {
					t.Fatal("WaitFor = nil after the runner failed")
				}
				return
			}
			if heldBy != p.Name() || !errors.Is(r.Held(), damage) {
				t.Fatalf("held by %q with %v, want %q with the damage", heldBy, r.Held(), p.Name())
			}
			if err := r.WaitFresh(ctx, res.LastPosition()); err != nil {
				t.Fatalf("WaitFresh while held = %v, want the read served as it is", err)
			}
			select {
			case werr := <-waited:
				t.Fatalf("WaitFor returned %v while the runner was held", werr)
			default:
			}
			go func() { _ = r.Run(ctx) }()
			if werr := <-waited; werr != nil {
				t.Fatalf("WaitFor after the next Run = %v", werr)
			}
			if r.Held() != nil {
				t.Fatalf("Held() = %v after the next Run applied", r.Held())
			}
		})
	}
}
