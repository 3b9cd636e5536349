package sessions

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samber/lo"
	_ "modernc.org/sqlite"

	"hermes/domain"
	"hermes/events"
	"hermes/projections"
	"hermes/projections/storage"
)

// Name is the versioned name of this projection; bump it when the rows'
// meaning changes and the read model rebuilds from position 0.
// v2: a stop drops the restart counts of the lanes it did not cut.
// v3: token sums saturate and absurd costs are quarantined (domain/clamp.go),
// so a lane row an older build wrapped or made infinite is rebuilt.
// v4: with several nodes, a stop of one node counts the lanes it cut and
// drops only the counts that node recorded (each count keeps its node).
const Name = "sessions.v4"

// cacheKiB is the page cache of each connection to lanes.db (SQLite's
// default is 2,000 KiB). A cached page costs about twice its size resident
// (modernc's allocator gives a 4 KiB page and its header an 8 KiB slot),
// and the pool holds a writer, a reader for queries and one for the
// sessions.json export, which reads every row: at the default, touching
// 10k lanes filled ~12 MiB of the server's RSS. The writer's batches
// update rows by key, so a miss costs one read of a page the OS has cached.
// SQLite's page pool is shared by the process's connections: one at its
// size takes the least recently used page of any other rather than
// allocating (one held ~4 MB after 10k lanes were touched), so this bounds
// what these connections add to the process, not what each one holds.
const cacheKiB = 1024

// Exports are the compatibility files written after applied batches; an
// empty path disables that file.
type Exports struct {
	// SessionsJSON is <home>/sessions/sessions.json.
	SessionsJSON string
	// RestartFailureCounts is <home>/.restart_failure_counts.
	RestartFailureCounts string
	// Location is the time zone of the naive timestamps Hermes writes.
	Location *time.Location
	// MinInterval spaces out sessions.json rewrites under load (a file of
	// 100,000 lanes is tens of megabytes); a skipped rewrite happens with
	// the next batch after the interval, or at Flush.
	MinInterval time.Duration
}

// Projection is the lane read model on one SQLite file.
type Projection struct {
	db      *sql.DB
	exports Exports

	mu       sync.Mutex // serialises Apply
	caughtUp bool
	// applied is the checkpoint as of the last batch this process
	// committed (valid when appliedKnown; both under mu): Apply reads it
	// from meta only once, not on every batch.
	applied      uint64
	appliedKnown bool

	// stmts holds the statements of the hot paths (the checkpoint write of
	// every batch, the lane of a session on every appended message).
	stmts projections.StmtCache

	// The compatibility files are written by a goroutine of their own, so a
	// large sessions.json never holds up the projection (and with it the
	// API's read-your-writes).
	exportMu     sync.Mutex // serialises writes of the files
	dirtyJSON    atomic.Bool
	dirtyCounts  atomic.Bool
	kick         chan struct{}
	stopExporter chan struct{}
	exporterDone chan struct{}
	exporterOnce sync.Once

	// limit is the max_page_count of SetMaxPageCount.
	limit storage.PageLimit

	// clamps is told of the values the lane fold clamped; nil drops them.
	clamps projections.ClampReporter

	// bulk is set between BeginBulk and EndBulk (see bulk.go); under mu.
	bulk bulkLoad
}

var _ projections.Projection = (*Projection)(nil)
var _ projections.Caught = (*Projection)(nil)

// Open opens (creating, mode 0600) the read model at path.
func Open(path string, exports Exports) (*Projection, error) {
	if exports.Location == nil {
		exports.Location = time.UTC
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open sessions read model %s: %w", path, err)
	}
	f.Close()
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", fmt.Sprintf("cache_size(-%d)", cacheKiB))
	// A rewritten row (an erased origin) leaves no old bytes in its page.
	q.Add("_pragma", "secure_delete(1)")
	q.Add("_txlock", "immediate")
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String())
	if err != nil {
		return nil, fmt.Errorf("open sessions read model %s: %w", path, err)
	}
	if err := migrateSchema(context.Background(), db, migrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sessions read model %s: %w", path, err)
	}
	return &Projection{db: db, exports: exports, kick: make(chan struct{}, 1),
		stopExporter: make(chan struct{}), exporterDone: make(chan struct{})}, nil
}

