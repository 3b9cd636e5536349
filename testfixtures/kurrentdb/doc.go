// Package kurrentdb is a test fixture: an in-process emulator of the
// KurrentDB (EventStoreDB) gRPC protocol, as spoken by
// github.com/EventStore/EventStore-Client-Go/v4 v4.2.0. It is NOT the real
// server and is never linked into the hermes binary (cmd/importcheck lets
// only _test.go files import testfixtures); tests use it because no
// KurrentDB server can be installed where they run.
//
// It serves, on a loopback address, the services the client calls:
//
//   - streams.Streams/Append: expected revision (any, no_stream,
//     stream_exists, exact), the server's idempotency rule (a write whose
//     expected revision is behind the stream succeeds without writing when
//     the events after that revision carry the same ids, in order; with any
//     or stream_exists, when the first id is already in the stream), the
//     wrong-expected-version result with current and expected revisions, and
//     the maximum append size (an InvalidArgument status with the
//     "exception: maximum-append-size-exceeded" trailer).
//   - streams.Streams/Read: stream reads (start, end or a revision,
//     inclusive, forwards or backwards; stream_not_found for a missing
//     stream), $all reads (forwards from a position inclusive, backwards
//     exclusive), and catch-up subscriptions to a stream or to $all
//     (confirmation, exclusive start, server-side stream or event-type
//     filters by prefix or regex, checkpoints every window × multiplier
//     scanned events, caught_up once live).
//   - serverfeatures.ServerFeatures/GetSupportedMethods and gossip.Gossip/Read
//     (one live leader: itself).
//
// Like the real log, $all positions are byte offsets: each record advances
// the position by its size, so positions are ordered but never contiguous,
// and commit equals prepare (no explicit transactions). System events
// ($-prefixed streams and types) are written at start-up and then every
// few appends, so that readers have to filter them out.
//
// Not emulated: deletes and tombstones, stream metadata ($maxAge, $tb, ACLs),
// persistent subscriptions, projections, users other than one configured
// login, links and clustering (gossip names only this node).
//
// [Server.Stop] and [Server.Restart] end every connection and serve the
// same data again on the same address, to test reconnection and resumption.
package kurrentdb
