package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"hermes/events"

	"github.com/jackc/pgx/v5"
)

const (
	// Bounds of one transaction of appends gathered from the queue: enough
	// to give every appender of a busy server one commit, small enough that
	// one transaction does not hold the order lock (and the other nodes)
	// for long. A group of AppendBatch is never split, and is itself
	// bounded by batchChunk and batchChunkBytes.
	maxBatchRequests = 1024
	maxBatchBytes    = 16 << 20
	// maxGatherWait bounds how long a transaction waits for the appenders
	// the previous commit answered, when it answered several: they come
	// straight back, and waiting a fraction of a commit lets them share
	// this one instead of waiting a whole commit for the next.
	maxGatherWait = 500 * time.Microsecond
	maxIdleYields = 16
	// txTimeout bounds one attempt of a transaction on this side of the
	// connection, should the server stop answering without closing it.
	txTimeout = 2 * time.Minute
	// rollbackTimeout bounds the ROLLBACK after a failed attempt; past it
	// the connection is dropped (the server then rolls back by itself).
	rollbackTimeout = 5 * time.Second
)

// group is what one call hands the writer: an Append's request, or a chunk
// of an AppendBatch. done is closed once every request of it has its
// outcome.
type group struct {
	reqs []*request
	done chan struct{}
}

func (g *group) size() int {
	n := 0
	for _, r := range g.reqs {
		n += r.size
	}
	return n
}

// writers are the store's writers: the queue of groups they share, and
// done, closed once every writer has stopped.
type writers struct {
	queue chan *group
	done  chan struct{}
	all   []*writer
}

// writer owns one connection that appends. Its goroutine takes the groups
// queued at that moment and commits them in one transaction, which takes
// the order lock before any position is drawn (doc.go). While one writer's
// transaction holds the lock, the next writer's is sent and waits for it
// at the server, so the lock passes from one transaction to the next
// without a round trip to this process in between.
type writer struct {
	s    *Store
	ws   *writers
	conn *pgx.Conn // nil while disconnected
	// answered is how many requests the last commit answered.
	answered int
}

// writerStats count the writers' work, for the benchmarks.
type writerStats struct{ transactions, requests atomic.Int64 }

// newWriters starts n writers; the first takes conn, the others connect
// on their first transaction.
func newWriters(s *Store, conn *pgx.Conn, n int) *writers {
	ws := &writers{queue: make(chan *group, maxBatchRequests), done: make(chan struct{})}
	for i := range n {
		w := &writer{s: s, ws: ws}
		if i == 0 {
			w.conn = conn
		}
		ws.all = append(ws.all, w)
	}
	var wg sync.WaitGroup
	for _, w := range ws.all {
		wg.Go(w.run)
	}
	go func() {
		wg.Wait()
		close(ws.done)
	}()
	return ws
}

