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
	"hermes/adapters/eventstore/postgres"
	"hermes/adapters/eventstore/sqlite"
	"hermes/events"
)

// StoreSpec says which event store a home uses: the embedded SQLite file
// under the home (URL ""), a PostgreSQL database (postgres://,
// postgresql://) or a KurrentDB (esdb://, kurrentdb://, …).
type StoreSpec struct {
	URL string
}

// Embedded reports whether the store is the SQLite file under the home.
func (s StoreSpec) Embedded() bool { return s.URL == "" }

// Postgres reports whether the store is a PostgreSQL database.
func (s StoreSpec) Postgres() bool {
	scheme, _, _ := strings.Cut(s.URL, "://")
	return strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql")
}

// String names the store for logs, without a password.
func (s StoreSpec) String() string {
	if s.Embedded() {
		return "embedded"
	}
	u := s.URL
	if at := strings.LastIndex(u, "@"); at >= 0 {
		if i := strings.Index(u, "://"); i >= 0 && i < at {
			u = u[:i+3] + "…" + u[at:]
		}
	}
	// pgx also takes the password as a query parameter.
	if q := strings.Index(u, "?"); q >= 0 && s.Postgres() {
		params := strings.Split(u[q+1:], "&")
		for i, p := range params {
			if k, _, ok := strings.Cut(p, "="); ok && strings.EqualFold(k, "password") {
				params[i] = k + "=…"
			}
		}
		u = u[:q+1] + strings.Join(params, "&")
	}
	return u
}

// OpenStoreReadOnly opens the event store for a command that only reads:
// the SQLite file read-only (it must exist), a PostgreSQL store read-only
// (its schema must be at this build's step), or a KurrentDB client.
func OpenStoreReadOnly(ctx context.Context, spec StoreSpec, h Home) (events.Store, error) {
	if spec.Embedded() {
		if err := h.RequireStore(); err != nil {
			return nil, err
		}
		return sqlite.Open(h.EventsDB(), sqlite.WithReadOnly())
	}
	if spec.Postgres() {
		return openPostgres(ctx, spec, postgres.WithReadOnly())
	}
	return openKurrentDB(ctx, spec, nil)
}

// openStoreForServe opens the event store hermes serve appends to, under
// the home's gateway lock: the embedded store's only writer.
func openStoreForServe(ctx context.Context, spec StoreSpec, h Home, now func() time.Time, log *slog.Logger) (events.Store, error) {
	if spec.Embedded() {
		return sqlite.Open(h.EventsDB(), sqlite.WithClock(now), sqlite.WithSoleWriter())
	}
	if spec.Postgres() {
		return openPostgres(ctx, spec, postgres.WithClock(now))
	}
	return openKurrentDB(ctx, spec, log)
}

func openPostgres(ctx context.Context, spec StoreSpec, opts ...postgres.Option) (events.Store, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	s, err := postgres.Open(ctx, spec.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("event store %s: %w", spec, err)
	}
	return s, nil
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
