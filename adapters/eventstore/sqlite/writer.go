package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"hermes/events"
	"hermes/projections/migrate"
	"hermes/projections/storage"
)

const (
	// Bounds of one group commit: enough to absorb every appender of a busy
	// server in one fsync, small enough that one batch does not hold the
	// write lock (and the other processes) for long.
	maxBatchRequests = 1024
	maxBatchBytes    = 16 << 20
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
	// erasure is set when the event erases earlier events of its stream
	// (erase.go); the writer applies it in the transaction of the append.
	erasure events.Erasure
	// args are id, typ, data and meta as INSERT arguments, boxed by the
	// appending goroutine: the writer, the sweeps' critical path, then
	// allocates (and assists the garbage collector) less.
	args [4]any
}

// request is one Append on its way through the writer.
type request struct {
	ctx      context.Context
	stream   string
	expected events.ExpectedVersion
	rows     []row
	size     int
	// reply is the channel a queued Append is answered on; nil for an
	// Append committed inline and an AppendBatch request (answered).
	reply chan reply
	// erases: a row carries an erasure.
	erases bool
	// streamArg is stream as an INSERT argument; places holds the versions
	// and positions of the result (insert), allocated by the appender.
	streamArg any
	places    []uint64
	// oneRow and onePlaces back rows and places for a one-event append.
	oneRow    [1]row
	onePlaces [2]uint64

	// Set by the writer while the request is in a transaction.
	base uint64 // stream version before the request's first event
	res  events.AppendResult
	err  error
	// answered is set when res and err are the request's outcome: how a
	// request without a reply channel is answered.
	answered bool
}

// answer gives r its outcome: on its reply channel when its appender waits
// on one, in r itself otherwise.
func (r *request) answer(res events.AppendResult, err error) {
	if r.reply == nil {
		r.res, r.err, r.answered = res, err, true
		return
	}
	r.reply <- reply{res: res, err: err}
}

type reply struct {
	res events.AppendResult
	err error
}

// writer owns the single write connection. Only the holder of mu touches
// the connection, the statements, the caches and the rest of the writer's
// state: the writer's goroutine, which holds it always except while it
// waits for work (await), and then an appender that commits its own append
// inline (commitInline).
type writer struct {
	mu sync.Mutex
	// idle is set while the writer waits for work after a commit that
	// answered at most one append: an appender may then commit inline.
	// Appenders read it before they try mu, so that they leave mu alone
	// while the writer is busy (with 64 appenders trying it, the writer
	// waited for mu behind them: half the throughput, four times the p99).
	idle atomic.Bool

	db    *sql.DB
	conn  *sql.Conn
	clock func() time.Time
	// tail receives the rows of every commit before onCommit wakes the
	// subscriptions; tailRows is its scratch.
	tail     *committedTail
	tailRows []tailRow
	onCommit func()
	// damage is the store's: a write that meets damage latches it.
	damage *damage
	// migrations are the schema steps init applies.
	migrations []migrate.Step

	reqs chan *request
	// ops are jobs that need the connection outside any batch (Purge).
	ops  chan op
	stop <-chan struct{}
	done chan struct{}
	// answered is how many requests the last commit answered.
	answered int
	// one is commitInline's batch; inlined counts the appends it answered
	// (tests read it, holding mu).
	one     [1]*request
	inlined int

	// versions caches the last version of streams as of the last commit of
	// this connection; valid while dataVersion says no other connection
	// committed since, or always with soleWriter (WithSoleWriter).
	versions    map[string]uint64
	dataVersion int64
	soleWriter  bool
	// pending holds the versions written by the open transaction.
	pending map[string]uint64
	// txReqs are the requests applied in the open transaction, replayed
	// one at a time after a constraint failure (apply); txOneByOne is set
	// once they were; txNow is the time its rows are recorded at.
	txReqs     []*request
	txOneByOne bool
	txNow      int64
	txNowArg   any
	// erasedSinceScrub is set when a batch erased events (erase.go) and
	// cleared by the Purge that scrubs the file's free space.
	// notScrubbedSinceOpen is set at open:
	// an erasure committed before a crash may not have been scrubbed, so
	// the first purge of a process scrubs, unless MarkPurged says the last
	// process's clean stop did.
	erasedSinceScrub, notScrubbedSinceOpen atomic.Bool

	// checkpointDue is set by a commit that skipped the automatic
	// checkpoint (batch.go); the writer runs it once the job is answered.
	checkpointDue bool
	// autoCheckpointOff: switching the automatic checkpoint back on failed.
	autoCheckpointOff bool

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
	inserts            map[insertKey]*sql.Stmt
	// The automatic checkpoint switched off and on around a batch's
	// commit, and the checkpoint run in its place.
	stmtAutoCheckpointOff, stmtAutoCheckpointOn, stmtCheckpoint *sql.Stmt
	// pageLimit is the max_page_count of SetMaxPageCount.
	pageLimit storage.PageLimit
	args      []any
	slots     []slot
	unknown   []string
}

