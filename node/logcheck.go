package node

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"hermes/adapters/eventstore/sqlite"
)

// The embedded log is checked whole, as 'hermes check' does (sqlite
// Store.Verify: SQLite's integrity check, every event read and decoded,
// positions and versions without holes), because damage outside the tail
// Open reads passes every cheaper check and can take writes it then loses:
// 32 bytes flipped in a leaf page of the (stream, version) index let 60
// resolves answer 200 and left the file unreadable.
//
// A log of at most startCheckMax bytes is checked before recovery appends
// anything, and damage refuses the start. A bigger one is checked in the
// background from the start of Run (the whole check takes seconds a million
// events); damage found there latches in the store, which refuses every
// write from then on (503, naming hermes check, restore and --salvage),
// and /readyz says damaged.

// verifyLogAtStart checks a small embedded log before anything is appended
// and reports whether the background check is owed instead.
func (rt *runtime) verifyLogAtStart(ctx context.Context) (later bool, err error) {
	s, ok := rt.raw.(*sqlite.Store)
	if !ok {
		return false, nil
	}
	if dbBytes(rt.home.EventsDB()) > rt.startCheckMax {
		return true, nil
	}
	start := time.Now()
	if _, err := s.Verify(ctx); err != nil {
		return false, err
	}
	rt.log.Info("event log passed its check", "took", time.Since(start).Round(time.Millisecond))
	return false, nil
}

// verifyLogLater is the background check of a log too big to check before
// serving.
func (rt *runtime) verifyLogLater(ctx context.Context, log *slog.Logger) {
	s, ok := rt.raw.(*sqlite.Store)
	if !ok {
		return
	}
	start := time.Now()
	_, err := s.Verify(ctx)
	switch {
	case ctx.Err() != nil:
	case s.Damaged() != nil:
		log.Error("the event log is damaged: hermes takes no more writes", "err", damagedLogError(rt.home, err))
	case err != nil:
		log.Warn("event log check could not run", "err", err)
	default:
		log.Info("event log passed its check", "took", time.Since(start).Round(time.Millisecond))
	}
}

// logDamaged is the damage the embedded store met, or nil (api.Deps.LogDamaged).
func (rt *runtime) logDamaged() error {
	if s, ok := rt.raw.(*sqlite.Store); ok {
		if err := s.Damaged(); err != nil {
			return fmt.Errorf("event log: %w", err)
		}
	}
	return nil
}
