package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"hermes/adapters/config"
)

// resolveHome finds the home directory: --home, else HERMES_HOME, else
// ~/.hermes.
func resolveHome(g *globalFlags) (homeLayout, error) {
	dir := config.Home(os.Environ(), g.home)
	if dir == "" {
		return homeLayout{}, usageError(errors.New("cannot find a home directory: set --home or HERMES_HOME"))
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return homeLayout{}, usageError(fmt.Errorf("home %s: %w", dir, err))
	}
	return homeLayout{dir: abs}, nil
}

// loadConfig reads the configuration with flag overrides (keyed by config
// path); a bad value is a usage error (exit 2) naming the key.
func loadConfig(g *globalFlags, flags map[string]string) (config.Config, homeLayout, error) {
	h, err := resolveHome(g)
	if err != nil {
		return config.Config{}, homeLayout{}, err
	}
	cfg, err := config.Load(config.LoadOptions{
		Home:       h.dir,
		ConfigPath: g.configPath,
		Environ:    os.Environ(),
		Flags:      storeFlags(g, flags),
	})
	if err != nil {
		return config.Config{}, homeLayout{}, usageError(err)
	}
	return cfg, h, nil
}
