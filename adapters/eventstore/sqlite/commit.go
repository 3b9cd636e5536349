package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"hermes/events"

	sqlite3 "modernc.org/sqlite/lib"
)

// beginAttempts bounds the BEGIN IMMEDIATE retries when another process
// holds the write lock longer than the busy timeout.
const beginAttempts = 3

// write runs the batch in one transaction. On any error nothing of the batch
// is committed and the version cache is dropped.
func (w *writer) write(batch []*request) error {
	if err := w.beginTx(); err != nil {
		return err
	}
	if err := w.apply(batch); err != nil {
		w.rollbackTx()
		return err
	}
	return w.commitTx()
}

// beginTx opens the writer's transaction: the requests applied until
// commitTx or rollbackTx share it.
func (w *writer) beginTx() error {
	if err := w.pageLimit.Apply(context.Background(), w.conn); err != nil {
		return err
	}
	if err := w.begin(); err != nil {
		return err
	}
	if !w.soleWriter {
		var dv int64
		if err := w.stmtDataVersion.QueryRow().Scan(&dv); err != nil {
			w.rollbackTx()
			return fmt.Errorf("read data version: %w", err)
		}
		if dv != w.dataVersion {
			clear(w.versions)
			w.dataVersion = dv
		}
	}
	w.txNow = w.clock().UnixNano()
	w.txNowArg = w.txNow
	w.txReqs, w.txOneByOne = w.txReqs[:0], false
	return nil
}

// commitTx commits the open transaction; on an error nothing of it is
// committed and the version cache is dropped.
func (w *writer) commitTx() error {
	w.txReqs = w.txReqs[:0]
	if _, err := w.stmtCommit.Exec(); err != nil {
		w.rollbackTx()
		return fmt.Errorf("commit: %w", err)
	}
	if len(w.versions)+len(w.pending) > maxCachedStreams {
		w.evict()
	}
	for stream, v := range w.pending {
		w.versions[stream] = v
	}
	clear(w.pending)
	return nil
}

// rollbackTx undoes the open transaction and drops the version cache.
func (w *writer) rollbackTx() {
	// After some I/O errors, or an INSERT OR ROLLBACK that failed, SQLite
	// has already rolled back; the ROLLBACK error then only says there is
	// no transaction.
	_, _ = w.stmtRollback.Exec()
	w.txReqs = w.txReqs[:0]
	clear(w.versions)
	clear(w.pending)
}

func (w *writer) begin() error {
	for attempt := 1; ; attempt++ {
		_, err := w.stmtBegin.Exec()
		if err == nil {
			return nil
		}
		if !isCode(err, sqlite3.SQLITE_BUSY) || attempt == beginAttempts {
			return fmt.Errorf("begin: %w", err)
		}
	}
}

// apply checks and inserts reqs inside the open transaction. The fast path
// checks every expected version from the cache and inserts all rows with a
// few multi-row INSERT OR ROLLBACKs: no statement journal, since a failure
// ends the whole transaction rather than one statement (a multi-row INSERT
// that may abort copies every page it changes to a statement journal, a
// third of the writer's time in a 10,000-lane sweep). If that hits a
// constraint (an id already stored, or a stream version the cache got
// wrong), SQLite has rolled the transaction back: it is begun again and
// every request of it is replayed one at a time, each atomic on its own
// (a statement or a savepoint), so that one bad request does not fail the
// others; the rest of the transaction goes one at a time too.
func (w *writer) apply(reqs []*request) error {
	if w.txOneByOne {
		w.txReqs = append(w.txReqs, reqs...)
		return w.applyOneByOne(reqs)
	}
	if err := w.load(reqs); err != nil {
		return err
	}
	var ok, conflicted []*request
	for _, r := range reqs {
		r.res, r.err = events.AppendResult{}, nil
		cur, err := w.expectedVersion(r)
		if err != nil {
			return err
		}
		r.base = cur
		if !r.expected.Matches(cur) {
			conflicted = append(conflicted, r)
			continue
		}
		w.pending[r.stream] = cur + uint64(len(r.rows))
		ok = append(ok, r)
	}
	w.txReqs = append(w.txReqs, reqs...)
	if len(ok) > 0 {
		err := w.insert(ok, insertOrRollback)
		if err == nil {
			err = w.erase(ok)
		}
		if isCode(err, sqlite3.SQLITE_CONSTRAINT) {
			return w.replayOneByOne()
		}
		if err != nil {
			return err
		}
	}
	for _, r := range conflicted {
		if err := w.resolveConflict(r); err != nil {
			return err
		}
	}
	return nil
}

