// Package kurrentdb is the event store on KurrentDB (EventStoreDB), through
// the gRPC client github.com/EventStore/EventStore-Client-Go/v4 v4.2.0. It
// implements the events.Store port and passes the contract suite
// (testfixtures/storetest) against the emulator in testfixtures/kurrentdb,
// and against a real server when HERMES_TEST_KURRENTDB_URL is set.
//
// Mapping onto the port:
//
//   - A stream is a KurrentDB stream of the same name; a version is the
//     KurrentDB revision plus one (the port counts from 1).
//   - A global position is the $all commit position of the event: ordered,
//     unique, but a byte offset, so never contiguous. hermes only compares
//     positions and uses them as exclusive lower bounds, so uint64 works;
//     nothing may compute "the next event" as position+1.
//   - Only hermes' streams are the log: $all reads, Head and subscriptions
//     keep the streams named by [StreamPrefixes] and skip system events
//     ($-streams) and anything else sharing the database.
//   - Appends pass the expected version as the expected revision. The port
//     promises more idempotency than the server (a re-append of ids already
//     in the stream is a duplicate whatever the expected version), so the
//     adapter first looks for the proposed ids among the stream's last
//     [duplicateWindow] events; older duplicates are still caught by the
//     server's own rule when the retry carries its original expected
//     version. Event ids must be UUIDs (KurrentDB stores them as such).
//   - Subscriptions are catch-up subscriptions to $all with a server-side
//     stream-prefix filter; when the connection drops they resubscribe from
//     the last delivered event (or checkpoint), so consumers see no gap and
//     no duplicate.
//   - Erasure ([events.Eraser]) is crypto-shredding (seal.go): an event
//     with personal content is stored as its erased form plus the whole
//     event sealed (AES-256-GCM) under a key of its (stream, class), kept
//     in a key stream outside hermes' streams; an erasure appends a new key
//     and truncates the older ones away, and Purge scavenges every node
//     through the operations service (scavenge.go). See docs/ERASURE.md.
//
// It must not hold state that another node could contradict: every
// decision goes to the server with an expected revision.
package kurrentdb
