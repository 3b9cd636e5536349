package sessions

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Dump writes a canonical text dump of the read model (every lane row and
// restart counter, ordered by key, the checkpoint, and whether the current
// run's stop has been counted), so two read models can be compared byte for
// byte.
func (p *Projection) Dump(ctx context.Context, w io.Writer) error {
	cp, err := p.Checkpoint(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "projection %s checkpoint %d\n", Name, cp)
	rows, err := p.query(ctx, `SELECT `+laneColumns+` FROM lanes ORDER BY session_key`)
	if err != nil {
		return err
	}
	for _, r := range rows {
		vals, err := laneValues(r)
		if err != nil {
			return err
		}
		line, err := json.Marshal(vals)
		if err != nil {
			return fmt.Errorf("dump lane: %w", err)
		}
		fmt.Fprintf(w, "lane %s\n", line)
	}
	counts, err := p.restartFailureNodes(ctx)
	if err != nil {
		return err
	}
	for _, c := range counts {
		if c.node == "" {
			fmt.Fprintf(w, "restart_failures %q %d\n", c.key, c.count)
		} else {
			fmt.Fprintf(w, "restart_failures %q %d node %q\n", c.key, c.count, c.node)
		}
	}
	if err := p.dumpRuns(ctx, w); err != nil {
		return err
	}
	var counted string
	err = p.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'stop_counted'`).Scan(&counted)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("dump stop_counted: %w", err)
	}
	fmt.Fprintf(w, "stop_counted %t\n", counted == "1")
	// The other nodes' (several nodes on one store), by node.
	metaRows, err := p.db.QueryContext(ctx, `SELECT key, value FROM meta WHERE key LIKE 'stop\_counted/%' ESCAPE '\' ORDER BY key`)
	if err != nil {
		return fmt.Errorf("dump stop_counted: %w", err)
	}
	defer metaRows.Close()
	for metaRows.Next() {
		var key, v string
		if err := metaRows.Scan(&key, &v); err != nil {
			return fmt.Errorf("dump stop_counted: %w", err)
		}
		fmt.Fprintf(w, "stop_counted %q %t\n", strings.TrimPrefix(key, "stop_counted/"), v == "1")
	}
	return metaRows.Err()
}

// nodeCount is one lane's stuck-loop count and the node that recorded it.
type nodeCount struct {
	key, node string
	count     int
}

func (p *Projection) restartFailureNodes(ctx context.Context) ([]nodeCount, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT session_key, count, node FROM restart_failures ORDER BY session_key`)
	if err != nil {
		return nil, fmt.Errorf("restart failures: %w", err)
	}
	defer rows.Close()
	var out []nodeCount
	for rows.Next() {
		var c nodeCount
		if err := rows.Scan(&c.key, &c.count, &c.node); err != nil {
			return nil, fmt.Errorf("restart failures: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