// enqueue hands g to the writers.
func (ws *writers) enqueue(ctx context.Context, s *Store, g *group) error {
	if s.closed() {
		return ErrClosed
	}
	// Checked first: select would pick a free queue slot over a done
	// context half of the time.
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case ws.queue <- g:
		return nil
	case <-s.closing:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wait waits for g's outcome. When ctx ends first the outcome is unknown
// (the transaction may still commit); retrying with the same ids is safe.
func (ws *writers) wait(ctx context.Context, g *group) error {
	select {
	case <-g.done:
		return nil
	case <-ws.done:
		select {
		case <-g.done:
			return nil
		default:
			return ErrClosed
		}
	case <-ctx.Done():
		return fmt.Errorf("outcome unknown: %w", ctx.Err())
	}
}

func (ws *writers) close() error {
	var errs []error
	for _, w := range ws.all {
		errs = append(errs, w.close())
	}
	return errors.Join(errs...)
}

// run is a writer's goroutine. Once the store closes it commits what is
// still queued, then returns; a group queued after every writer returned
// is answered ErrClosed by wait.
func (w *writer) run() {
	gather := len(w.ws.all) == 1
	for {
		select {
		case g := <-w.ws.queue:
			w.commit(w.take(g, gather))
		case <-w.s.closing:
			for {
				select {
				case g := <-w.ws.queue:
					w.commit(w.take(g, false))
				default:
					return
				}
			}
		}
	}
}

// take gathers the groups queued behind first, up to the bounds of one
// transaction. A lone writer (gather) also waits briefly for more when
// its last commit served several appenders (see maxGatherWait); with
// several, the next writer takes them.
func (w *writer) take(first *group, gather bool) []*group {
	groups := []*group{first}
	n, size := len(first.reqs), first.size()
	add := func(g *group) { groups, n, size = append(groups, g), n+len(g.reqs), size+g.size() }
	full := func() bool { return n >= maxBatchRequests || size >= maxBatchBytes }
drain:
	for !full() {
		select {
		case g := <-w.ws.queue:
			add(g)
		default:
			break drain
		}
	}
	// The appenders the last commit answered are the ones about to come
	// back: without waiting for them, concurrent appenders split into two
	// cohorts that alternate, each transaction serving half of them. The
	// writer yields rather than blocks (they are goroutines of this
	// process, woken by that commit) and stops as soon as yielding brings
	// nothing for a while: it never waits the whole window for appenders
	// that are not coming.
	if !gather || w.answered < 2 || full() {
		return groups
	}
	want := n + w.answered
	deadline := time.Now().Add(w.s.cfg.gatherWait)
	for idle := 0; !full() && n < want && idle < maxIdleYields && time.Now().Before(deadline); {
		select {
		case g := <-w.ws.queue:
			add(g)
			idle = 0
		default:
			runtime.Gosched()
			idle++
		}
	}
	return groups
}

// commit runs the requests of groups in one transaction and answers them.
func (w *writer) commit(groups []*group) {
	var live []*request
	for _, g := range groups {
		for _, r := range g.reqs {
			if err := r.ctx.Err(); err != nil {
				r.res, r.err = events.AppendResult{}, fmt.Errorf("append %s: %w", r.stream, err)
				continue
			}
			live = append(live, r)
		}
	}
	if len(live) > 0 {
		w.apply(live)
		w.answered = len(live)
		w.s.stats.transactions.Add(1)
		w.s.stats.requests.Add(int64(len(live)))
	}
	for _, g := range groups {
		close(g.done)
	}
}

// apply commits reqs (transact), running what is not yet committed again
// on a transient failure (a lost connection, a restarting server) until
// retryBudget. A failure that is not transient fails every request still
// open, except one that concerns a single request (a refused value): then
// each runs in a transaction of its own, so that only that one fails.
func (w *writer) apply(reqs []*request) {
	for _, r := range reqs {
		r.final = false
	}
	deadline := time.Now().Add(w.s.cfg.retryBudget)
	backoff := 25 * time.Millisecond
	for attempt := 1; ; attempt++ {
		var todo []*request
		for _, r := range reqs {
			if !r.final {
				todo = append(todo, r)
			}
		}
		if len(todo) == 0 {
			w.s.commits.notify()
			return
		}
		err := w.transact(todo)
		if err == nil {
			continue
		}
		retry := transient(err) || (sqlState(err) == codeUniqueViolation && attempt < 3)
		if retry && time.Now().Before(deadline) && anyLive(todo) {
			if sqlState(err) != codeUniqueViolation {
				time.Sleep(backoff)
				backoff = min(2*backoff, time.Second)
			}
			continue
		}
		if len(todo) > 1 && sqlState(err) != "" && !retry && !errors.Is(classify(err), events.ErrStorageFull) {
			for _, r := range todo {
				w.apply([]*request{r})
			}
			w.s.commits.notify()
			return
		}
		err = classify(err)
		for _, r := range todo {
			r.res, r.err = events.AppendResult{}, fmt.Errorf("append %s: %w", r.stream, err)
		}
		w.s.commits.notify()
		return
	}
}

func anyLive(reqs []*request) bool {
	for _, r := range reqs {
		if r.ctx.Err() == nil {
			return true
		}
	}
	return false
}

// connection returns the writer's connection, connecting again when it was
// lost.
func (w *writer) connection() (*pgx.Conn, error) {
	if w.conn != nil && !w.conn.IsClosed() {
		return w.conn, nil
	}
	w.drop()
	conn, err := w.s.connectWriter(context.Background())
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	w.conn = conn
	return conn, nil
}

// drop closes the connection; the next transaction opens another.
func (w *writer) drop() {
	if w.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
		_ = w.conn.Close(ctx)
		cancel()
		w.conn = nil
	}
}