// commitInline commits r on the appending goroutine, without the writer's
// goroutine, when the writer is idle: waiting for work (it let go of mu),
// nothing queued, and its last commit answered one append. That is every
// append of a lone appender, and for it handing the request to the writer
// and the reply back is pure cost: two goroutine wake-ups, often on the
// other processor through a futex, for a group commit that never has
// anyone to group with. The request is committed exactly as the writer
// commits a batch of one, holding mu as the writer does, so commits stay
// serialised and published in order.
//
// It reports false, having done nothing, when the writer holds mu (a batch
// or an op in progress), requests are queued, the last commit served
// several appenders (they are about to come back, and the writer gathers
// them into one commit), or the store is closing; r then goes through
// submit, and concurrent appenders keep sharing their commits.
//
// r's context is checked before the commit, as the writer checks a queued
// request's; the appender then has the outcome when the commit ends, where
// a queued one may give up waiting (outcome unknown). That wait is one
// commit: one fsync, or, while another process holds the write lock (never
// under hermes serve, whose lock on the home keeps other writers out), the
// busy timeout of each BEGIN IMMEDIATE attempt (beginAttempts).
//
// Measured side by side on the shared 2-core machine (load 3 to 6): a lone
// appender's CPU per append fell by a third in BenchmarkAppend
// (appenders=1: 180 to 120 µs; BenchmarkAppendLongStreams 166 to 121 µs).
// Over HTTP (append_message, 1 writer, 23 alternating runs) the server's
// CPU per message moved 0.514 to 0.511 ms (-0.5%, ±1%: within the noise);
// the futex wake-ups it spares were 3% of that profile (2% after), not the
// 6% of a quiet machine. 16 writers kept their group commits (0.241 ms per
// message before and after, 6 runs).
func (w *writer) commitInline(r *request) bool {
	if !w.idle.Load() || len(w.reqs) > 0 || !w.mu.TryLock() {
		return false
	}
	defer func() {
		if p := recover(); p != nil {
			crash(p)
		}
		w.mu.Unlock()
	}()
	// The writer may have taken a request since.
	if !w.idle.Load() || len(w.reqs) > 0 || w.stopping() {
		return false
	}
	w.one[0] = r
	w.commit(w.one[:])
	w.one[0] = nil
	w.inlined++
	return true
}

// crash ends the process with p, raised while an appender held the writer,
// as a panic on the writer's goroutine always did: recovered by the caller
// (the HTTP server recovers its handlers' panics), it would leave the
// connection in the middle of a transaction for the next commit. The
// panicking goroutine keeps mu until the process is gone.
func crash(p any) {
	stack := debug.Stack()
	go panic(fmt.Sprintf("%v [while committing inline]\n\n%s", p, stack))
	select {}
}

