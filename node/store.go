package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"hermes/adapters/config"
	"hermes/adapters/eventstore/kurrentdb"
	"hermes/adapters/eventstore/sqlite"
	"hermes/events"
)

// StoreSpec says which event store a home uses: the embedded SQLite file
// under the home (URL "") or a KurrentDB.
type StoreSpec struct {
	URL string
}

// Embedded reports whether the store is the SQLite file under the home.
func (s StoreSpec) Embedded() bool { return s.URL == "" }

// String names the store for logs, without a password.
func (s StoreSpec) String() string {
	if s.Embedded() {
		return "embedded"
	}
	if at := strings.LastIndex(s.URL, "@"); at >= 0 {
		if i := strings.Index(s.URL, "://"); i >= 0 && i < at {
			return s.URL[:i+3] + "…" + s.URL[at:]
		}
	}
	return s.URL
}

// OpenStoreReadOnly opens the event store for a command that only reads:
// the SQLite file read-only (it must exist), or a KurrentDB client.
func OpenStoreReadOnly(ctx context.Context, spec StoreSpec, h Home) (events.Store, error) {
	if spec.Embedded() {
		if err := h.RequireStore(); err != nil {
			return nil, err
		}
		return sqlite.Open(h.EventsDB(), sqlite.WithReadOnly())
	}
	return openKurrentDB(ctx, spec, nil)
}

// openStoreForServe opens the event store hermes serve appends to, under
// the home's gateway lock: the embedded store's only writer.
func openStoreForServe(ctx context.Context, spec StoreSpec, h Home, now func() time.Time, log *slog.Logger) (events.Store, error) {
	if spec.Embedded() {
		return sqlite.Open(h.EventsDB(), sqlite.WithClock(now), sqlite.WithSoleWriter())
	}
	return openKurrentDB(ctx, spec, log)
}

func openKurrentDB(ctx context.Context, spec StoreSpec, log *slog.Logger) (events.Store, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	var opts []kurrentdb.Option
	if log != nil {
		opts = append(opts, kurrentdb.WithLogger(log.With("component", "kurrentdb")))
	}
	s, err := kurrentdb.Open(ctx, spec.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("event store: %w", err)
	}
	return s, nil
}

// damagedLogError is the refusal to serve from a damaged log, naming the
// damage and the way out.
func damagedLogError(h Home, err error) error {
	return fmt.Errorf("%w\nThe event log is the only truth and hermes will not serve from a damaged one.\n"+
		"  see the damage:   hermes check --home %s\n"+
		"  restore a backup: hermes restore <backup> --home %s --force\n"+
		"  or salvage:       hermes check --home %s --salvage <new file> (every readable event)", err, h.Dir, h.Dir, h.Dir)
}

// nodeID is node.id, or one derived from the host name.
func nodeID(cfg config.Config) string {
	if cfg.Node.ID != "" {
		return cfg.Node.ID
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "node"
	}
	var b strings.Builder
	for _, r := range strings.ToLower(host) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteRune('-')
		}
	}
	return b.String()
}