// SetMaxPageCount bounds the file's growth to n pages from the next batch
// on (0 lifts the bound): a batch that needs more fails with
// events.ErrStorageFull, as on a full disk. For tests.
func (p *Projection) SetMaxPageCount(n int64) { p.limit.Set(n) }

// ReportClampsTo sends the values the lane fold clamps or quarantines
// (domain.EvolveClamped) to r, after each committed batch. Call it before
// the first Apply.
func (p *Projection) ReportClampsTo(r projections.ClampReporter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clamps = r
}

// Name implements projections.Projection.
func (p *Projection) Name() string { return Name }

// Close implements projections.Projection. Pending exports are dropped;
// call Flush first to write them.
func (p *Projection) Close() error {
	close(p.stopExporter)
	p.exporterOnce.Do(func() { close(p.exporterDone) })
	<-p.exporterDone
	return errors.Join(p.stmts.Close(), p.db.Close())
}

// Purge removes erased content from every file of lanes.db and from the
// exports: pending exports are written (sessions.json and the restart
// counts are replaced by rename), then the WAL is checkpointed into the
// file and truncated, so no older page image survives. Rows rewritten by an
// erasure are already zeroed in their pages (secure_delete).
func (p *Projection) Purge(ctx context.Context) error {
	// No export may hold a read of lanes.db across the VACUUM and the
	// checkpoint: it would make the checkpoint retry until it gives up.
	p.exportMu.Lock()
	defer p.exportMu.Unlock()
	p.dirtyJSON.Store(true)
	p.dirtyCounts.Store(true)
	if _, err := p.exportLocked(ctx, nil); err != nil {
		return fmt.Errorf("purge sessions read model: %w", err)
	}
	if err := p.vacuumIfErased(ctx); err != nil {
		return fmt.Errorf("purge sessions read model: %w", err)
	}
	if err := storage.CheckpointTruncate(ctx, p.db); err != nil {
		return fmt.Errorf("purge sessions read model: %w", err)
	}
	return nil
}

// vacuumPendingKey is the meta row set, in the transaction of the batch,
// when a batch erased a lane's content (events.LaneErased), and removed by
// the VACUUM of the next purge: it survives a crash in between.
const vacuumPendingKey = "vacuum_pending"

// vacuumIfErased rebuilds lanes.db with VACUUM when a lane was erased since
// the last one. secure_delete zeroes the cells SQLite deletes, but not the
// old copies a b-tree rebalance leaves in the unused middle of a page when
// it moves cells to another page: lane rows move often (each write is an
// INSERT OR REPLACE), so a copy of an origin erased later can stay in a
// page's gap (TestPurge_LeavesNoCopyOfAnErasedOrigin). VACUUM writes every
// page afresh from the live rows; the checkpoint that follows puts them in
// the file.
func (p *Projection) vacuumIfErased(ctx context.Context) error {
	p.mu.Lock() // no batch between the VACUUM and the removal of the mark
	defer p.mu.Unlock()
	var v string
	err := p.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, vacuumPendingKey).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", vacuumPendingKey, err)
	}
	if _, err := p.db.ExecContext(ctx, `VACUUM`); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	if _, err := p.db.ExecContext(ctx, `DELETE FROM meta WHERE key = ?`, vacuumPendingKey); err != nil {
		return fmt.Errorf("clear %s: %w", vacuumPendingKey, err)
	}
	return nil
}

// Checkpoint implements projections.Projection: a read model written by
// another version of this projection is dropped and rebuilt.
func (p *Projection) Checkpoint(ctx context.Context) (uint64, error) {
	var name, pos string
	err := p.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'projection'`).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, p.reset(ctx)
	}
	if err != nil {
		return 0, fmt.Errorf("read checkpoint: %w", err)
	}
	if name != Name {
		return 0, p.reset(ctx)
	}
	err = p.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'checkpoint'`).Scan(&pos)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read checkpoint: %w", err)
	}
	n, err := strconv.ParseUint(pos, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read checkpoint %q: %w", pos, err)
	}
	return n, nil
}