func (w *writer) stopping() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
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
// still queued, then returns, keeping mu: no append commits inline once the
// writer has stopped.
func (w *writer) run() {
	defer close(w.done)
	w.mu.Lock()
	batch := make([]*request, 0, maxBatchRequests)
	var carry *request
	stopping := false
	for {
		batch = batch[:0]
		size := 0
		if carry != nil {
			batch, size, carry = append(batch, carry), carry.size, nil
		} else if !stopping {
			r, o, stop := w.await()
			switch {
			case r != nil:
				batch, size = append(batch, r), r.size
			case o.run != nil:
				o.reply <- o.run(w)
				w.checkpointIfDue()
				continue
			case stop:
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

// await waits for the next request, op or stop. The writer lets go of mu
// only here, where it has nothing to do, so that an appender may commit
// inline meanwhile (commitInline); it takes mu back, waiting for such a
// commit to end, before it touches anything.
func (w *writer) await() (r *request, o op, stop bool) {
	w.idle.Store(w.answered <= 1)
	w.mu.Unlock()
	select {
	case r = <-w.reqs:
	case o = <-w.ops:
	case <-w.stop:
		stop = true
	}
	w.idle.Store(false)
	w.mu.Lock()
	return r, o, stop
}

// groupCommit commits r with the requests queued behind it, up to the
// batch bounds, in as many group commits as they need (without gathering:
// an AppendBatch job serves the appends queued between its transactions).
func (w *writer) groupCommit(r *request) {
	var batch []*request
	for r != nil {
		var size int
		batch, size, r = append(batch[:0], r), r.size, nil
	drain:
		for len(batch) < maxBatchRequests {
			select {
			case q := <-w.reqs:
				if size+q.size > maxBatchBytes {
					r = q
					break drain
				}
				batch, size = append(batch, q), size+q.size
			default:
				break drain
			}
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
			r.answer(events.AppendResult{}, fmt.Errorf("append %s: %w", r.stream, err))
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	if err := w.damage.refusal(); err != nil {
		for _, r := range live {
			r.answer(events.AppendResult{}, fmt.Errorf("append %s: %w", r.stream, err))
		}
		return
	}
	if err := w.write(live); err != nil {
		w.damage.note(err)
		// A full or failing disk is said so (events.ErrStorageFull):
		// nothing of the batch is in the log and the same appends succeed
		// once space returns.
		err = storage.Classify(err)
		for _, r := range live {
			r.answer(events.AppendResult{}, fmt.Errorf("append %s: %w", r.stream, err))
		}
		return
	}
	w.collect(live)
	for _, r := range live {
		r.answer(r.res, r.err)
	}
	w.answered = len(live)
	w.publish()
}

// collect gathers the rows reqs committed for the tail, before their
// appenders have their answer (and the results' slices). A commit that
// erased events clears the tail at once, before anyone hears of the
// erasure: the rows it rewrote may be there.
func (w *writer) collect(reqs []*request) {
	rows := w.tailRows[:0]
	clearTail := false
	for _, r := range reqs {
		if r.err != nil || r.res.Duplicate {
			continue
		}
		if r.erases {
			clearTail = true
			break
		}
		for i, row := range r.rows {
			rows = append(rows, tailRow{position: int64(r.res.Positions[i]), version: int64(r.res.Versions[i]),
				recordedAt: w.txNow, stream: r.stream, id: row.id, typ: row.typ, data: row.data, meta: row.meta})
		}
	}
	// Rows are inserted in request order, so they are always sorted; if
	// not, the subscriptions read the file.
	if clearTail || !slices.IsSortedFunc(rows, func(a, b tailRow) int { return cmp.Compare(a.position, b.position) }) {
		w.tail.clear()
		clear(rows)
		rows = rows[:0]
	}
	w.tailRows = rows
}

// publish hands the collected rows to the tail and wakes the
// subscriptions.
func (w *writer) publish() {
	w.tail.push(w.tailRows)
	clear(w.tailRows)
	w.tailRows = w.tailRows[:0]
	w.onCommit()
}
