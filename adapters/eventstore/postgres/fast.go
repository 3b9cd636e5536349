package postgres

import (
	"context"
	"errors"
	"fmt"

	"hermes/events"

	"github.com/jackc/pgx/v5"
)

// The fast path commits a group of appends in one round trip: the order
// lock, one INSERT that decides each append in SQL, and the notification,
// pipelined and committed together (one implicit transaction, ended by the
// pipeline's Sync). The INSERT reads each stream's current version with
// its own snapshot, taken after the lock was granted, checks the expected
// version, and leaves out every append of a stream one of whose ids is
// already stored; the rows that go in get their versions from the current
// one and their positions in the order of the appends. An append it leaves
// out (a conflict, a retry, an id of another stream) is not refused by it:
// the checked path (writer.go) decides it afterwards, in a transaction of
// its own, and answers it as the port says. Appends that erase, and a
// stream with several appends in one group, go to the checked path
// directly.

// fastInsert is the fast path's INSERT. Its arguments are arrays of the
// rows: stream, the row's index in its append (from 1), id, type, data,
// metadata, and the append's condition (0 for any version, 1 for an exact
// one) and expected version; $9 is the time. Every plan of it is linear in
// the rows (the generic plan too, which PostgreSQL picks after five
// executions, estimating the arrays at 100 rows): each row looks its
// stream's version up and its id up with an index probe of its own (the
// LATERAL subqueries with LIMIT are never turned into joins), and a
// stream with a stored id is left out through a hashed set. All rows of
// an append read the same version (one stream, one snapshot), so an
// append goes in whole or not at all.
const fastInsert = `WITH r AS (
		SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::smallint[], $8::bigint[])
			WITH ORDINALITY AS r(stream, k, event_id, type, data, metadata, kind, expected, n)
	), stored AS (
		SELECT DISTINCT r.stream FROM r,
			LATERAL (SELECT 1 FROM {schema}.events e WHERE e.event_id = r.event_id LIMIT 1) AS hit
	)
	INSERT INTO {schema}.events (stream, version, event_id, type, data, metadata, recorded_at)
	SELECT r.stream, c.current + r.k, r.event_id, r.type, r.data, r.metadata, $9
	FROM r, LATERAL (SELECT coalesce((SELECT e.version FROM {schema}.events e WHERE e.stream = r.stream
			ORDER BY e.version DESC LIMIT 1), 0) AS current) AS c
	WHERE r.stream NOT IN (SELECT stream FROM stored) AND (r.kind = 0 OR c.current = r.expected)
	ORDER BY r.n
	RETURNING event_id, version, position`

// splitFast sorts reqs into those the fast path may take and those it
// may not: an append that erases (its rewrite needs the checked path's
// transaction), every append of a stream that has several in the group
// (the INSERT reads each stream's version once), and an append reusing an
// id of an earlier one of the group (the INSERT would fail on it).
func splitFast(reqs []*request) (fast, checked []*request) {
	perStream := make(map[string]int, len(reqs))
	for _, r := range reqs {
		perStream[r.stream]++
	}
	ids := make(map[string]bool)
	for _, r := range reqs {
		ok := !r.erases && perStream[r.stream] == 1
		for _, row := range r.rows {
			if ids[row.id] {
				ok = false
			}
			ids[row.id] = true
		}
		if ok {
			fast = append(fast, r)
		} else {
			checked = append(checked, r)
		}
	}
	return fast, checked
}

// placedRow is where the fast path's INSERT put a row.
type placedRow struct{ version, position uint64 }