// replayOneByOne begins the transaction the fast path's constraint failure
// rolled back again and applies all its requests one at a time.
func (w *writer) replayOneByOne() error {
	all := slices.Clone(w.txReqs)
	// The version cache stays: it is as of the last commit, and the
	// transaction that failed changed nothing.
	_, _ = w.stmtRollback.Exec()
	clear(w.pending)
	if err := w.beginTx(); err != nil {
		return err
	}
	w.txReqs, w.txOneByOne = append(w.txReqs, all...), true
	return w.applyOneByOne(all)
}

func (w *writer) applyOneByOne(reqs []*request) error {
	for _, r := range reqs {
		r.res, r.err = events.AppendResult{}, nil
		if err := w.applyOne(r); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) applyOne(r *request) error {
	for attempt := 0; ; attempt++ {
		cur, err := w.expectedVersion(r)
		if err != nil {
			return err
		}
		r.base = cur
		if !r.expected.Matches(cur) {
			return w.resolveConflict(r)
		}
		err = w.atomically(len(r.rows), func() error { return w.insert([]*request{r}, insertOrAbort) })
		if err == nil {
			err = w.erase([]*request{r})
		}
		if err == nil {
			w.pending[r.stream] = cur + uint64(len(r.rows))
			return nil
		}
		if !isCode(err, sqlite3.SQLITE_CONSTRAINT) {
			return err
		}
		r.res = events.AppendResult{}
		stored, err := w.resolveIDs(r)
		if err != nil || stored {
			return err
		}
		// No id was stored, so (stream, version) collided: the cached
		// version was behind the file. Re-read it once.
		if attempt > 0 {
			return fmt.Errorf("stream %s: version %d already taken after re-reading the stream", r.stream, cur+1)
		}
		delete(w.versions, r.stream)
	}
}

// resolveConflict answers a request whose expected version does not match:
// a retry of an append already stored, or a wrong expected version.
func (w *writer) resolveConflict(r *request) error {
	stored, err := w.resolveIDs(r)
	if err != nil || stored {
		return err
	}
	r.err = &events.WrongVersionError{Stream: r.stream, Expected: r.expected, Actual: r.base}
	return nil
}

// resolveIDs looks the request's ids up. When all are stored in its stream
// the request is a duplicate and gets the original places; when only some
// are, or one is in another stream, it is invalid. It reports whether any
// id was found (and so the request is answered).
func (w *writer) resolveIDs(r *request) (bool, error) {
	versions := make([]uint64, len(r.rows))
	positions := make([]uint64, len(r.rows))
	found := 0
	for i, row := range r.rows {
		var stream string
		var version, position int64
		err := w.stmtLookupID.QueryRow(row.id).Scan(&stream, &version, &position)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("look up event id: %w", err)
		}
		if stream != r.stream {
			r.err = fmt.Errorf("append %s: event id %q is already stored in stream %s: %w", r.stream, row.id, stream, events.ErrInvalidAppend)
			return true, nil
		}
		versions[i], positions[i] = uint64(version), uint64(position)
		found++
	}
	switch found {
	case 0:
		return false, nil
	case len(r.rows):
		r.res = events.AppendResult{Versions: versions, Positions: positions, Duplicate: true}
	default:
		r.err = fmt.Errorf("append %s: %d of %d event ids are already stored: %w", r.stream, found, len(r.rows), events.ErrInvalidAppend)
	}
	return true, nil
}

// atomically runs f, which inserts rows rows with insertOrAbort, so that
// its failure undoes only its own writes. Up to maxRowsPerInsert rows, f is
// one INSERT, and SQLite undoes a failed statement by itself; beyond, a
// savepoint does.
func (w *writer) atomically(rows int, f func() error) error {
	if rows <= maxRowsPerInsert {
		return f()
	}
	if _, err := w.stmtSavepoint.Exec(); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	if err := f(); err != nil {
		_, rbErr := w.stmtRollbackTo.Exec()
		_, relErr := w.stmtRelease.Exec()
		if rbErr != nil || relErr != nil {
			return errors.Join(err, rbErr, relErr)
		}
		return err
	}
	if _, err := w.stmtRelease.Exec(); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}
