package transcripts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"

	"hermes/projections/transcripts/fts5"
)

// An ftsBuilder indexes the messages of a bulk load in a scratch file
// while the events are still being applied, on a core of its own: each
// time the bulk load commits, the builder indexes the messages committed
// since its last pass (by id, which only grows for appended messages) in
// one transaction of its own, reading the state file through a read-only
// attachment. At the end of the load the builder indexes the rest and puts
// right what changed behind it: the rows deleted or rewritten after it had
// indexed them (the projection records their ids with temporary triggers)
// are indexed again as they are now, and rows inserted below an id it had
// passed (an import keeps Hermes' ids) are indexed too, found by comparing
// the counts of rows. Each pass adds one segment (FTS5's automatic merges
// are off), which the projection copies into the state file between two
// bulk transactions while the builder waits for its next offer; the end
// of the load copies the last pass and the structure record, or the whole
// index if the scratch file changed other than by adding segments.
type ftsBuilder struct {
	table   string
	scratch string
	db      *sql.DB
	conn    *sql.Conn
	cancel  context.CancelFunc
	started bool
	result  chan error // run's error, put back by each reader

	mu    sync.Mutex
	upto  int64 // the highest committed message id offered
	final bool  // no more offers: finish
	// changed are the ids to index again at the end.
	changed []int64
	wake    chan struct{}
	// passes are the passes done and not yet copied into the state file
	// (copyBuilt); segments every segment id a pass added. rewritten says
	// that the scratch file changed other than by adding segments (FTS5
	// merged segments, or putRight changed rows already indexed): what
	// was copied may be stale, so the whole index is copied at the end.
	passes    []builtPass
	segments  map[int64]fts5.Segment
	rewritten bool

	// passMu is held during each pass, and by copyBuilt while it reads
	// the scratch file: a pass never writes what is being copied.
	passMu sync.Mutex
}

// builtPass is what one pass of a builder added to its scratch file: the
// segments (by id) and the %_docsize rows of the messages in (from, to].
type builtPass struct {
	segments []int64
	from, to int64
}

// bulkBuildMinRows is the fewest new messages a builder indexes in one
// pass before the end of the load (each pass leaves one FTS5 segment).
// A variable for tests.
var bulkBuildMinRows int64 = 48 * 1024

// builderScratch is the scratch file of table's builder next to path.
func builderScratch(path, table string) string { return path + ".fts-" + table }

// startFTSBuilder creates table (Hermes' DDL, FTS5's bulk settings) in a
// new scratch file and starts indexing the messages of the file at src as
// they are offered.
func startFTSBuilder(src, table string) (_ *ftsBuilder, err error) {
	ddl, err := ftsDDL(table)
	if err != nil {
		return nil, err
	}
	scratch := builderScratch(src, table)
	removeDB(scratch)
	if err := createPrivate(scratch); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", scratchDSN(scratch, "temp_store(MEMORY)"))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithCancel(context.Background())
	b := &ftsBuilder{table: table, scratch: scratch, db: db, cancel: cancel, result: make(chan error, 1), wake: make(chan struct{}, 1)}
	defer func() {
		if err != nil {
			b.abort()
		}
	}()
	if b.conn, err = db.Conn(ctx); err != nil {
		return nil, err
	}
	attach := "ATTACH DATABASE '" + strings.ReplaceAll((&url.URL{Scheme: "file", Path: src, RawQuery: "mode=ro"}).String(), "'", "''") + "' AS src"
	for _, stmt := range append([]string{attach, ddl}, bulkConfig(table)...) {
		if _, err := b.conn.ExecContext(ctx, stmt); err != nil {
			return nil, fmt.Errorf("build %s: %w", table, err)
		}
	}
	b.started = true
	// Labelled so that a CPU profile tells the builders apart.
	go pprof.Do(ctx, pprof.Labels("fts-builder", table), func(ctx context.Context) { b.result <- b.run(ctx) })
	return b, nil
}

// offer tells the builder that the messages up to id upto are committed.
func (b *ftsBuilder) offer(upto int64) {
	b.mu.Lock()
	b.upto = max(b.upto, upto)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// finish tells the builder that the load is committed up to id upto, with
// the rows of changed to index again, and waits until the scratch file is
// complete and closed.
func (b *ftsBuilder) finish(upto int64, changed []int64) error {
	b.mu.Lock()
	b.upto, b.final, b.changed = max(b.upto, upto), true, changed
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	err := <-b.result
	b.result <- err // finish and abort may both wait
	return err
}

// abort stops the builder and removes its scratch file.
func (b *ftsBuilder) abort() {
	b.cancel()
	if b.started {
		err := <-b.result
		b.result <- err
	}
	b.closeDB()
	removeDB(b.scratch)
}

func (b *ftsBuilder) closeDB() {
	if b.conn != nil {
		_ = b.conn.Close() // run may have closed it
	}
	_ = b.db.Close()
}

// run indexes what is offered until finish, then puts right what changed
// behind it and closes the scratch file.
func (b *ftsBuilder) run(ctx context.Context) error {
	var done int64
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-b.wake:
		}
		b.mu.Lock()
		upto, final, changed := b.upto, b.final, b.changed
		b.mu.Unlock()
		if upto > done && (final || upto-done >= bulkBuildMinRows) {
			if err := b.pass(ctx, done, upto); err != nil {
				return err
			}
			done = upto
		}
		if final {
			b.passMu.Lock()
			err := b.putRight(ctx, changed)
			b.passMu.Unlock()
			if err != nil {
				return err
			}
			return b.conn.Close()
		}
	}
}

