package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"hermes/events"

	sqlite3 "modernc.org/sqlite/lib"
)

const (
	// Bounds of one group commit: enough to absorb every appender of a busy
	// server in one fsync, small enough that one batch does not hold the
	// write lock (and the other processes) for long.
	maxBatchRequests = 1024
	maxBatchBytes    = 16 << 20
	// maxRowsPerInsert bounds one multi-row INSERT (7 parameters a row, far
	// below SQLite's 32766-parameter limit); exactRows is the largest row
	// count with a statement of its own (see statementRows).
	maxRowsPerInsert = 256
	exactRows        = 64
	columnsPerRow    = 7
	// beginAttempts bounds the BEGIN IMMEDIATE retries when another process
	// holds the write lock longer than the busy timeout.
	beginAttempts = 3
	// maxCachedStreams bounds the stream-version cache; past it, a quarter
	// of the entries are dropped and re-read on demand.
	maxCachedStreams = 1 << 16
	// maxGatherWait and maxIdleYields bound how long a batch waits for the
	// appenders the previous commit answered: less than one fsync, and only
	// while yielding the processor keeps bringing requests.
	maxGatherWait = 200 * time.Microsecond
	maxIdleYields = 16
)

// row is one proposed event, encoded by the appending goroutine so the
// writer does no JSON work.
type row struct {
	id, typ, data, meta string
}

// request is one Append on its way through the writer.
type request struct {
	ctx      context.Context
	stream   string
	expected events.ExpectedVersion
	rows     []row
	size     int
	reply    chan reply

	// Set by the writer while the request is in a transaction.
	base uint64 // stream version before the request's first event
	res  events.AppendResult
	err  error
}

type reply struct {
	res events.AppendResult
	err error
}

// writer owns the single write connection. Only its goroutine touches the
// connection, the statements and the caches, so none of them needs a lock.
type writer struct {
	db       *sql.DB
	conn     *sql.Conn
	clock    func() time.Time
	onCommit func()

	reqs chan *request
	stop <-chan struct{}
	done chan struct{}
	// answered is how many requests the last commit answered.
	answered int

	// versions caches the last version of streams as of the last commit of
	// this connection; valid while dataVersion says no other connection
	// committed since.
	versions    map[string]uint64
	dataVersion int64
	// pending holds the versions written by the open transaction.
	pending map[string]uint64

	stmtBegin          *sql.Stmt
	stmtCommit         *sql.Stmt
	stmtRollback       *sql.Stmt
	stmtSavepoint      *sql.Stmt
	stmtRelease        *sql.Stmt
	stmtRollbackTo     *sql.Stmt
	stmtDataVersion    *sql.Stmt
	stmtStreamVersion  *sql.Stmt
	stmtStreamVersions *sql.Stmt
	stmtLookupID       *sql.Stmt
	inserts            map[int]*sql.Stmt
	args               []any
	slots              []slot
	unknown            []string
}

type slot struct {
	r *request
	i int
}

func openWriter(path string, cfg config, onCommit func(), stop <-chan struct{}) (*writer, error) {
	db, err := sql.Open("sqlite", dsn(path, false, cfg.busyTimeout))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	w := &writer{
		db:          db,
		conn:        conn,
		clock:       cfg.clock,
		onCommit:    onCommit,
		reqs:        make(chan *request, maxBatchRequests),
		stop:        stop,
		done:        make(chan struct{}),
		versions:    make(map[string]uint64),
		dataVersion: -1,
		pending:     make(map[string]uint64),
		inserts:     make(map[int]*sql.Stmt),
	}
	if err := w.init(ctx); err != nil {
		return nil, errors.Join(err, w.close())
	}
	go w.run()
	return w, nil
}

// init checks the file before changing anything in it (journal mode
// included), then creates the schema if the file is fresh. Two processes
// initialising the same file at once are serialised by BEGIN IMMEDIATE.
func (w *writer) init(ctx context.Context) error {
	err := checkSchema(ctx, w.conn, true)
	if err != nil && !errors.Is(err, errFresh) {
		return err
	}
	var mode string
	if err := w.conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return fmt.Errorf("set journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("set journal mode: got %q, want wal", mode)
	}
	if errors.Is(err, errFresh) {
		if err := w.create(ctx); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	}
	return w.prepare(ctx)
}

