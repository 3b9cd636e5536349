package commands_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"hermes/commands"
	"hermes/domain"
	"hermes/events"
)

// parentMap is SessionParents over a map of session → parent.
type parentMap map[string]string

func (m parentMap) ParentSessionID(_ context.Context, id string) (string, bool, error) {
	p, ok := m[id]
	return p, ok, nil
}

// TestCompressSession: a split to a continuation two compressions down
// moves the lane and keeps its sums; a split to a session of another
// lineage, or decided on a session the lane left, appends nothing.
func TestCompressSession(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, idleConfig())
	res, err := f.handler.ResolveSession(ctx, commands.ResolveSession{Source: alice})
	if err != nil {
		t.Fatal(err)
	}
	sid := res.Lane.SessionID
	if _, err := f.handler.CompleteTurn(ctx, commands.CompleteTurn{Key: aliceKey, Outcome: domain.TurnOutcome{InputTokens: 7}}); err != nil {
		t.Fatal(err)
	}
	parents := parentMap{sid: "", "20260509_101000_c1c1c1c1": sid, "20260509_102000_c2c2c2c2": "20260509_101000_c1c1c1c1", "20260509_103000_0e0e0e0e": ""}
	before := len(f.history(t, aliceKey))

	_, err = f.handler.CompressSession(ctx, parents, commands.CompressSession{Key: aliceKey, SessionID: "20260509_103000_0e0e0e0e", PreviousSessionID: sid})
	if !errors.Is(err, domain.ErrNotContinuation) {
		t.Errorf("a split to another lineage error = %v, want ErrNotContinuation", err)
	}
	_, err = f.handler.CompressSession(ctx, parents, commands.CompressSession{Key: aliceKey, SessionID: "20260509_104000_abababab", PreviousSessionID: sid})
	if !errors.Is(err, commands.ErrSessionNotFound) {
		t.Errorf("a split to a session that does not exist error = %v, want ErrSessionNotFound", err)
	}
	if n := len(f.history(t, aliceKey)); n != before {
		t.Fatalf("refused splits appended %d events", n-before)
	}
	got, err := f.handler.CompressSession(ctx, parents, commands.CompressSession{Key: aliceKey, SessionID: "20260509_102000_c2c2c2c2", PreviousSessionID: sid})
	if err != nil {
		t.Fatal(err)
	}
	if got.Lane.SessionID != "20260509_102000_c2c2c2c2" || got.Lane.InputTokens != 7 || countType[events.SessionCompressed](f.history(t, aliceKey)) != 1 {
		t.Errorf("after the split: session %s, input tokens %d; want the continuation with the sums kept", got.Lane.SessionID, got.Lane.InputTokens)
	}
	_, err = f.handler.CompressSession(ctx, parents, commands.CompressSession{Key: aliceKey, SessionID: "20260509_101000_c1c1c1c1", PreviousSessionID: sid})
	if !errors.Is(err, domain.ErrSessionMoved) {
		t.Errorf("a split decided on the session the lane left error = %v, want ErrSessionMoved", err)
	}
}

// TestConsumeFreshReset_Once: after /new the flag is set; the gateway's
// consume clears it with one event; a second consume and the first turn
// add none.
func TestConsumeFreshReset_Once(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, idleConfig())
	if _, err := f.handler.ResolveSession(ctx, commands.ResolveSession{Source: alice}); err != nil {
		t.Fatal(err)
	}
	reset, err := f.handler.ResetSession(ctx, commands.ResetSession{Key: aliceKey})
	if err != nil {
		t.Fatal(err)
	}
	if !reset.Lane.IsFreshReset {
		t.Fatal("after /new is_fresh_reset is false")
	}
	got, err := f.handler.ConsumeFreshReset(ctx, commands.ConsumeFreshReset{Key: aliceKey, SessionID: reset.Lane.SessionID})
	if err != nil || got.Lane.IsFreshReset {
		t.Fatalf("ConsumeFreshReset = %+v, %v; want the flag cleared", got.Lane, err)
	}
	if _, err := f.handler.ConsumeFreshReset(ctx, commands.ConsumeFreshReset{Key: aliceKey}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.handler.StartTurn(ctx, commands.StartTurn{Key: aliceKey}); err != nil {
		t.Fatal(err)
	}
	if n := countType[events.FreshResetConsumed](f.history(t, aliceKey)); n != 1 {
		t.Errorf("fresh_reset_consumed events = %d, want 1", n)
	}
}

// TestSuspendStuckLoop_AgreesWithTheCount and TestFinalizeExpiryOf: the
// gateway's stuck-loop suspension is carried out at hermes' count only;
// its expiry finalization only for an expired session.
func TestSuspendStuckLoop_AgreesWithTheCount(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, idleConfig())
	res, err := f.handler.ResolveSession(ctx, commands.ResolveSession{Source: alice})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.handler.SuspendStuckLoop(ctx, commands.SuspendStuckLoop{Key: aliceKey, Count: 2, Threshold: 3}); !errors.Is(err, domain.ErrNotStuck) {
		t.Errorf("below the count error = %v, want ErrNotStuck", err)
	}
	if _, err := f.handler.FinalizeExpiryOf(ctx, commands.FinalizeExpiryOf{Key: aliceKey, SessionID: res.Lane.SessionID}); !errors.Is(err, domain.ErrNotExpired) {
		t.Errorf("finalizing a live session error = %v, want ErrNotExpired", err)
	}
	f.clock.Advance(61 * time.Minute)
	if _, err := f.handler.FinalizeExpiryOf(ctx, commands.FinalizeExpiryOf{Key: aliceKey, SessionID: res.Lane.SessionID}); err != nil {
		t.Errorf("finalizing the expired session error = %v", err)
	}
	got, err := f.handler.SuspendStuckLoop(ctx, commands.SuspendStuckLoop{Key: aliceKey, Count: 3, Threshold: 3})
	if err != nil || !got.Lane.Suspended || got.Lane.SuspendReason != events.SuspendStuckLoop {
		t.Errorf("at the count: %+v, %v; want suspended stuck_loop", got.Lane, err)
	}
	if _, err := f.handler.SuspendStuckLoop(ctx, commands.SuspendStuckLoop{Key: aliceKey, Count: 0, Threshold: 3}); err != nil {
		t.Errorf("a suspended lane asked again error = %v, want none", err)
	}
	hist := f.history(t, aliceKey)
	if countType[events.Suspended](hist) != 1 || countType[events.ExpiryFinalized](hist) != 1 {
		t.Errorf("suspensions %d, finalizations %d; want 1 and 1", countType[events.Suspended](hist), countType[events.ExpiryFinalized](hist))
	}
}
