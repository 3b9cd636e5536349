package sessions

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"hermes/domain"
	"hermes/events"
)

// The gateway_runs table holds every run of every gateway process (the
// runs of Hermes' GatewayRunner through the client), folded from the
// gatewayrun-<gateway> streams: for GET /v1/gateway-runs and the lease
// duty, which looks at the running ones. The ends of those runs count
// toward the stuck-loop escalation like hermes' own restarts, each gateway
// as a node of its own ("gateway:<name>": node ids have no ':').
const gatewayRunsSQL = `CREATE TABLE gateway_runs (
	gateway       TEXT NOT NULL,
	run_id        TEXT NOT NULL,
	pid           INTEGER NOT NULL,
	host          TEXT NOT NULL,
	started_at    INTEGER NOT NULL,
	lease_seconds INTEGER NOT NULL,
	lease_until   INTEGER NOT NULL,
	state         TEXT NOT NULL,
	ended_at      INTEGER NOT NULL,
	restart       INTEGER NOT NULL,
	cause         TEXT NOT NULL,
	cut           TEXT NOT NULL,
	position      INTEGER NOT NULL,
	PRIMARY KEY (gateway, run_id)
);
CREATE INDEX gateway_runs_running ON gateway_runs(gateway) WHERE state = 'running';`

// gatewayCountNode is the node a gateway's run ends count under.
func gatewayCountNode(gateway string) string { return "gateway:" + gateway }

const runColumns = `gateway, run_id, pid, host, started_at, lease_seconds, lease_until, state, ended_at, restart, cause, cut, position`

func runValues(r domain.GatewayRun) ([]any, error) {
	cut, err := json.Marshal(nonNilKeys(r.Cut))
	if err != nil {
		return nil, fmt.Errorf("encode cut lanes of run %s: %w", r.RunID, err)
	}
	return []any{r.Gateway, r.RunID, r.PID, r.Host, nanos(r.StartedAt), r.LeaseSeconds, nanos(r.LeaseUntil), r.State,
		nanos(r.EndedAt), r.Restart, r.Cause, string(cut), int64(r.Position)}, nil
}

func nonNilKeys(keys []string) []string {
	if keys == nil {
		return []string{}
	}
	return keys
}

func scanRun(s scanner) (domain.GatewayRun, error) {
	var r domain.GatewayRun
	var started, until, ended, pos int64
	var cut string
	if err := s.Scan(&r.Gateway, &r.RunID, &r.PID, &r.Host, &started, &r.LeaseSeconds, &until, &r.State, &ended,
		&r.Restart, &r.Cause, &cut, &pos); err != nil {
		return domain.GatewayRun{}, err
	}
	r.StartedAt, r.LeaseUntil, r.EndedAt, r.Position = fromNanos(started), fromNanos(until), fromNanos(ended), uint64(pos)
	if err := json.Unmarshal([]byte(cut), &r.Cut); err != nil {
		return domain.GatewayRun{}, fmt.Errorf("decode cut lanes of run %s: %w", r.RunID, err)
	}
	if len(r.Cut) == 0 {
		r.Cut = nil
	}
	return r, nil
}

type runKey struct{ gateway, runID string }

