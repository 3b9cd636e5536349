package sessions

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
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
	counts, err := p.RestartFailures(ctx)
	if err != nil {
		return err
	}
	for _, k := range sortedKeys(counts) {
		fmt.Fprintf(w, "restart_failures %q %d\n", k, counts[k])
	}
	var counted string
	err = p.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'stop_counted'`).Scan(&counted)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("dump stop_counted: %w", err)
	}
	fmt.Fprintf(w, "stop_counted %t\n", counted == "1")
	return nil
}

func sortedKeys(m map[string]int) []string {
	return slices.Sorted(maps.Keys(m))
}