func (w *writer) create(ctx context.Context) (err error) {
	if _, err := w.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, rbErr := w.conn.ExecContext(ctx, "ROLLBACK")
			err = errors.Join(err, rbErr)
		}
	}()
	err = checkSchema(ctx, w.conn, true)
	if err == nil {
		_, err = w.conn.ExecContext(ctx, "COMMIT")
		return err
	}
	if !errors.Is(err, errFresh) {
		return err
	}
	if _, err := w.conn.ExecContext(ctx, schemaSQL); err != nil {
		return err
	}
	meta := fmt.Sprintf("PRAGMA application_id = %d; PRAGMA user_version = %d", applicationID, schemaVersion)
	if _, err := w.conn.ExecContext(ctx, meta); err != nil {
		return err
	}
	_, err = w.conn.ExecContext(ctx, "COMMIT")
	return err
}

func (w *writer) prepare(ctx context.Context) error {
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&w.stmtBegin, "BEGIN IMMEDIATE"},
		{&w.stmtCommit, "COMMIT"},
		{&w.stmtRollback, "ROLLBACK"},
		{&w.stmtSavepoint, "SAVEPOINT request"},
		{&w.stmtRelease, "RELEASE request"},
		{&w.stmtRollbackTo, "ROLLBACK TO request"},
		{&w.stmtDataVersion, "PRAGMA data_version"},
		{&w.stmtStreamVersion, "SELECT coalesce(max(version), 0) FROM events WHERE stream = ?"},
		{&w.stmtStreamVersions, "SELECT j.value, (SELECT coalesce(max(version), 0) FROM events WHERE stream = j.value) FROM json_each(?) AS j"},
		{&w.stmtLookupID, "SELECT stream, version, position FROM events WHERE event_id = ?"},
	} {
		stmt, err := w.conn.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.stmt = stmt
	}
	return nil
}

// close releases the connection; only after run has returned.
func (w *writer) close() error {
	var errs []error
	for _, s := range []*sql.Stmt{
		w.stmtBegin, w.stmtCommit, w.stmtRollback, w.stmtSavepoint, w.stmtRelease, w.stmtRollbackTo,
		w.stmtDataVersion, w.stmtStreamVersion, w.stmtStreamVersions, w.stmtLookupID,
	} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	for _, s := range w.inserts {
		errs = append(errs, s.Close())
	}
	errs = append(errs, w.conn.Close(), w.db.Close())
	return errors.Join(errs...)
}

// submit hands r to the writer and waits for its outcome. When ctx ends
// first the outcome is unknown (the batch may still commit); retrying with
// the same ids is safe.
func (w *writer) submit(ctx context.Context, r *request) (events.AppendResult, error) {
	select {
	case w.reqs <- r:
	case <-w.stop:
		return events.AppendResult{}, fmt.Errorf("append %s: %w", r.stream, ErrClosed)
	case <-ctx.Done():
		return events.AppendResult{}, fmt.Errorf("append %s: %w", r.stream, ctx.Err())
	}
	select {
	case rep := <-r.reply:
		return rep.res, rep.err
	case <-w.done:
		select {
		case rep := <-r.reply:
			return rep.res, rep.err
		default:
			return events.AppendResult{}, fmt.Errorf("append %s: %w", r.stream, ErrClosed)
		}
	case <-ctx.Done():
		return events.AppendResult{}, fmt.Errorf("append %s: outcome unknown: %w", r.stream, ctx.Err())
	}
}

// run is the writer goroutine: it takes whatever requests are queued, up to
// the batch bounds, and commits them together. After stop it flushes what is
// still queued, then returns.
func (w *writer) run() {
	defer close(w.done)
	batch := make([]*request, 0, maxBatchRequests)
	var carry *request
	stopping := false
	for {
		batch = batch[:0]
		size := 0
		if carry != nil {
			batch, size, carry = append(batch, carry), carry.size, nil
		} else if !stopping {
			select {
			case r := <-w.reqs:
				batch, size = append(batch, r), r.size
			case <-w.stop:
				stopping = true
			}
		}
	drain:
		for len(batch) < maxBatchRequests {
			select {
			case r := <-w.reqs:
				if len(batch) > 0 && size+r.size > maxBatchBytes {
					carry = r
					break drain
				}
				batch, size = append(batch, r), size+r.size
			default:
				break drain
			}
		}
		if len(batch) == 0 {
			if stopping {
				return
			}
			continue
		}
		if carry == nil && !stopping {
			batch, carry = w.gather(batch, size)
		}
		w.commit(batch)
	}
}