// run returns the row of a run the batch changes, reading it if need be
// (nil: none).
func (st *batchState) run(ctx context.Context, tx queryer, k runKey) (*domain.GatewayRun, error) {
	if r, ok := st.runs[k]; ok {
		return r, nil
	}
	r, err := scanRun(tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM gateway_runs WHERE gateway = ? AND run_id = ?`, k.gateway, k.runID))
	if errors.Is(err, sql.ErrNoRows) {
		st.runs[k] = nil
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load run %s of %s: %w", k.runID, k.gateway, err)
	}
	st.runs[k] = &r
	return &r, nil
}

// applyGatewayRun folds an event of a gateway's run stream: the run's row,
// and the stuck-loop counts of its ends (see domain.RunEnds).
func (p *Projection) applyGatewayRun(ctx context.Context, tx queryer, st *batchState, gateway string, env events.Envelope) error {
	var k runKey
	switch e := env.Event.(type) {
	case events.GatewayRunStarted:
		k = runKey{gateway, e.RunID}
		r := domain.GatewayRuns{}.Evolve(e).Last
		r.Position = env.Position
		st.runs[k], st.runsDirty[k] = &r, true
	case events.LeaseAcquired, events.LeaseRenewed, events.GatewayRunStopped, events.GatewayRunLost:
		k = runKey{gateway, runOf(e)}
		r, err := st.run(ctx, tx, k)
		if err != nil {
			return err
		}
		if r != nil {
			next := domain.GatewayRuns{Last: *r}.Evolve(e).Last
			next.Position = r.Position
			st.runs[k], st.runsDirty[k] = &next, true
		}
	default:
		return nil
	}
	node := gatewayCountNode(gateway)
	counted, err := st.isStopCounted(ctx, tx, node)
	if err != nil {
		return err
	}
	ends := domain.RunEnds{Counted: counted}
	cut, end := ends.Observe(env.Event)
	if err := st.setStopCounted(ctx, tx, node, ends.Counted); err != nil {
		return err
	}
	if !end {
		return nil
	}
	return st.countStop(ctx, tx, node, cut)
}

// runOf is the run an event of a run stream is about.
func runOf(e events.Event) string {
	switch e := e.(type) {
	case events.LeaseAcquired:
		return e.Holder
	case events.LeaseRenewed:
		return e.Holder
	case events.GatewayRunStopped:
		return e.RunID
	case events.GatewayRunLost:
		return e.RunID
	}
	return ""
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// writeRuns writes the runs the batch changed.
func writeRuns(ctx context.Context, tx execer, st *batchState) error {
	for _, k := range slices.SortedFunc(maps.Keys(st.runsDirty), func(a, b runKey) int {
		return cmp.Or(cmp.Compare(a.gateway, b.gateway), cmp.Compare(a.runID, b.runID))
	}) {
		vals, err := runValues(*st.runs[k])
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO gateway_runs(`+runColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, vals...); err != nil {
			return fmt.Errorf("apply: write run %s of %s: %w", k.runID, k.gateway, err)
		}
	}
	clear(st.runsDirty)
	return nil
}

// GatewayRuns returns the runs of gateway (of every gateway when it is
// ""), newest first, at most limit.
func (p *Projection) GatewayRuns(ctx context.Context, gateway string, limit int) ([]domain.GatewayRun, error) {
	q := `SELECT ` + runColumns + ` FROM gateway_runs`
	args := []any{}
	if gateway != "" {
		q += ` WHERE gateway = ?`
		args = append(args, gateway)
	}
	q += ` ORDER BY position DESC LIMIT ?`
	return p.queryRuns(ctx, q, append(args, limit)...)
}

// RunningGatewayRuns returns the runs the read model shows running.
func (p *Projection) RunningGatewayRuns(ctx context.Context) ([]domain.GatewayRun, error) {
	return p.queryRuns(ctx, `SELECT `+runColumns+` FROM gateway_runs WHERE state = 'running' ORDER BY gateway, run_id`)
}

// GatewayRunUsed reports whether the gateway ever started run runID.
func (p *Projection) GatewayRunUsed(ctx context.Context, gateway, runID string) (bool, error) {
	var n int
	err := p.db.QueryRowContext(ctx, `SELECT count(*) FROM gateway_runs WHERE gateway = ? AND run_id = ?`, gateway, runID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("run %s of %s: %w", runID, gateway, err)
	}
	return n > 0, nil
}

// RestartFailureCount returns one lane's consecutive interrupted restarts.
func (p *Projection) RestartFailureCount(ctx context.Context, key string) (int, error) {
	var n int
	err := p.db.QueryRowContext(ctx, `SELECT count FROM restart_failures WHERE session_key = ?`, key).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("restart failures of %s: %w", key, err)
	}
	return n, nil
}

func (p *Projection) queryRuns(ctx context.Context, q string, args ...any) ([]domain.GatewayRun, error) {
	rows, err := p.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("gateway runs: %w", err)
	}
	defer rows.Close()
	var out []domain.GatewayRun
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("gateway runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// dumpRuns writes every run, ordered, for Dump.
func (p *Projection) dumpRuns(ctx context.Context, w io.Writer) error {
	runs, err := p.queryRuns(ctx, `SELECT `+runColumns+` FROM gateway_runs ORDER BY gateway, run_id`)
	if err != nil {
		return err
	}
	for _, r := range runs {
		vals, err := runValues(r)
		if err != nil {
			return err
		}
		line, err := json.Marshal(vals)
		if err != nil {
			return fmt.Errorf("dump run: %w", err)
		}
		fmt.Fprintf(w, "gateway_run %s\n", line)
	}
	return nil
}