func (p *Projection) reset(ctx context.Context) error {
	_, err := p.db.ExecContext(ctx, `
		DELETE FROM lanes; DELETE FROM restart_failures; DELETE FROM meta; DELETE FROM gateway_runs;
		INSERT INTO meta(key, value) VALUES ('projection', ?), ('checkpoint', '0')`, Name)
	if err != nil {
		return fmt.Errorf("reset %s: %w", Name, err)
	}
	return nil
}

// batchState is what one Apply has loaded and changed.
type batchState struct {
	rows  map[string]*Row
	dirty map[string]bool
	// touchOnly: the lane existed before the batch and only Touched events
	// changed it, so a narrow UPDATE replaces the full row write.
	touchOnly map[string]bool
	failures  map[string]int
	// failNodes is the node that recorded each loaded count ("" for a
	// single node).
	failNodes map[string]string
	touched   map[string]bool // failure counters changed
	// allFailures: failures holds every lane with a count.
	allFailures bool
	// stopCounted: the current run's end of each node has been counted
	// (domain.RunEnds.Counted, kept in meta); a node is absent until read.
	stopCounted      map[string]bool
	stopCountedDirty map[string]bool
	// clamps are the values the batch's lane events had clamped.
	clamps []projections.Clamp
	// erased: the batch erased a lane's content (vacuumPendingKey).
	erased bool
	// touches are the lanes only Touched events change in a live batch,
	// written without reading their rows (touches.go); nil in a bulk load.
	touches map[string]*pendingTouch
	// runs are the gateway runs loaded (nil: no row) and changed
	// (gatewayruns.go).
	runs      map[runKey]*domain.GatewayRun
	runsDirty map[runKey]bool
}

// Apply implements projections.Projection.
func (p *Projection) Apply(ctx context.Context, batch []events.Envelope) error {
	// A full disk is said so (events.ErrStorageFull): the runner retries
	// the batch, the transaction having rolled back.
	return storage.Classify(p.apply(ctx, batch))
}