// abort ends a transaction that failed: ROLLBACK, or, when the connection
// is broken or does not answer, the connection itself (the server rolls
// back a transaction whose connection is gone).
func (w *writer) abort() {
	if w.conn == nil || w.conn.IsClosed() {
		w.drop()
		return
	}
	if w.conn.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
	defer cancel()
	if _, err := w.conn.Exec(ctx, "ROLLBACK"); err != nil {
		w.drop()
	}
}

func (w *writer) close() error {
	if w.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
	defer cancel()
	err := w.conn.Close(ctx)
	w.conn = nil
	return err
}

// stored is an event id found in the log.
type stored struct {
	stream            string
	version, position uint64
}

// place is a row of a request of the transaction.
type place struct {
	r *request
	i int
}

// transact commits reqs: those the fast path may take in its one round
// trip first (fast.go), then, in a transaction of the checked path, the
// others and those the fast path left out. It marks final the requests
// whose outcome a committed transaction decided.
func (w *writer) transact(reqs []*request) error {
	fast, checked := splitFast(reqs)
	if len(fast) > 0 {
		left, err := w.transactFast(fast)
		if err != nil {
			return err
		}
		checked = append(checked, left...)
	}
	if len(checked) == 0 {
		return nil
	}
	return w.transactChecked(checked)
}

// transactChecked is one attempt at reqs on the checked path. It takes the
// order lock first, then reads the versions of their streams and looks
// their ids up (all in one round trip), decides each request in Go,
// inserts the rows of those that go in (their positions are drawn now,
// under the lock), applies their erasures, and commits with a notification
// on the store's channel. The lock is held until the commit, so
// transactions that draw positions commit in the order of their positions
// (doc.go).
func (w *writer) transactChecked(reqs []*request) (err error) {
	conn, err := w.connection()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), txTimeout)
	defer cancel()
	committed := false
	defer func() {
		if !committed {
			w.abort()
		}
	}()

	var streams, ids []string
	seenStream := map[string]bool{}
	for _, r := range reqs {
		if !seenStream[r.stream] {
			seenStream[r.stream] = true
			streams = append(streams, r.stream)
		}
		for _, row := range r.rows {
			ids = append(ids, row.id)
		}
	}
	sql := &w.s.sql
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	if !w.s.cfg.noOrderLock {
		b.Queue(sql.lock, w.s.keys.order)
	}
	b.Queue(sql.streamVersions, streams)
	b.Queue(sql.lookupIDs, ids)
	current := make(map[string]uint64, len(streams))
	found := make(map[string]stored)
	br := conn.SendBatch(ctx, b)
	err = func() error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		if !w.s.cfg.noOrderLock {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("take the order lock: %w", err)
			}
		}
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("read stream versions: %w", err)
		}
		for rows.Next() {
			var stream string
			var v int64
			if err := rows.Scan(&stream, &v); err != nil {
				rows.Close()
				return fmt.Errorf("read stream versions: %w", err)
			}
			current[stream] = uint64(v)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read stream versions: %w", err)
		}
		rows, err = br.Query()
		if err != nil {
			return fmt.Errorf("look up event ids: %w", err)
		}
		for rows.Next() {
			var id string
			var st stored
			var v, p int64
			if err := rows.Scan(&id, &st.stream, &v, &p); err != nil {
				rows.Close()
				return fmt.Errorf("look up event ids: %w", err)
			}
			st.version, st.position = uint64(v), uint64(p)
			found[id] = st
		}
		return rows.Err()
	}()
	if closeErr := br.Close(); err == nil && closeErr != nil {
		err = fmt.Errorf("begin: %w", closeErr)
	}
	if err != nil {
		return err
	}

	inserts, later := decide(reqs, current, found)
	var positions []uint64
	if len(inserts) > 0 {
		if positions, err = w.insert(ctx, conn, inserts); err != nil {
			return err
		}
		for _, f := range later {
			f()
		}
		if err := w.erase(ctx, conn, reqs); err != nil {
			return err
		}
	} else {
		for _, f := range later {
			f()
		}
	}
	if hook := w.s.cfg.beforeCommit; hook != nil {
		hook(positions)
	}
	b = &pgx.Batch{}
	if len(positions) > 0 {
		b.Queue(sql.notify, w.s.channel)
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		// The COMMIT may have reached the log before the connection went:
		// the next attempt then finds the ids, and tells its own rows from
		// a client's retry by these positions.
		for _, p := range inserts {
			if p.i == 0 {
				p.r.tried = slices.Clone(p.r.res.Positions)
			}
		}
		return fmt.Errorf("commit: %w", err)
	}
	committed = true
	for _, r := range reqs {
		r.final = true
	}
	return nil
}

