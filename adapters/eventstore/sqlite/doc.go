// Package sqlite is the embedded event store of hermes: an implementation of
// [events.Store] on one SQLite file, for a single machine.
//
// Every append goes through one writer that owns the only write connection
// of the process. Its goroutine gathers the appends waiting at that moment
// into one BEGIN IMMEDIATE transaction (group commit), so durability
// (synchronous=FULL) costs one fsync per batch rather than one per append.
// An append that finds the writer idle, with nobody to group with, commits
// on its own goroutine instead, holding the writer as its goroutine would
// (writer.go: commitInline), which spares two goroutine hand-offs.
// Global positions are assigned by AUTOINCREMENT inside that transaction;
// SQLite admits one writer at a time, so commit order is position order and
// a catch-up reader that reads "position > checkpoint" can never skip an
// event that commits later.
//
// A batch of many streams (AppendBatch: the sweeps) is a job of the writer
// of its own: the caller hands over chunks of encoded appends while the
// writer inserts the earlier ones into one open transaction (batch.go). The
// rows of a transaction go in with multi-row INSERT OR ROLLBACK, which
// SQLite runs without a statement journal; a constraint failure rolls the
// transaction back and it is replayed one append at a time (commit.go).
//
// Other processes may open the same file (a second server, the CLI that
// tails the log with [WithReadOnly]). SQLite's file locks serialise their
// writers (BEGIN IMMEDIATE, a busy timeout, bounded retries). The writer
// caches the last version of streams so that expected-version checks need
// no query; it drops the cache whenever PRAGMA data_version says another
// connection committed (unless opened WithSoleWriter, as hermes serve opens
// it under the home's lock), confirms from the file any mismatch before refusing
// an append, and the UNIQUE (stream, version) constraint stops a fork even
// if the cache were wrong. Subscriptions poll, so they also see appends made
// elsewhere.
//
// The schema moves by numbered, forward-only migrations (migrations.go),
// applied by the writer at open, each in its own transaction; a log written
// by the first schema is kept in testdata/schema-1 and must keep opening
// and replaying to the same state.
//
// This package must not assign positions outside the write transaction, must
// not hold a read transaction open while waiting for a consumer (it would pin
// the WAL), must not let a subscriber's pace reach the writer, and must not
// import other adapters or anything above package events.
package sqlite
