// Package kurrentdb is a test fixture: an in-process emulator of the
// KurrentDB (EventStoreDB) gRPC protocol, as spoken by
// github.com/EventStore/EventStore-Client-Go/v4 v4.2.0. It is NOT the real
// server and is never linked into the hermes binary (cmd/importcheck lets
// only _test.go files import testfixtures); tests use it because no
// KurrentDB server can be installed where they run. Its rules are read
// from the client's source and from KurrentDB's own (the storage writer's
// commit checks, the index reader, the scavenge calculator).
//
// It serves, on loopback addresses:
//
//   - streams.Streams/Append: expected revision (any, no_stream,
//     stream_exists, exact), the server's idempotency rule (a write whose
//     expected revision is behind the stream succeeds without writing when
//     the events after that revision carry the same ids, in order; with any
//     or stream_exists, when the first id is already in the stream), the
//     wrong-expected-version result with current and expected revisions, the
//     maximum append size (an InvalidArgument status with the
//     "exception: maximum-append-size-exceeded" trailer), and the required
//     type and content-type properties.
//   - streams.Streams/Delete (soft delete): a metadata event {"$tb":
//     long.MaxValue} in the stream's metastream. Reads then answer
//     stream-not-found; the next write (no_stream, any or the last
//     revision; not stream_exists) recreates the stream after its last
//     revision and writes the metadata again with $tb at the first new
//     revision, keeping its other properties — also when the write is to
//     the metastream. Deleting a stream that has neither events nor
//     metadata is a wrong expected version.
//   - streams.Streams/Tombstone (hard delete): a $streamDeleted event
//     numbered long.MaxValue. Reads, appends, deletes and metadata reads or
//     writes of the stream (and of its metastream) then answer
//     stream-deleted (FailedPrecondition, "exception: stream-deleted" and
//     "stream-name" trailers), forever; a stream that never existed can be
//     tombstoned.
//   - Stream metadata: the latest event of $$<stream> (the metastream reads
//     as if $maxCount were 1), parsed as the server does: $tb, $maxCount and
//     $maxAge (whole seconds) hide events from stream reads, forwards and
//     backwards, and from catch-up subscriptions; anything malformed (a
//     string or fractional number, an $acl given as a string, bad JSON)
//     empties the whole metadata, as on the server. $acl, $cacheControl,
//     $tempStream and custom properties are stored and returned as written.
//   - streams.Streams/Read: stream reads (start, end or a revision,
//     inclusive, forwards or backwards; stream_not_found for a missing or
//     soft-deleted stream), $all reads (forwards from a position inclusive,
//     backwards exclusive) of the raw log — metadata hides nothing there,
//     deleted, truncated and expired events stay until a scavenge — and
//     catch-up subscriptions to a stream or to $all (confirmation, exclusive
//     start, server-side stream or event-type filters by prefix or regex,
//     checkpoints every window × multiplier scanned events, caught_up once
//     live). A stream subscription ends with stream-deleted on a tombstoned
//     stream, or after delivering a tombstone that arrives live; on a
//     missing or soft-deleted stream it has nothing until events are
//     written. Subscriptions follow positions and revisions, so a scavenge
//     under them changes nothing but what is left to read.
//   - event_store.client.operations.Operations/StartScavenge and
//     StopScavenge: one scavenge at a time (a second start answers
//     InProgress with the running one's id; stopping an unknown id answers
//     NotFound with "exception: scavenge-not-found"), running in the
//     background and recorded as a node records it: $scavengeStarted and
//     $scavengeCompleted (result, spaceSaved) in $scavenges-<id>, each
//     linked from $scavenges, after a $scavengePoint. It removes from the
//     log and the stream index — the records are dropped, [Server.Storage]
//     no longer holds them — what the server's scavenge removes: every
//     event of a tombstoned stream but its tombstone, and its metastream;
//     events before $tb (a soft-deleted stream's), beyond $maxCount, or as
//     old as $maxAge; every metadata event but the latest. Like the server
//     it never removes a stream's last event, so a soft-deleted stream's
//     last event stays stored and readable in $all after a scavenge; only a
//     tombstone removes them all.
//   - persistent_subscriptions.PersistentSubscriptions/Create: the group is
//     remembered (a second create answers already-exists), never served.
//   - serverfeatures.ServerFeatures/GetSupportedMethods, and gossip.Gossip/
//     Read: one leader, or a leader and the followers of [WithFollowers],
//     all alive, sharing one database; a follower answers persistent
//     subscription management with not-leader and the leader's endpoint.
//
// Like the real log, $all positions are byte offsets: each record advances
// the position by its size, so positions are ordered but never contiguous,
// and commit equals prepare (no explicit transactions). System events
// ($-prefixed streams and types) are written at start-up and then every
// few appends, so that readers have to filter them out.
//
// Not emulated: ACL enforcement (one configured login, with every right;
// $acl is only stored), users other than that login, persistent
// subscription reads, updates, deletes and listings, projections, link
// resolution ($> events are written by the scavenge log but never
// resolved), explicit transactions, the batch append, chunk files (the
// database lives in memory: no on-disk form, no scavenge threshold or
// chunk boundaries, a scavenge is instant once started), the scavenge's
// index-only and merge phases, system streams' default metadata (such as
// $stats' $maxAge), elections and leader changes (the leader is fixed;
// followers serve reads and writes from the same data, with no replication
// lag), client certificates, and the server's HTTP API.
//
// [Server.Stop] and [Server.Restart] end every connection and serve the
// same data again on the same addresses, to test reconnection and
// resumption.
package kurrentdb
