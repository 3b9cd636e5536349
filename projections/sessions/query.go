package sessions

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"hermes/domain"
)

// ErrNotFound: no live lane matches.
var ErrNotFound = errors.New("session lane not found")

// Lane returns the live lane of a session key.
func (p *Projection) Lane(ctx context.Context, key string) (Row, error) {
	r, err := scanLane(p.db.QueryRowContext(ctx, `SELECT `+laneColumns+` FROM lanes WHERE session_key = ? AND pruned = 0`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, fmt.Errorf("lane %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return Row{}, fmt.Errorf("lane %s: %w", key, err)
	}
	return r, nil
}

// BySessionID returns the live lane whose current session is id
// (lookup_by_session_id).
func (p *Projection) BySessionID(ctx context.Context, id string) (Row, error) {
	if id == "" {
		return Row{}, fmt.Errorf("lane of session %q: %w", id, ErrNotFound)
	}
	st, err := p.stmts.Stmt(ctx, p.db, `SELECT `+laneColumns+` FROM lanes WHERE session_id = ? AND pruned = 0 ORDER BY updated_at DESC LIMIT 1`)
	if err != nil {
		return Row{}, fmt.Errorf("lane of session %s: %w", id, err)
	}
	r, err := scanLane(st.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, fmt.Errorf("lane of session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Row{}, fmt.Errorf("lane of session %s: %w", id, err)
	}
	return r, nil
}

// List returns live lanes updated at or after since (all when since is the
// zero time), newest first (list_sessions).
func (p *Projection) List(ctx context.Context, since time.Time) ([]Row, error) {
	return p.query(ctx, `SELECT `+laneColumns+` FROM lanes WHERE pruned = 0 AND updated_at >= ? ORDER BY updated_at DESC, session_key`, nanos(since))
}

// Resumable returns the lanes to auto-continue after a restart: resume
// pending, not suspended, marked for one of the three auto-resume reasons,
// within the freshness window at now (window <= 0: any age).
func (p *Projection) Resumable(ctx context.Context, window time.Duration, now time.Time) ([]Row, error) {
	rows, err := p.query(ctx, `SELECT `+laneColumns+` FROM lanes WHERE pruned = 0 AND resume_pending = 1 AND suspended = 0 ORDER BY updated_at DESC, session_key`)
	if err != nil {
		return nil, err
	}
	out := rows[:0]
	for _, r := range rows {
		if domain.AutoResumeReason(r.Lane.ResumeReason) && r.Lane.ResumeFresh(window, now) {
			out = append(out, r)
		}
	}
	return out, nil
}

// OpenTurns returns the live lanes with a turn started and not completed.
func (p *Projection) OpenTurns(ctx context.Context) ([]Row, error) {
	return p.query(ctx, `SELECT `+laneColumns+` FROM lanes WHERE pruned = 0 AND open_turn_id != '' ORDER BY session_key`)
}

// SessionKeys lists every live lane's key (commands.LaneDirectory).
func (p *Projection) SessionKeys(ctx context.Context) ([]string, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT session_key FROM lanes WHERE pruned = 0 ORDER BY session_key`)
	if err != nil {
		return nil, fmt.Errorf("list lanes: %w", err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("list lanes: %w", err)
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// Count returns the number of live lanes.
func (p *Projection) Count(ctx context.Context) (int, error) {
	var n int
	if err := p.db.QueryRowContext(ctx, `SELECT count(*) FROM lanes WHERE pruned = 0`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count lanes: %w", err)
	}
	return n, nil
}

// RestartFailures returns the consecutive interrupted restarts per lane
// (only lanes with a count).
func (p *Projection) RestartFailures(ctx context.Context) (map[string]int, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT session_key, count FROM restart_failures ORDER BY session_key`)
	if err != nil {
		return nil, fmt.Errorf("restart failures: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return nil, fmt.Errorf("restart failures: %w", err)
		}
		out[k] = n
	}
	return out, rows.Err()
}

// StuckLanes returns the lanes whose consecutive interrupted restarts reached
// threshold (recovery.stuck_loop_threshold).
func (p *Projection) StuckLanes(ctx context.Context, threshold int) ([]string, error) {
	counts, err := p.RestartFailures(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for k, n := range counts {
		if n >= threshold {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (p *Projection) query(ctx context.Context, q string, args ...any) ([]Row, error) {
	rows, err := p.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("query lanes: %w", err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		r, err := scanLane(rows)
		if err != nil {
			return nil, fmt.Errorf("query lanes: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
