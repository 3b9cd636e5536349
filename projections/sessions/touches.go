package sessions

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"

	"hermes/events"
)

// A resolve of an existing lane appends one Touched event, so under load
// most live batches are touches of lanes spread over the whole table.
// Reading each lane's full row to move two columns cost a third of the
// projection's time; a lane whose events in a batch are all Touched is
// written by one narrow UPDATE instead, without reading its row.

// pendingTouch is what a batch's Touched events leave on one lane: its
// last version and time, and the last prompt size given.
type pendingTouch struct {
	version uint64
	at      time.Time
	tokens  *int64
	// envs are the lane's envelopes, replayed through the full path
	// when the lane has no row to update.
	envs []events.Envelope
}

// planTouches returns the lanes of batch (above checkpoint) whose events
// are all Touched, or nil when the batch holds anything but lane events
// (a gateway event may read lane rows while the batch is folded).
func planTouches(batch []events.Envelope, checkpoint uint64) map[string]*pendingTouch {
	var touches map[string]*pendingTouch
	other := map[string]bool{}
	for _, env := range batch {
		if env.Position <= checkpoint {
			continue
		}
		key, ok := events.SessionKeyOf(env.Stream)
		if !ok {
			return nil
		}
		if other[key] {
			continue
		}
		e, isTouch := env.Event.(events.Touched)
		if !isTouch {
			other[key] = true
			delete(touches, key)
			continue
		}
		if touches == nil {
			touches = map[string]*pendingTouch{}
		}
		t := touches[key]
		if t == nil {
			t = &pendingTouch{}
			touches[key] = t
		}
		t.version, t.at = env.Version, e.At
		if e.LastPromptTokens != nil {
			t.tokens = e.LastPromptTokens
		}
		t.envs = append(t.envs, env)
	}
	return touches
}

// writeTouches updates the touched lanes in key order. A lane with no row
// at a lower version (none, or the row is already past these events) is
// folded through the full path instead, so the result is the same as if
// its row had been read: st.rows then holds it, to be written by
// writeRows.
func (p *Projection) writeTouches(ctx context.Context, tx *sql.Tx, st *batchState) error {
	if len(st.touches) == 0 {
		return nil
	}
	update, err := tx.PrepareContext(ctx, `UPDATE lanes SET version = ?, updated_at = ?,
		last_prompt_tokens = coalesce(?, last_prompt_tokens) WHERE session_key = ? AND version < ?`)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	defer update.Close()
	for _, key := range slices.Sorted(maps.Keys(st.touches)) {
		t := st.touches[key]
		res, err := update.ExecContext(ctx, int64(t.version), nanos(t.at), t.tokens, key, int64(t.version))
		if err != nil {
			return fmt.Errorf("apply: touch lane %s: %w", key, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("apply: touch lane %s: %w", key, err)
		} else if n == 1 {
			continue
		}
		for _, env := range t.envs {
			if err := p.applyLane(ctx, tx, st, key, env); err != nil {
				return err
			}
		}
	}
	return nil
}