// gather waits, briefly, for the appenders answered by the previous commit
// when that commit served several: busy appenders come straight back, and
// waiting for them lets them share this batch's fsync instead of waiting a
// whole commit for the next one. Without it, concurrent appenders split into
// two cohorts that alternate, each commit serving half of them. A lone
// appender never waits, and the wait is bounded by a fraction of an fsync.
// The writer yields rather than blocks: the appenders it just woke are
// queued on its own processor.
func (w *writer) gather(batch []*request, size int) ([]*request, *request) {
	if w.answered < 2 {
		return batch, nil
	}
	want := min(len(batch)+w.answered, maxBatchRequests)
	deadline := time.Now().Add(maxGatherWait)
	for idle := 0; len(batch) < want && idle < maxIdleYields && time.Now().Before(deadline); {
		select {
		case r := <-w.reqs:
			if size+r.size > maxBatchBytes {
				return batch, r
			}
			batch, size = append(batch, r), size+r.size
			idle = 0
		default:
			runtime.Gosched()
			idle++
		}
	}
	return batch, nil
}

// commit runs one group commit and answers every request of the batch.
func (w *writer) commit(batch []*request) {
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.reply <- reply{err: fmt.Errorf("append %s: %w", r.stream, err)}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	if err := w.write(live); err != nil {
		for _, r := range live {
			r.reply <- reply{err: fmt.Errorf("append %s: %w", r.stream, err)}
		}
		return
	}
	for _, r := range live {
		r.reply <- reply{res: r.res, err: r.err}
	}
	w.answered = len(live)
	w.onCommit()
}

