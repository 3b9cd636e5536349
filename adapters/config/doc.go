// Package config loads hermes' settings from $HERMES_HOME/config.yaml, the
// HERMES_* environment and already-parsed command-line flags, in that
// rising order of precedence over the built-in defaults, and validates
// them.
//
// config.yaml belongs to Python Hermes: hermes reads it the way PyYAML does
// (yes/no/on/off are booleans, explicit nulls mean "the default"), ignores
// every key it does not know, and never writes it. Every problem is reported
// as an *Error naming where the value came from (file and line, environment
// variable or flag), the key path and the reason, so the CLI can print one
// line per problem and exit with its usage code.
//
// The package reads files and the environment it is given; it does not
// call os.Getenv, parse flags, start anything or hold state. It imports no
// other hermes package (STYLE.md lets an adapter import the ports of
// commands, projections and events, never the domain): turning a Config
// into the write side's commands.Config is package node's job
// (node.WriteSideConfig, node/settings.go).
package config
