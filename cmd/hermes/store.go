package main

import (
	"context"
	"os"

	"hermes/adapters/config"
	"hermes/events"
	"hermes/node"
)

// storeSpec says which event store a command works on (node.StoreSpec).
type storeSpec struct {
	url string
}

func (s storeSpec) node() node.StoreSpec { return node.StoreSpec{URL: s.url} }
func (s storeSpec) embedded() bool       { return s.node().Embedded() }
func (s storeSpec) String() string       { return s.node().String() }

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

// openStoreReadOnly opens the event store for a command that only reads.
func openStoreReadOnly(ctx context.Context, spec storeSpec, h homeLayout) (events.Store, error) {
	return node.OpenStoreReadOnly(ctx, spec.node(), h.node())
}
