// Package sessions is the lane read model of hermes: one row per session key
// with every SessionEntry field (the sessions.json-equivalent state),
// queryable by key, by current session id and by activity; the stuck-loop
// restart counters; and the compatibility exports Hermes' own tools read —
// <home>/sessions/sessions.json and <home>/.restart_failure_counts.
//
// Rows are folded from lane and gateway events with the domain's Evolve and
// guarded by the stream version they have seen, so duplicate deliveries
// change nothing. The database is rebuildable from the log, so it runs with
// synchronous=NORMAL. This package never appends events.
package sessions
