// Package domain is the pure model of a gateway session lane: where a message
// came from (SessionSource), which lane it belongs to (session keys and
// multi-user isolation), when a lane's session must be replaced (reset
// policies), and the lane state machine itself — decide methods that turn a
// command and "now" into events, and Evolve, which folds events into state.
//
// It must stay pure: no clock reads, no randomness, no I/O, no logging, no
// context and no globals. Time, ids and random parts come in as arguments, so
// every rule is testable with a fake clock and any lane can be rebuilt as of
// any event. It imports only package events and the standard library.
package domain