// decide answers, in order, every request that does not go in (a retry of
// events already stored, an id stored elsewhere, a wrong expected version)
// and gives the others their versions, following the stream's current
// version and the requests of the same transaction before them. It returns
// the rows to insert, in order, and what to fill in once they have their
// positions (duplicates of rows inserted by an earlier request of the same
// transaction).
func decide(reqs []*request, current map[string]uint64, found map[string]stored) (inserts []place, later []func()) {
	pending := map[string]uint64{}
	inTx := map[string]place{}
	for _, r := range reqs {
		n := len(r.rows)
		r.res, r.err = events.AppendResult{}, nil
		versions, positions := make([]uint64, n), make([]uint64, n)
		dups, fromTx := 0, []int(nil)
		var elsewhere string
		for i, row := range r.rows {
			if st, ok := found[row.id]; ok {
				if st.stream != r.stream {
					elsewhere = st.stream
					break
				}
				versions[i], positions[i] = st.version, st.position
				dups++
			} else if p, ok := inTx[row.id]; ok {
				if p.r.stream != r.stream {
					elsewhere = p.r.stream
					break
				}
				versions[i] = p.r.res.Versions[p.i]
				fromTx = append(fromTx, i)
				dups++
			}
		}
		switch {
		case elsewhere != "":
			r.err = fmt.Errorf("append %s: an event id is already stored in stream %s: %w", r.stream, elsewhere, events.ErrInvalidAppend)
			continue
		case dups == n:
			r.res = events.AppendResult{Versions: versions, Positions: positions, Duplicate: !slices.Equal(positions, r.tried) || len(fromTx) > 0}
			for _, i := range fromTx {
				p := inTx[r.rows[i].id]
				later = append(later, func() { r.res.Positions[i] = p.r.res.Positions[p.i] })
			}
			continue
		case dups > 0:
			r.err = fmt.Errorf("append %s: %d of %d event ids are already stored: %w", r.stream, dups, n, events.ErrInvalidAppend)
			continue
		}
		cur, ok := pending[r.stream]
		if !ok {
			cur = current[r.stream]
		}
		if !r.expected.Matches(cur) {
			r.err = &events.WrongVersionError{Stream: r.stream, Expected: r.expected, Actual: cur}
			continue
		}
		for i := range versions {
			versions[i] = cur + uint64(i) + 1
		}
		r.res = events.AppendResult{Versions: versions, Positions: positions}
		pending[r.stream] = cur + uint64(n)
		for i, row := range r.rows {
			inTx[row.id] = place{r, i}
			inserts = append(inserts, place{r, i})
		}
	}
	return inserts, later
}

// insert writes the rows of inserts in one statement and fills in their
// positions, which it returns in order. They must come out strictly
// increasing in the order of the rows: the append's order, and each
// stream's version order.
func (w *writer) insert(ctx context.Context, conn *pgx.Conn, inserts []place) ([]uint64, error) {
	n := len(inserts)
	streams, ids, types, data, meta := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	versions := make([]int64, n)
	for k, p := range inserts {
		row := p.r.rows[p.i]
		streams[k], versions[k], ids[k], types[k], data[k], meta[k] = p.r.stream, int64(p.r.res.Versions[p.i]), row.id, row.typ, row.data, row.meta
	}
	rows, err := conn.Query(ctx, w.s.sql.insert, streams, versions, ids, types, data, meta, w.s.cfg.clock().UnixNano())
	if err != nil {
		return nil, fmt.Errorf("insert: %w", err)
	}
	byID := make(map[string]uint64, n)
	for rows.Next() {
		var id string
		var p int64
		if err := rows.Scan(&id, &p); err != nil {
			rows.Close()
			return nil, fmt.Errorf("insert: %w", err)
		}
		byID[id] = uint64(p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("insert: %w", err)
	}
	positions := make([]uint64, n)
	for k, p := range inserts {
		pos, ok := byID[p.r.rows[p.i].id]
		if !ok || (k > 0 && pos <= positions[k-1]) {
			return nil, fmt.Errorf("insert: row %d of %d came back at position %d (ok %v), not after %d: the identity column did not follow the rows' order",
				k, n, pos, ok, positions[max(k-1, 0)])
		}
		positions[k] = pos
		p.r.res.Positions[p.i] = pos
	}
	return positions, nil
}
