package testfixtures

import (
	"context"
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
