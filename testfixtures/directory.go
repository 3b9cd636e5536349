package testfixtures

import (
	"context"
	"errors"
	"slices"

	"hermes/events"
)

// StoreDirectory lists lanes by scanning the whole log: the slow, obviously
// right LaneDirectory that read models are compared with.
type StoreDirectory struct{ Store events.Store }

// SessionKeys returns every session key with a lane stream, sorted.
func (d StoreDirectory) SessionKeys(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	var after uint64
	for {
		page, err := d.Store.ReadAll(ctx, after, 1024)
		if err != nil {
			return nil, err
		}
		for _, env := range page {
			if key, ok := events.SessionKeyOf(env.Stream); ok {
				seen[key] = true
			}
			after = env.Position
		}
		if len(page) < 1024 {
			break
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

// OpenTurnKeys lists every lane (the commands read each and keep those with
// a turn open): the slow, obviously right OpenTurnDirectory.
func (d StoreDirectory) OpenTurnKeys(ctx context.Context) ([]string, error) {
	return d.SessionKeys(ctx)
}

// RunUsed reports whether the log holds a start of run runID of gateway.
func (d StoreDirectory) RunUsed(ctx context.Context, gateway, runID string) (bool, error) {
	envs, err := d.Store.ReadStream(ctx, events.GatewayRunStream(gateway), 1, 1<<20, events.Forwards)
	if errors.Is(err, events.ErrStreamNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, env := range envs {
		if e, ok := env.Event.(events.GatewayRunStarted); ok && e.RunID == runID {
			return true, nil
		}
	}
	return false, nil
}
