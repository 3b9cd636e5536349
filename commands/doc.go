// Package commands is the write side of hermes: one handler method per
// SessionStore operation of the gateway, each taking one command struct
// that carries its command id. Each loads a lane stream, asks the
// domain to decide with "now" from an injected clock, appends the decided
// events with the expected version, and retries a bounded number of times
// when another writer got there first.
//
// It holds no rules of its own (those are in domain) and no storage or
// transport code (those are adapters and api); it declares the ports it
// needs (EventLog: append and read a stream, not the whole events.Store)
// and receives their implementations from cmd.
package commands