// write runs the batch in one transaction. On any error nothing of the batch
// is committed and the version cache is dropped.
func (w *writer) write(batch []*request) error {
	if err := w.begin(); err != nil {
		return err
	}
	err := w.apply(batch)
	if err == nil {
		if _, err = w.stmtCommit.Exec(); err != nil {
			err = fmt.Errorf("commit: %w", err)
		}
	}
	if err != nil {
		// After some I/O errors SQLite has already rolled back; the
		// ROLLBACK error then only says there is no transaction.
		_, _ = w.stmtRollback.Exec()
		clear(w.versions)
		clear(w.pending)
		return err
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

func (w *writer) evict() {
	n := len(w.versions) / 4
	for stream := range w.versions {
		if n == 0 {
			break
		}
		delete(w.versions, stream)
		n--
	}
}

// apply checks and inserts the batch inside the open transaction. The fast
// path checks every expected version from the cache and inserts all rows
// with a few multi-row INSERTs. If that hits a constraint (an id already
// stored, or a stream version the cache got wrong), it is undone and the
// batch is replayed one request at a time, each in its own savepoint, so
// that one bad request does not fail the others.
func (w *writer) apply(batch []*request) error {
	var dv int64
	if err := w.stmtDataVersion.QueryRow().Scan(&dv); err != nil {
		return fmt.Errorf("read data version: %w", err)
	}
	if dv != w.dataVersion {
		clear(w.versions)
		w.dataVersion = dv
	}
	now := w.clock().UnixNano()
	if err := w.load(batch); err != nil {
		return err
	}

	var ok, conflicted []*request
	for _, r := range batch {
		r.res, r.err = events.AppendResult{}, nil
		cur, err := w.expectedVersion(r)
		if err != nil {
			return err
		}
		if !r.expected.Matches(cur) {
			r.base = cur
			conflicted = append(conflicted, r)
			continue
		}
		r.base = cur
		w.pending[r.stream] = cur + uint64(len(r.rows))
		ok = append(ok, r)
	}
	if len(ok) > 0 {
		rows := 0
		for _, r := range ok {
			rows += len(r.rows)
		}
		err := w.atomically(rows, func() error { return w.insert(ok, now) })
		if isCode(err, sqlite3.SQLITE_CONSTRAINT) {
			clear(w.pending)
			return w.applyOneByOne(batch, now)
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

func (w *writer) applyOneByOne(batch []*request, now int64) error {
	for _, r := range batch {
		r.res, r.err = events.AppendResult{}, nil
		if err := w.applyOne(r, now); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) applyOne(r *request, now int64) error {
	for attempt := 0; ; attempt++ {
		cur, err := w.expectedVersion(r)
		if err != nil {
			return err
		}
		r.base = cur
		if !r.expected.Matches(cur) {
			return w.resolveConflict(r)
		}
		err = w.atomically(len(r.rows), func() error { return w.insert([]*request{r}, now) })
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

// load reads, in one query, the versions of the batch's streams that are
// not cached: a query per stream would cost more than inserting the events.
func (w *writer) load(batch []*request) error {
	w.unknown = w.unknown[:0]
	for _, r := range batch {
		if _, ok := w.pending[r.stream]; ok {
			continue
		}
		if _, ok := w.versions[r.stream]; ok {
			continue
		}
		w.versions[r.stream] = 0
		w.unknown = append(w.unknown, r.stream)
	}
	if len(w.unknown) < 2 {
		for _, stream := range w.unknown {
			delete(w.versions, stream)
		}
		return nil
	}
	names, err := json.Marshal(w.unknown)
	if err != nil {
		return fmt.Errorf("read stream versions: %w", err)
	}
	rows, err := w.stmtStreamVersions.Query(string(names))
	if err != nil {
		return fmt.Errorf("read stream versions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var stream string
		var v int64
		if err := rows.Scan(&stream, &v); err != nil {
			return fmt.Errorf("read stream versions: %w", err)
		}
		w.versions[stream] = uint64(v)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read stream versions: %w", err)
	}
	return nil
}

// expectedVersion is the version r's expectation is checked against. A
// mismatch found in the cache is confirmed from the file before it refuses
// the append: conflicts are rare, and a cache that missed a commit must not
// turn a valid append into a WrongVersionError.
func (w *writer) expectedVersion(r *request) (uint64, error) {
	cur, err := w.version(r.stream)
	if err != nil || r.expected.Matches(cur) {
		return cur, err
	}
	if _, written := w.pending[r.stream]; written {
		return cur, nil
	}
	delete(w.versions, r.stream)
	return w.version(r.stream)
}

// version is the stream's last version as the open transaction sees it.
func (w *writer) version(stream string) (uint64, error) {
	if v, ok := w.pending[stream]; ok {
		return v, nil
	}
	if v, ok := w.versions[stream]; ok {
		return v, nil
	}
	var v int64
	if err := w.stmtStreamVersion.QueryRow(stream).Scan(&v); err != nil {
		return 0, fmt.Errorf("read version of %s: %w", stream, err)
	}
	w.versions[stream] = uint64(v)
	return uint64(v), nil
}

// atomically runs f, which inserts rows rows, so that its failure undoes
// only its own writes. Up to maxRowsPerInsert rows, f is one INSERT, and
// SQLite undoes a failed statement by itself; beyond, a savepoint does.
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

// insert writes the rows of reqs, versions following each request's base,
// with multi-row INSERTs, and fills in versions and positions. Positions
// come from AUTOINCREMENT: the rows of one statement get consecutive
// positions ending at its last insert rowid, since no other writer can run
// inside this transaction.
func (w *writer) insert(reqs []*request, now int64) error {
	w.args, w.slots = w.args[:0], w.slots[:0]
	for _, r := range reqs {
		r.res = events.AppendResult{
			Versions:  make([]uint64, len(r.rows)),
			Positions: make([]uint64, len(r.rows)),
		}
		for i, row := range r.rows {
			v := r.base + uint64(i) + 1
			r.res.Versions[i] = v
			w.args = append(w.args, r.stream, int64(v), row.id, row.typ, row.data, row.meta, now)
			w.slots = append(w.slots, slot{r, i})
			if len(w.slots) == maxRowsPerInsert {
				if err := w.flush(); err != nil {
					return err
				}
			}
		}
	}
	if len(w.slots) > 0 {
		return w.flush()
	}
	return nil
}

// flush inserts the pending rows, in as few statements as the prepared
// sizes allow.
func (w *writer) flush() error {
	for done := 0; done < len(w.slots); {
		n := statementRows(len(w.slots) - done)
		stmt, err := w.insertStmt(n)
		if err != nil {
			return err
		}
		res, err := stmt.Exec(w.args[done*columnsPerRow : (done+n)*columnsPerRow]...)
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		last, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		first := uint64(last) - uint64(n) + 1
		for k, s := range w.slots[done : done+n] {
			s.r.res.Positions[s.i] = first + uint64(k)
		}
		done += n
	}
	clear(w.args)
	w.args, w.slots = w.args[:0], w.slots[:0]
	return nil
}

// statementRows is how many of n pending rows the next INSERT takes. Exact
// sizes up to exactRows each get their statement; larger counts go by powers
// of two, so at most exactRows+3 INSERTs are ever prepared.
func statementRows(n int) int {
	if n <= exactRows {
		return n
	}
	c := maxRowsPerInsert
	for c > n {
		c /= 2
	}
	return c
}

func (w *writer) insertStmt(n int) (*sql.Stmt, error) {
	if s, ok := w.inserts[n]; ok {
		return s, nil
	}
	var b strings.Builder
	b.WriteString("INSERT INTO events (stream, version, event_id, type, data, metadata, recorded_at) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?)")
	}
	s, err := w.conn.PrepareContext(context.Background(), b.String())
	if err != nil {
		return nil, fmt.Errorf("prepare insert of %d rows: %w", n, err)
	}
	w.inserts[n] = s
	return s, nil
}