// transactFast runs reqs on the fast path, marks final those it
// committed, and returns those it left out. With the beforeCommit hook
// set (tests) it takes two round trips, an explicit transaction around
// the INSERT and the hook between it and the COMMIT.
func (w *writer) transactFast(reqs []*request) (left []*request, err error) {
	conn, err := w.connection()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), txTimeout)
	defer cancel()
	hook := w.s.cfg.beforeCommit

	var streams, ids, types, data, meta []string
	var ks []int32
	var kinds []int16
	var expected []int64
	for _, r := range reqs {
		var kind int16 = 1 // exact, or no stream (version 0)
		v, _ := r.expected.Exact()
		if r.expected.IsAny() {
			kind = 0
		}
		for i, row := range r.rows {
			streams, ids, types, data, meta = append(streams, r.stream), append(ids, row.id), append(types, row.typ), append(data, row.data), append(meta, row.meta)
			ks, kinds, expected = append(ks, int32(i+1)), append(kinds, kind), append(expected, int64(v))
		}
	}
	b := &pgx.Batch{}
	if hook != nil {
		b.Queue("BEGIN")
	}
	if !w.s.cfg.noOrderLock {
		b.Queue(w.s.sql.lock, w.s.keys.order)
	}
	b.Queue(w.s.sql.fastInsert, streams, ks, ids, types, data, meta, kinds, expected, w.s.cfg.clock().UnixNano())
	if hook == nil {
		b.Queue(w.s.sql.notify, w.s.channel)
	}
	placed := make(map[string]placedRow, len(ids))
	br := conn.SendBatch(ctx, b)
	err = func() error {
		if hook != nil {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("begin: %w", err)
			}
		}
		if !w.s.cfg.noOrderLock {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("take the order lock: %w", err)
			}
		}
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		for rows.Next() {
			var id string
			var v, p int64
			if err := rows.Scan(&id, &v, &p); err != nil {
				rows.Close()
				return fmt.Errorf("insert: %w", err)
			}
			placed[id] = placedRow{uint64(v), uint64(p)}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		return nil
	}()
	if closeErr := br.Close(); err == nil && closeErr != nil {
		err = fmt.Errorf("commit: %w", closeErr)
	}
	if err != nil {
		// Without the hook the transaction ends with the pipeline: rolled
		// back, or, if only the answer was lost, committed. The retry
		// tells its own rows by these positions.
		markTried(reqs, placed)
		w.abort()
		return nil, err
	}
	positions := make([]uint64, 0, len(placed))
	for _, id := range ids {
		if p, ok := placed[id]; ok {
			if len(positions) > 0 && p.position <= positions[len(positions)-1] {
				w.abort()
				return nil, fmt.Errorf("insert: row %s came back at position %d, not after %d: the identity column did not follow the rows' order",
					id, p.position, positions[len(positions)-1])
			}
			positions = append(positions, p.position)
		}
	}
	if hook != nil {
		hook(positions)
		b = &pgx.Batch{}
		b.Queue(w.s.sql.notify, w.s.channel)
		b.Queue("COMMIT")
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			markTried(reqs, placed)
			w.abort()
			return nil, fmt.Errorf("commit: %w", err)
		}
	}
	for _, r := range reqs {
		first, ok := placed[r.rows[0].id]
		if !ok {
			left = append(left, r)
			continue
		}
		versions, ps := make([]uint64, len(r.rows)), make([]uint64, len(r.rows))
		for i, row := range r.rows {
			p, ok := placed[row.id]
			if !ok || p.version != first.version+uint64(i) {
				// Cannot happen (the INSERT takes an append whole or not
				// at all); if it did, the log is as committed and the
				// caller must not be told otherwise.
				r.res, r.err = events.AppendResult{}, fmt.Errorf("append %s: committed in part (row %d): %w", r.stream, i, errPartial)
				r.final = true
				break
			}
			versions[i], ps[i] = p.version, p.position
		}
		if r.final {
			continue
		}
		r.res = events.AppendResult{Versions: versions, Positions: ps, Duplicate: false}
		r.err, r.final = nil, true
	}
	return left, nil
}

// errPartial is an append the fast path committed only in part, which its
// INSERT rules out.
var errPartial = errors.New("internal error: an append split by the fast path")

// markTried records, for a retry after an attempt whose outcome is not
// known, the positions the attempt's INSERT gave the rows.
func markTried(reqs []*request, placed map[string]placedRow) {
	for _, r := range reqs {
		if _, ok := placed[r.rows[0].id]; ok {
			r.tried = make([]uint64, len(r.rows))
			for i, row := range r.rows {
				r.tried[i] = placed[row.id].position
			}
		}
	}
}