// pass indexes the messages with ids in (from, to] and records what it
// added (builtPass).
func (b *ftsBuilder) pass(ctx context.Context, from, to int64) error {
	b.passMu.Lock()
	defer b.passMu.Unlock()
	if err := b.index(ctx, "id > ? AND id <= ?", from, to); err != nil {
		return err
	}
	segs, err := b.segmentIDs(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		// Not knowing what the pass added, nothing is copied before the
		// end, which copies the whole index (and meets any real error).
		b.rewritten = true
		return nil
	}
	if b.segments == nil {
		b.segments = map[int64]fts5.Segment{}
	}
	added := builtPass{from: from, to: to}
	for id, seg := range segs {
		if _, ok := b.segments[id]; !ok {
			added.segments = append(added.segments, id)
			b.segments[id] = seg
		}
	}
	for id, seg := range b.segments {
		if segs[id] != seg {
			b.rewritten = true // a segment went or changed: FTS5 merged
		}
	}
	slices.Sort(added.segments)
	b.passes = append(b.passes, added)
	return nil
}

// segmentIDs returns the segments of the scratch file's index by id, as
// its structure record lists them.
func (b *ftsBuilder) segmentIDs(ctx context.Context) (map[int64]fts5.Segment, error) {
	tx, err := b.conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", b.table, err)
	}
	defer func() { _ = tx.Rollback() }() // read only
	segs, err := fts5.Segments(ctx, tx, b.table)
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", b.table, err)
	}
	ids := make(map[int64]fts5.Segment, len(segs))
	for _, seg := range segs {
		ids[seg.ID] = seg
	}
	return ids, nil
}

// takePasses returns the passes not copied yet and whether the scratch
// file was rewritten, if no pass is under way (false otherwise); the
// caller then holds passMu until it calls the returned release.
func (b *ftsBuilder) takePasses() (passes []builtPass, rewritten bool, release func(), ok bool) {
	if !b.passMu.TryLock() {
		return nil, false, nil, false
	}
	b.mu.Lock()
	passes, rewritten = b.passes, b.rewritten
	b.mu.Unlock()
	return passes, rewritten, func() { b.passMu.Unlock() }, true
}

// copied drops the first n passes: they are in the state file.
func (b *ftsBuilder) copied(n int) {
	b.mu.Lock()
	b.passes = b.passes[n:]
	b.mu.Unlock()
}

// index adds the messages of the state file matching where (with args) to
// the index, in one transaction.
func (b *ftsBuilder) index(ctx context.Context, where string, args ...any) error {
	stmt := "INSERT INTO " + b.table + "(rowid, content) SELECT id, " + ftsText + " FROM src.messages WHERE " + where + " ORDER BY id"
	if _, err := b.conn.ExecContext(ctx, "BEGIN"); err != nil {
		return fmt.Errorf("build %s: %w", b.table, err)
	}
	if _, err := b.conn.ExecContext(ctx, stmt, args...); err != nil {
		_, rbErr := b.conn.ExecContext(context.Background(), "ROLLBACK")
		return errors.Join(fmt.Errorf("build %s: %w", b.table, err), rbErr)
	}
	if _, err := b.conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("build %s: %w", b.table, err)
	}
	return nil
}

// putRight indexes again the rows of changed (deleted or rewritten after
// they were indexed: their old entries go, the rows still there are
// indexed as they are now), then the rows it never saw, if any.
func (b *ftsBuilder) putRight(ctx context.Context, changed []int64) error {
	// FTS5 removes a deleted row's terms from the segments (secure-delete),
	// so no erased text is copied into the state file.
	if len(changed) > 0 {
		b.mu.Lock()
		b.rewritten = true
		b.mu.Unlock()
		if _, err := b.conn.ExecContext(ctx, "INSERT INTO "+b.table+"("+b.table+", rank) VALUES ('secure-delete', 1)"); err != nil {
			return fmt.Errorf("build %s: %w", b.table, err)
		}
	}
	for len(changed) > 0 {
		n := min(len(changed), 500)
		ids := make([]string, n)
		for i, id := range changed[:n] {
			ids[i] = strconv.FormatInt(id, 10)
		}
		in := "(" + strings.Join(ids, ",") + ")"
		if _, err := b.conn.ExecContext(ctx, "DELETE FROM "+b.table+" WHERE rowid IN "+in); err != nil {
			return fmt.Errorf("build %s: index again: %w", b.table, err)
		}
		if err := b.index(ctx, "id IN "+in); err != nil {
			return err
		}
		changed = changed[n:]
	}
	var indexed, rows int64
	if err := b.conn.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM main."+b.table+"_docsize), (SELECT count(*) FROM src.messages)").Scan(&indexed, &rows); err != nil {
		return fmt.Errorf("build %s: %w", b.table, err)
	}
	if indexed == rows {
		return nil
	}
	b.mu.Lock()
	b.rewritten = true // rows below ids already indexed: docsize rows out of the passes' ranges
	b.mu.Unlock()
	return b.index(ctx, "id NOT IN (SELECT id FROM main."+b.table+"_docsize)")
}
