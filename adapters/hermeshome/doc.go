// Package hermeshome reads the home directory of a Python Hermes gateway
// (~/.hermes) for `hermes import`: the routing index sessions/sessions.json,
// the SessionDB state.db (schema v11 and the later versions Hermes writes),
// .restart_failure_counts and .clean_shutdown, and whether a running
// gateway holds the home (gateway.lock, gateway.pid).
//
// It turns what it reads into the import events of package events, cleaning
// what an event cannot hold (invalid UTF-8, NaN and Infinity, negative or
// overflowing counters) and recording every such change in a [Report], so
// nothing is altered or dropped without a word.
//
// It must never write to the Hermes home: state.db is opened read-only and
// the other files are only read. Deciding what to append is the commands'
// business.
package hermeshome