func (p *Projection) apply(ctx context.Context, batch []events.Envelope) error {
	if len(batch) == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.appliedKnown {
		cp, err := p.Checkpoint(ctx)
		if err != nil {
			return err
		}
		p.applied, p.appliedKnown = cp, true
	}
	if p.bulk.on {
		return p.applyBulk(ctx, batch)
	}
	checkpoint := p.applied
	setCheckpoint, err := p.stmts.Stmt(ctx, p.db, `UPDATE meta SET value = ? WHERE key = 'checkpoint'`)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	defer tx.Rollback()
	if err := p.limit.Apply(ctx, tx); err != nil {
		return fmt.Errorf("apply: %w", err)
	}

	st := newBatchState()
	st.touches = planTouches(batch, checkpoint)
	last, err := p.fold(ctx, tx, st, batch, checkpoint)
	if err != nil || last == checkpoint {
		return err
	}
	if err := p.writeTouches(ctx, tx, st); err != nil {
		return err
	}
	if err := writeRows(ctx, tx, st); err != nil {
		return err
	}
	if _, err := tx.StmtContext(ctx, setCheckpoint).ExecContext(ctx, strconv.FormatUint(last, 10)); err != nil {
		return fmt.Errorf("apply: write checkpoint: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("apply: commit: %w", err)
	}
	p.applied = last
	if p.clamps != nil {
		for _, c := range st.clamps {
			p.clamps.ReportClamp(c)
		}
	}
	if len(st.dirty) > 0 || len(st.touches) > 0 {
		p.dirtyJSON.Store(true)
	}
	if len(st.touched) > 0 {
		p.dirtyCounts.Store(true)
	}
	if p.caughtUp {
		p.requestExport()
	}
	return nil
}

// newBatchState returns an empty batchState.
func newBatchState() *batchState {
	return &batchState{rows: map[string]*Row{}, dirty: map[string]bool{}, touchOnly: map[string]bool{}, failures: map[string]int{},
		failNodes: map[string]string{}, touched: map[string]bool{}, stopCounted: map[string]bool{}, stopCountedDirty: map[string]bool{},
		runs: map[runKey]*domain.GatewayRun{}, runsDirty: map[runKey]bool{}}
}

// queryer is a *sql.Tx, or the *sql.DB between the commits of a bulk load.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// fold applies the envelopes of batch above checkpoint to st, reading the
// rows it does not hold yet through q, and returns the position of the last
// one (checkpoint when there is none).
func (p *Projection) fold(ctx context.Context, q queryer, st *batchState, batch []events.Envelope, checkpoint uint64) (uint64, error) {
	if err := st.preload(ctx, q, batch, checkpoint); err != nil {
		return checkpoint, err
	}
	last := checkpoint
	for _, env := range batch {
		if env.Position <= checkpoint {
			continue
		}
		last = env.Position
		if key, ok := events.SessionKeyOf(env.Stream); ok {
			if _, touch := st.touches[key]; touch {
				continue // written by writeTouches
			}
			if err := p.applyLane(ctx, q, st, key, env); err != nil {
				return checkpoint, err
			}
			continue
		}
		if events.IsGatewayStream(env.Stream) {
			if err := p.applyGateway(ctx, q, st, env); err != nil {
				return checkpoint, err
			}
			continue
		}
		if gateway, ok := events.GatewayOfRunStream(env.Stream); ok {
			if err := p.applyGatewayRun(ctx, q, st, gateway, env); err != nil {
				return checkpoint, err
			}
		}
	}
	return last, nil
}

func (p *Projection) applyLane(ctx context.Context, tx queryer, st *batchState, key string, env events.Envelope) error {
	row, err := st.row(ctx, tx, key)
	if err != nil {
		return err
	}
	if env.Version <= row.Version {
		return nil
	}
	if _, ok := env.Event.(events.LaneErased); ok {
		st.erased = true
	}
	_, isTouch := env.Event.(events.Touched)
	if !st.dirty[key] {
		st.touchOnly[key] = isTouch && row.Version > 0
	} else if !isTouch {
		st.touchOnly[key] = false
	}
	var clamps []domain.Clamp
	row.Lane, clamps = domain.EvolveClamped(row.Lane, env.Event)
	for _, c := range clamps {
		st.clamps = append(st.clamps, projections.Clamp{Projection: Name, Stream: env.Stream,
			Position: env.Position, Field: c.Field, Rule: c.Rule})
	}
	row.Version = env.Version
	st.dirty[key] = true
	if e, ok := env.Event.(events.LaneImported); ok {
		// Hermes' .restart_failure_counts carries over as the lane's count,
		// recorded by the node that imported it.
		return st.setFailures(ctx, tx, key, max(e.RestartFailureCount, 0), env.Metadata.Node)
	}
	if domain.ClearsRestartCount(env.Event) {
		return st.setFailures(ctx, tx, key, 0, "")
	}
	return nil
}

// applyGateway derives the stuck-loop counts from the ends of runs the log
// records (see domain.RunEnds), per node: a stop of node N (an event of its
// gateway stream) counts one more interrupted restart for each lane it cut
// and drops the counts N recorded of every other lane; counts other nodes
// recorded stay. A single node ("gateway") is the node "".
func (p *Projection) applyGateway(ctx context.Context, tx queryer, st *batchState, env events.Envelope) error {
	node := gatewayNode(env.Stream)
	counted, err := st.isStopCounted(ctx, tx, node)
	if err != nil {
		return err
	}
	ends := domain.RunEnds{Counted: counted}
	cut, end := ends.Observe(env.Event)
	if err := st.setStopCounted(ctx, tx, node, ends.Counted); err != nil {
		return err
	}
	if !end {
		return nil
	}
	return st.countStop(ctx, tx, node, cut)
}

// gatewayNode is the node of a gateway stream: "" for "gateway", N for
// "gateway-N".
func gatewayNode(stream string) string {
	node, _ := strings.CutPrefix(stream, events.GatewayStream+"-")
	if stream == events.GatewayStream {
		return ""
	}
	return node
}

// countStop counts one interrupted restart for each lane in cut, recorded
// by node, and drops the count of every other lane node recorded.
func (st *batchState) countStop(ctx context.Context, tx queryer, node string, cut []string) error {
	if err := st.loadAllFailures(ctx, tx); err != nil {
		return err
	}
	cut = lo.Uniq(cut)
	isCut := lo.Keyify(cut)
	for _, key := range slices.Collect(maps.Keys(st.failures)) {
		if _, counted := isCut[key]; !counted && st.failNodes[key] == node {
			if err := st.setFailures(ctx, tx, key, 0, node); err != nil {
				return err
			}
		}
	}
	for _, key := range cut {
		n, err := st.failureCount(ctx, tx, key)
		if err != nil {
			return err
		}
		if err := st.setFailures(ctx, tx, key, n+1, node); err != nil {
			return err
		}
	}
	return nil
}

// loadAllFailures reads every stored count the batch has not loaded yet.
func (st *batchState) loadAllFailures(ctx context.Context, tx queryer) error {
	if st.allFailures {
		return nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT session_key, count, node FROM restart_failures`)
	if err != nil {
		return fmt.Errorf("load restart failures: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key, node string
		var n int
		if err := rows.Scan(&key, &n, &node); err != nil {
			return fmt.Errorf("load restart failures: %w", err)
		}
		if _, ok := st.failures[key]; !ok {
			st.failures[key] = n
			st.failNodes[key] = node
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load restart failures: %w", err)
	}
	st.allFailures = true
	return nil
}

// stopCountedKey is the meta row of a node's stop_counted.
func stopCountedKey(node string) string {
	if node == "" {
		return "stop_counted"
	}
	return "stop_counted/" + node
}

func (st *batchState) isStopCounted(ctx context.Context, tx queryer, node string) (bool, error) {
	if counted, ok := st.stopCounted[node]; ok {
		return counted, nil
	}
	var v string
	err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, stopCountedKey(node)).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("load stop_counted: %w", err)
	}
	st.stopCounted[node] = v == "1"
	return v == "1", nil
}

func (st *batchState) setStopCounted(ctx context.Context, tx queryer, node string, counted bool) error {
	cur, err := st.isStopCounted(ctx, tx, node)
	if err != nil || cur == counted {
		return err
	}
	st.stopCounted[node] = counted
	st.stopCountedDirty[node] = true
	return nil
}

func (st *batchState) row(ctx context.Context, tx queryer, key string) (*Row, error) {
	if r, ok := st.rows[key]; ok {
		return r, nil
	}
	r, err := scanLane(tx.QueryRowContext(ctx, `SELECT `+laneColumns+` FROM lanes WHERE session_key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		r = Row{}
	} else if err != nil {
		return nil, fmt.Errorf("load lane %s: %w", key, err)
	}
	st.rows[key] = &r
	return &r, nil
}

// preloadChunk bounds the parameters of one IN (...) query.
const preloadChunk = 400

// preload reads the rows of every lane the batch touches in a few queries
// instead of one per lane.
func (st *batchState) preload(ctx context.Context, tx queryer, batch []events.Envelope, checkpoint uint64) error {
	keys := lo.Uniq(lo.FilterMap(batch, func(env events.Envelope, _ int) (string, bool) {
		if env.Position <= checkpoint {
			return "", false
		}
		key, ok := events.SessionKeyOf(env.Stream)
		if _, held := st.rows[key]; held {
			return "", false // a bulk load holds it from an earlier batch
		}
		if _, touch := st.touches[key]; touch {
			return "", false // written without its row (touches.go)
		}
		return key, ok
	}))
	for _, chunk := range lo.Chunk(keys, preloadChunk) {
		args := make([]any, len(chunk))
		for i, k := range chunk {
			args[i] = k
			empty := Row{}
			st.rows[k] = &empty
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+laneColumns+` FROM lanes WHERE session_key IN (?`+strings.Repeat(", ?", len(chunk)-1)+`)`, args...)
		if err != nil {
			return fmt.Errorf("load lanes: %w", err)
		}
		for rows.Next() {
			r, err := scanLane(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("load lanes: %w", err)
			}
			st.rows[r.Lane.SessionKey] = &r
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("load lanes: %w", err)
		}
	}
	return nil
}

func (st *batchState) failureCount(ctx context.Context, tx queryer, key string) (int, error) {
	if n, ok := st.failures[key]; ok {
		return n, nil
	}
	var n int
	var node string
	err := tx.QueryRowContext(ctx, `SELECT count, node FROM restart_failures WHERE session_key = ?`, key).Scan(&n, &node)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("load restart failures of %s: %w", key, err)
	}
	st.failures[key] = n
	st.failNodes[key] = node
	return n, nil
}

