// Package chaos is a Jepsen-style test kit for several hermes nodes on one
// store: a history of client operations (each with its invocation and
// completion times and an outcome: ok, failed, or unknown when the answer
// was lost), a fault-injecting TCP proxy between a node and its store (the
// partition nemesis), and checkers that decide from the history and the log
// alone whether the nodes kept their promises:
//
//   - each lane's operations are linearizable against a model of the lane
//     (porcupine): session id, stream version, open turn;
//   - every acknowledged write is in the log exactly once;
//   - no lane forks (one session_created per key) and at most one turn is
//     open on a lane at any point of its stream;
//   - no message of a turn lands after the turn's end.
//
// The workload and the nemeses that drive real `hermes serve` processes
// live with the process harness (cmd/hermes/chaos_test.go). It is imported
// only from _test.go files.
package chaos
