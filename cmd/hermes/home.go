package main

import (
	"hermes/adapters/config"
	"hermes/commands"
	"hermes/node"
)

// homeLayout is the home of a command: node.Home, spelled as the commands
// not yet moved onto node.Home spell it.
type homeLayout struct{ dir string }

func (h homeLayout) node() node.Home       { return node.Home{Dir: h.dir} }
func (h homeLayout) hermesDir() string     { return h.node().HermesDir() }
func (h homeLayout) eventsDB() string      { return h.node().EventsDB() }
func (h homeLayout) lanesDB() string       { return h.node().LanesDB() }
func (h homeLayout) stateDB() string       { return h.node().StateDB() }
func (h homeLayout) cleanShutdown() string { return h.node().CleanShutdown() }
func (h homeLayout) ensure() error         { return h.node().Ensure() }
func (h homeLayout) requireStore() error   { return h.node().RequireStore() }

// foreignStateDB is node.ForeignStateDB.
func foreignStateDB(path string) bool { return node.ForeignStateDB(path) }

// writeSideConfig is node.WriteSideConfig.
func writeSideConfig(c config.Config) commands.Config { return node.WriteSideConfig(c) }
