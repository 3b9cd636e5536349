package main

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

// storeSpec says which event store a command works on: the embedded SQLite
// file under the home (url "") or a KurrentDB.
type storeSpec struct {
	url string
}

func (s storeSpec) embedded() bool { return s.url == "" }

// String names the store for logs, without a password.
func (s storeSpec) String() string {
	if s.embedded() {
		return "embedded"
	}
	if at := strings.LastIndex(s.url, "@"); at >= 0 {
		if i := strings.Index(s.url, "://"); i >= 0 && i < at {
			return s.url[:i+3] + "…" + s.url[at:]
		}
	}
	return s.url
}

// resolveStore reads store.url (the --store flag, HERMES_STORE_URL or the
// config file) for the commands that otherwise need only the home.
func resolveStore(g *globalFlags, h homeLayout) (storeSpec, error) {
	if g.store != "" {
		return storeSpec{url: g.store}, nil
	}
	cfg, err := config.Load(config.LoadOptions{Home: h.dir, ConfigPath: g.configPath, Environ: os.Environ()})
	if err != nil {
		return storeSpec{}, usageError(err)
	}
	return storeSpec{url: cfg.Store.URL}, nil
}

// storeFlags adds --store to the flag overrides of config.Load.
func storeFlags(g *globalFlags, flags map[string]string) map[string]string {
	if g.store != "" {
		if flags == nil {
			flags = map[string]string{}
		}
		flags["store.url"] = g.store
	}
	return flags
}

// openStoreReadOnly opens the event store for a command that only reads:
// the SQLite file read-only (it must exist), or a KurrentDB client.
func openStoreReadOnly(ctx context.Context, spec storeSpec, h homeLayout) (events.Store, error) {
	if spec.embedded() {
		if err := h.requireStore(); err != nil {
			return nil, err
		}
		return sqlite.Open(h.eventsDB(), sqlite.WithReadOnly())
	}
	return openKurrentDB(ctx, spec, nil)
}

// openStoreForServe opens the event store hermes serve appends to, under
// the home's gateway lock: the embedded store's only writer.
func openStoreForServe(ctx context.Context, spec storeSpec, h homeLayout, now func() time.Time, log *slog.Logger) (events.Store, error) {
	if spec.embedded() {
		return sqlite.Open(h.eventsDB(), sqlite.WithClock(now), sqlite.WithSoleWriter())
	}
	return openKurrentDB(ctx, spec, log)
}

func openKurrentDB(ctx context.Context, spec storeSpec, log *slog.Logger) (events.Store, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	var opts []kurrentdb.Option
	if log != nil {
		opts = append(opts, kurrentdb.WithLogger(log.With("component", "kurrentdb")))
	}
	s, err := kurrentdb.Open(ctx, spec.url, opts...)
	if err != nil {
		return nil, fmt.Errorf("event store: %w", err)
	}
	return s, nil
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
