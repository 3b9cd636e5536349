// Package postgres is an event store of hermes on PostgreSQL: an
// implementation of [events.Store], with batches ([events.BatchAppender]),
// snapshots ([events.SnapshotStore]) and erasure ([events.Eraser]), that
// several hermes processes on several machines share. It passes the
// contract suite in testfixtures/storetest, against a real server that the
// tests start themselves (testfixtures/postgres).
//
// # The store URL
//
// [Open] takes a postgres:// (or postgresql://) URL as pgx reads it: host,
// port, database, user, password or a .pgpass file, sslmode and the other
// TLS parameters, and the PG* environment variables for what the URL
// leaves out. One parameter is the store's own and is taken out before the
// rest reaches pgx: hermes_schema names the schema that holds the store's
// tables (default hermes; lower-case letters, digits and _), so that
// several hermes deployments can share one database, each in its own
// schema (their order locks differ: neither waits for the other). Any other
// parameter pgx does not know is sent to the server as a session setting;
// the store sets statement_timeout (60s), idle_in_transaction_session_timeout
// (30s) and application_name (hermes) unless the URL does.
//
// # Schema
//
// The store creates its schema (when missing: that needs the CREATE right
// on the database) and its tables, and moves them forward by numbered,
// forward-only steps (migrations/*.sql), each in its own transaction under
// an advisory lock of the schema, recorded in schema_migrations: processes
// opening a store together apply each step once. A schema that holds
// other tables, or steps this build does not know, is refused without
// being changed. The tables are events (the log), snapshots, and
// unpurged_erasures (erasures whose old row versions may still be in the
// files).
//
// # The global order
//
// A subscriber reads "position > the last it delivered", so the store must
// never let a position become visible while a lower one can still commit:
// a sequence hands out positions when rows are inserted, but transactions
// commit in another order, and a reader that saw 11 before 10 committed
// would never deliver 10 (Message DB's users and many SQL event stores
// were bitten by exactly that).
//
// Here every transaction that appends takes the order lock — a
// transaction-level advisory lock whose key is derived from the schema —
// before it draws any position, and holds it until it commits or rolls
// back. Positions come from the events table's identity column, whose
// sequence hands out one value at a time (CACHE 1; Open refuses a
// sequence altered to cache more).
//
// Claim: a snapshot that sees an event at position p sees every event at a
// position below p that ever commits. Let T commit the event at p and T'
// the one at p' < p. If T = T' they become visible together. Otherwise T'
// drew p' before T drew p (the sequence only grows), both while holding
// the lock, so T' held it first and let it go before T took it. PostgreSQL
// lets a transaction's locks go only after its commit is flushed and made
// visible (CommitTransaction: RecordTransactionCommit, then
// ProcArrayEndTransaction, then the locks); T commits after it took the
// lock. So T' is visible before T is, and a snapshot taken late enough to
// see T sees T'. A transaction that rolls back leaves its positions
// unused: a gap that no later commit fills, which the port allows
// (positions are ordered cursors, not counts). A hot standby replays
// commit records in the order of the WAL, which is the order of the lock,
// so readers there have the same guarantee. ReadAll, Head and the
// subscriptions therefore read a prefix of the log that can no longer
// change; TestStalledCommitter holds a transaction that has its positions
// before its COMMIT while two other nodes append, and every subscription
// on every node delivers every event once in position order (run 200 times
// in a row under -race with the CPU saturated); its control without the
// lock skips the stalled events for good.
//
// Why not the alternatives: reading only below the oldest transaction in
// flight (pg_snapshot_xmin, as watermill-sql does) makes every
// subscription wait for the oldest writing transaction of the whole
// cluster, of any database and any application, and its positions would
// be transaction ids, which start again in a restored or logically
// replicated copy and would break every checkpoint; gap detection with a
// timeout cannot tell a slow transaction from one rolled back without
// machinery of its own.
//
// The cost is that commits of the store take turns: each holds the lock
// through its WAL flush, on every node. On the shared 2-core test machine
// (load 4), BenchmarkRawCommit measured 10,156 one-row commits/s from 16
// connections without the lock (PostgreSQL's group commit shares flushes)
// and 4,017 with it. The store gets the throughput back within a node by
// sharing transactions: one writer connection per Store takes every
// append queued at that moment into one transaction (16 appenders: 12 to
// 16 appends per transaction, 13,000 to 20,600 events/s, half to four
// fifths of the SQLite store's rate in the same runs). Across nodes it
// cannot: three nodes reached about half of one (BENCHMARKS.md).
// A transaction that keeps the lock without committing holds every
// append of the store, on every node, until the server ends it
// (idle_in_transaction_session_timeout, statement_timeout).
//
// # Appends
//
// A transaction normally takes one round trip (fast.go): the lock, one
// INSERT that reads each stream's version after the lock was granted,
// checks the expected version, leaves out any append of a stream whose id
// is already stored, and numbers the rows in the order of the appends, and
// the notification, committed together at the end of the pipeline. What it
// leaves out, appends that erase, and streams appended to twice in one
// transaction go through the checked path (writer.go): the same lock, the
// versions and ids read first, each append decided in Go — a duplicate
// answered with its original places, an id of another stream or a partial
// duplicate refused with events.ErrInvalidAppend, a wrong expected version
// with events.ErrWrongExpectedVersion — then the rows, the erasures and the
// commit. Event ids are unique across the store. The unique indexes on
// (stream, version) and event_id stop a fork even against a writer that
// bypassed the lock.
//
// A transaction that fails because the connection was lost, the server is
// restarting or asks for a retry (08xxx, 57P01–57P03, 40001, 40P01, 55P03,
// 25P03) runs again on a new connection, for up to 15 s; the ids make it
// idempotent, and an append whose first COMMIT did reach the log is
// answered with its places (not as a duplicate: the writer remembers the
// positions it drew). disk_full (53100) and io_error (58030) are
// events.ErrStorageFull: nothing is appended, and the same append succeeds
// once space returns (TestStorageFull fills a tmpfs tablespace). Bounds:
// an event of data and metadata over [MaxEventSize], a stream name over 1
// kB, an id or type over 256 bytes, or text PostgreSQL cannot store (NUL,
// invalid UTF-8) is refused with events.ErrInvalidAppend before the writer.
//
// # Subscriptions
//
// A subscription pulls by position, so catch-up and live are one loop. It
// waits for a commit of its own Store, a notification on the store's
// channel (LISTEN/NOTIFY, one listening connection per Store, for the
// commits of other processes), or the poll interval, which covers what a
// lost listening connection missed (the listener also wakes every
// subscription once it listens again). A read that fails with a lost
// connection or a restarting server is made again from the same position
// for up to a minute: a reconnection loses and repeats nothing
// (TestTerminatedConnections, TestRestartUnderSubscriber).
//
// # Erasure
//
// An erasure appended to a stream rewrites the stream's earlier events in
// the transaction of the append, as the SQLite store does (same type,
// stream, version, position and id; the erasure's id in metadata.redacted),
// deletes the stream's snapshot, and records the erasure in
// unpurged_erasures. The UPDATE leaves the old row versions in the table
// until they are removed, and a plain VACUUM is not enough: it makes them
// unreadable but, compacting a page, leaves the bytes of some of them in
// the page's free space (TestPurge_PlainVacuumLeavesTheBytes). So Purge,
// when an erasure is unpurged (by any node), waits until no session,
// replication slot or prepared transaction of the database holds a
// snapshot from before the call (a rewrite keeps the old versions for
// them: TestPurgeWaitsForOlderSnapshots), then rewrites the events and
// snapshots tables with VACUUM FULL: new files hold only the live rows, the
// old ones are emptied at once, indexes and TOAST tables are rebuilt.
// After it no file of the data directory outside pg_wal holds erased
// content (TestPurgeLeavesNoTraceInTheDataFiles, a byte search of every
// file). The rewrite takes an ACCESS EXCLUSIVE lock on each table while it
// copies it: appends and reads of the store, on every node, wait for it;
// it needs free space for a copy of the tables; its time grows with the
// log (figures in BENCHMARKS.md). The store's role must own the tables.
//
// What stays where hermes cannot reach, and how an operator bounds it:
//
//   - pg_wal holds the records of the original inserts (and full-page
//     images of the pages that held them) until checkpoints make the
//     segments unneeded and they are recycled; a recycled segment is
//     renamed and overwritten as new WAL is written, not zeroed. Bound it
//     with checkpoint_timeout and max_wal_size (and wal_keep_size, 0 by
//     default); after an erasure an operator can run CHECKPOINT, SELECT
//     pg_switch_wal(), and CHECKPOINT again so that the segments holding
//     the old records can go. A replication slot keeps WAL for as long as
//     its consumer lags.
//   - The WAL archive (archive_command) and base backups hold the old rows
//     for as long as they are kept: their retention is the bound.
//   - Streaming replicas replay the rewrite (their tables are rewritten
//     too) but keep WAL of their own, as above. Logical replication
//     subscribers receive the UPDATE and need their own VACUUM FULL.
//   - Below the file API (file system journals, SSD remapping, volume
//     snapshots), as for the SQLite store (docs/ERASURE.md).
//
// This package must not draw a position outside a transaction holding the
// order lock, must not let a subscriber's pace reach the writer, must not
// hold a transaction open while it waits for anything but the server, and
// must not import other adapters or anything above package events.
package postgres
