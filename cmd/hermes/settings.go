package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"hermes/adapters/config"
	"hermes/node"
)

// resolveHome finds the home directory: --home, else HERMES_HOME, else
// ~/.hermes.
func resolveHome(g *globalFlags) (node.Home, error) {
	dir := config.Home(os.Environ(), g.home)
	if dir == "" {
		return node.Home{}, usageError(errors.New("cannot find a home directory: set --home or HERMES_HOME"))
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return node.Home{}, usageError(fmt.Errorf("home %s: %w", dir, err))
	}
	return node.Home{Dir: abs}, nil
}

// loadConfig reads the configuration with flag overrides (keyed by config
// path); a bad value is a usage error (exit 2) naming the key.
func loadConfig(g *globalFlags, flags map[string]string) (config.Config, node.Home, error) {
	h, err := resolveHome(g)
	if err != nil {
		return config.Config{}, node.Home{}, err
	}
	cfg, err := config.Load(config.LoadOptions{
		Home:       h.Dir,
		ConfigPath: g.configPath,
		Environ:    os.Environ(),
		Flags:      storeFlags(g, flags),
	})
	if err != nil {
		return config.Config{}, node.Home{}, usageError(err)
	}
	return cfg, h, nil
}