// setFailures sets a lane's count to n, recorded by node (a count of 0
// belongs to nobody).
func (st *batchState) setFailures(ctx context.Context, tx queryer, key string, n int, node string) error {
	cur, err := st.failureCount(ctx, tx, key)
	if err != nil {
		return err
	}
	if n == 0 {
		node = ""
	}
	if cur == n && st.failNodes[key] == node {
		return nil
	}
	st.failures[key] = n
	st.failNodes[key] = node
	st.touched[key] = true
	return nil
}

func writeRows(ctx context.Context, tx *sql.Tx, st *batchState) error {
	if len(st.dirty) > 0 {
		stmt, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO lanes(`+laneColumns+`) VALUES (`+lanePlaceholders+`)`)
		if err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		defer stmt.Close()
		touch, err := tx.PrepareContext(ctx, `UPDATE lanes SET version = ?, updated_at = ?, last_prompt_tokens = ? WHERE session_key = ?`)
		if err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		defer touch.Close()
		// In key order: the same batch lays out the same pages.
		for _, key := range slices.Sorted(maps.Keys(st.dirty)) {
			if r := st.rows[key]; st.touchOnly[key] {
				if _, err := touch.ExecContext(ctx, int64(r.Version), nanos(r.Lane.UpdatedAt), r.Lane.LastPromptTokens, key); err != nil {
					return fmt.Errorf("apply: touch lane %s: %w", key, err)
				}
				continue
			}
			vals, err := laneValues(*st.rows[key])
			if err != nil {
				return err
			}
			if _, err := stmt.ExecContext(ctx, vals...); err != nil {
				return fmt.Errorf("apply: write lane %s: %w", key, err)
			}
		}
	}
	if st.erased {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO meta(key, value) VALUES (?, '1')`, vacuumPendingKey); err != nil {
			return fmt.Errorf("apply: %s: %w", vacuumPendingKey, err)
		}
	}
	for node := range st.stopCountedDirty {
		v := "0"
		if st.stopCounted[node] {
			v = "1"
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)`, stopCountedKey(node), v); err != nil {
			return fmt.Errorf("apply: stop_counted: %w", err)
		}
	}
	if err := writeRuns(ctx, tx, st); err != nil {
		return err
	}
	for key := range st.touched {
		var err error
		if n := st.failures[key]; n == 0 {
			_, err = tx.ExecContext(ctx, `DELETE FROM restart_failures WHERE session_key = ?`, key)
		} else {
			_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO restart_failures(session_key, count, node) VALUES (?, ?, ?)`, key, n, st.failNodes[key])
		}
		if err != nil {
			return fmt.Errorf("apply: restart failures of %s: %w", key, err)
		}
	}
	return nil
}

// CaughtUp implements projections.Caught: the exports deferred during
// catch-up are written now, and after every batch from here on.
func (p *Projection) CaughtUp(ctx context.Context) error {
	p.mu.Lock()
	first := !p.caughtUp
	p.caughtUp = true
	p.mu.Unlock()
	if !first {
		return nil
	}
	// The first export after catch-up runs in the background too: a
	// sessions.json of every lane must not delay readiness.
	p.dirtyJSON.Store(true)
	p.dirtyCounts.Store(true)
	p.exporterOnce.Do(func() { go p.exporter() })
	p.requestExport()
	return nil
}
