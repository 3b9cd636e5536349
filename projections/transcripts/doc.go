// Package transcripts is the transcripts read model of hermes: Hermes'
// state.db (schema version 11: sessions, messages, both FTS5 indexes,
// state_meta, schema_version) folded from the lane and transcript streams,
// with the queries Hermes' SessionDB answers (messages, conversation replay,
// full-text search, titles, lineage, rewind targets, export, pruning).
//
// The file is Hermes' own format on purpose: Hermes' tools, and people used
// to them, can open it. What hermes needs beyond version 11 follows Hermes'
// later versions (messages.active and sessions.rewind_count for the soft
// rewind) or is named hermes_*, which Hermes never reads: the stream-version
// guard, the lane origins, the map from an event's global position to the
// message row ids it inserted, and an index on messages(timestamp) that lets
// the substring search of short CJK terms (newest first) stop after a page
// of matches instead of reading every message.
//
// Every batch is one write transaction that also records the checkpoint
// (state_meta hermes_checkpoint) and the projection name (hermes_projection),
// so a crash keeps both or neither. An envelope at or below the checkpoint,
// or at or below the version already applied for its stream, changes
// nothing, so any redelivery is harmless; a rebuild from position 0 yields
// the same rows, row ids included (Dump compares two files byte for byte).
// When the stored name is not [Name] the file is emptied and rebuilt.
//
// Messages appended next to each other in a batch are inserted together,
// a few INSERT statements per batch instead of one per message: FTS5 writes
// its pending index data out as a new segment at every statement savepoint,
// and a statement that fires the FTS triggers opens one. One-by-one inserts
// cost two tiny FTS segments (and their later merging) per message. Any
// other change to messages or sessions first inserts the gathered ones, so
// the result is the one-event-at-a-time result (the property test checks
// it). The trigram index still dominates the cost of a message.
//
// A catch-up from position 0 (a rebuild, a new [Name], a file rebuilt on
// open) runs as a bulk load (bulk.go): the FTS triggers are dropped, the
// batches commit every 64k events, and each FTS index is built in a
// scratch file by a builder of its own (ftsbuilder.go) from the messages
// committed so far, while the events are still applied; at the end the
// builders index the rest and put right what changed behind them, their
// shadow tables are copied in and the triggers come back from schema.sql.
// A load that did not finish is finished by Open, which builds both
// indexes from the messages table at once. The rows, FTS content and bm25
// statistics are those of the incremental path (tests compare dumps,
// integrity checks and search pages).
//
// Search (search.go) returns Hermes' page: every match scored by bm25(),
// best first, equal scores by ascending id, then filters, LIMIT and OFFSET;
// the ids come from the fts5 package's Ranker (FTS5's index read in Go,
// bm25() bit for bit) or, for what it declines, from a top-k ORDER BY, and
// only the page is joined and gets a snippet.
//
// The file is disposable — it can always be rebuilt from the event log — so
// it is written with synchronous=NORMAL: a power cut may lose the last
// committed batches, never corrupt the file, and the runner then re-applies
// them from the older checkpoint. Queries run on a separate read-only pool
// and may be called while Apply runs (WAL readers see committed batches).
//
// This package must not append events, call commands or outside services,
// or decide anything: refusals (a title in use, a rewind target that is not
// a user message) are the command layer's; a projection applies every fact
// it is given and never fails on one (a title that is somehow taken is
// stored as NULL, a parent that does not exist as NULL).
package transcripts
