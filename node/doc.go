// Package node is one running hermes serve: the event store of a home, the
// read models that follow it, the write side, the HTTP API, and the duties
// that run beside them, from the start after a crash to the stop that
// drains the open turns. cmd/hermes turns flags into a [Config] and calls
// [Open], [Node.Run] and [Node.Close]; the offline commands use the parts
// they share with it ([Home], [Forget], [Backup], [RebuildOffline], …).
//
// One duty per file:
//
//	node.go      Config, Open, Run, Close: the start and the stop, in order
//	home.go      the files of a home, and its gateway lock
//	store.go     which event store, opened how
//	models.go    the read models as one typed set, and the generation in use
//	heal.go      a damaged read model is moved aside and rebuilt at start
//	healing.go   a read model that meets damage while serving is rebuilt live
//	recovery.go  start recovery after an unclean stop; the drain; the stop record
//	rebuild.go   the live (blue/green) rebuild and its swap; the offline one
//	erasure.go   purge: erased content out of every file under the home
//	storage.go   a full disk: the space reserve, the deferred recovery
//	roomtoack.go when an append may be answered before the read models have it
//	duties.go    background duties: one start that owns their context, log and stop
//	leases.go    several nodes on one store: leases, the leader's duties, adoption
//	backup.go    snapshots of the log: Backup, Restore, the periodic backup
//	memory.go    the soft memory limit that follows the live heap
//	settings.go  the configuration as the write side and the API take it
//
// # Start and stop
//
// Open takes the home's gateway lock, opens the store (deleting the space
// reserve to get room when the disk is full), deletes what an interrupted
// rebuild left, opens the read models (healing a damaged one) and catches
// them up; then it builds the write side and the API. Run listens, starts
// the runner and the HTTP server, and only then runs recovery: the previous
// run is read from the gateway stream, turns it left open are interrupted,
// stuck loops are suspended, the start is recorded, erasures a crash
// interrupted are finished and every file is purged (unless the last clean
// stop purged and said so). Only after recovery do the duties start and
// /readyz turn ready; a recovery that meets a full disk is retried with
// backoff while reads are served.
//
// The stop runs in this order, within agent.shutdown_timeout: the
// background duties stop (no expiry pass or webhook delivery during the
// drain), the live rebuild stops (no swap either), the drain waits for the
// open turns and interrupts those left, the HTTP server shuts down, the
// stop is recorded and, after a drain that completed, the files are purged
// and Hermes' .clean_shutdown is written; the runner stops last, because
// the drain and the purge read the read models it feeds.
//
// # Lock order
//
// The read models in use are one generation (liveModels): a Holder of
// what the requests read, and two Swappables of what the runner writes.
// A request holds the requests' generation from its first query to its
// end, and lets it go while it waits for the runner (read-your-writes,
// an erasure's purge: api's pauseModels), since the runner may be held
// until a swap heals a damaged file (healing.go); the runner holds its
// feed for the batch it applies. The swap therefore takes them in this
// order, and nothing else takes more than one of them:
//
//  1. the requests' holder (in-flight requests finish; one waiting for the
//     runner still gets it, the runner is not paused yet);
//  2. the lanes feed, then the state feed (the batch being applied
//     finishes);
//  3. liveRebuild.mu, which guards the rebuild's new read models.
//
// They are released in the reverse order, the new generation installed.
// A goroutine must release a Holder before it acquires it again
// (projections.Holder): a swap waiting in between would keep it out for
// good. liveModels.exclusive is the only place that takes the generation.
//
// # Erasure against rebuild
//
// An erasure is answered only once its content is unrecoverable from every
// file under the home (purge, erasure.go): the runner has applied it, the
// log, state.db and lanes.db are purged (WAL checkpointed and truncated,
// free pages scrubbed), sessions.json and the webhooks' poison log are
// rewritten, damaged copies moved aside are deleted, and so is any copy a
// live rebuild holds:
//
//   - while the rebuild copies history (phase 1), the purge cancels the
//     copy and waits until its files are deleted; the rebuild starts over,
//     because a half-made copy cannot be purged;
//   - the copy's files are registered for purge (liveRebuild.scratch) in
//     the same critical section of liveRebuild.mu that ends phase 1, so an
//     erasure never finds them neither being copied nor registered;
//   - while they catch up and are swapped (phases 2, 3) liveRebuild.mu is
//     held as they are written; the purge takes it, applies the log to them
//     and purges them, so the rebuild and the purge take turns;
//   - the swap purges the new files before they replace the old ones, so
//     no WAL frame of theirs keeps a page an erasure rewrote.
//
// A purge never holds a feed while it waits for liveRebuild.mu (each feed
// is taken and released by its own call), so it cannot close a circle with
// the swap.
//
// # Must not
//
// This package must not parse flags, print to a terminal or call os.Exit
// (cmd/hermes does; Config.StopOverdue is how a stop that hangs reaches
// it), decide a lane rule (domain does), write a read model's rows (the
// projections do, fed by the runner), or be imported by anything but cmd
// (make check-deps).
package node
