package main

import (
	"os"

	"hermes/adapters/config"
	"hermes/node"
)

// resolveStore reads store.url (the --store flag, HERMES_STORE_URL or the
// config file) for the commands that otherwise need only the home.
func resolveStore(g *globalFlags, h node.Home) (node.StoreSpec, error) {
	if g.store != "" {
		return node.StoreSpec{URL: g.store}, nil
	}
	cfg, err := config.Load(config.LoadOptions{Home: h.Dir, ConfigPath: g.configPath, Environ: os.Environ()})
	if err != nil {
		return node.StoreSpec{}, usageError(err)
	}
	return node.StoreSpec{URL: cfg.Store.URL}, nil
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
