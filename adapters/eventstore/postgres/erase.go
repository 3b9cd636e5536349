package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"hermes/events"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// erase applies the erasures of the inserted requests inside the open
// transaction: every earlier event of the erasure's stream is rewritten to
// what the erasure makes of it (events.Erasure), with the erasure's id in
// its metadata; the rows keep their stream, version, position and id. The
// stream's snapshot, folded from the content just erased, is deleted, and
// the erasure is recorded as not yet purged: the old row versions stay in
// the tables' files until Purge rewrites them.
func (w *writer) erase(ctx context.Context, conn *pgx.Conn, reqs []*request) error {
	for _, r := range reqs {
		if !r.erases || r.err != nil || r.res.Duplicate {
			continue
		}
		for i, row := range r.rows {
			if row.erasure == nil {
				continue
			}
			if _, err := eraseBefore(ctx, conn, &w.s.sql, r.stream, r.res.Versions[i], row); err != nil {
				return fmt.Errorf("erase %s before version %d: %w", r.stream, r.res.Versions[i], err)
			}
			if _, err := conn.Exec(ctx, w.s.sql.eraseSnapshot, r.stream); err != nil {
				return fmt.Errorf("erase %s: delete its snapshot: %w", r.stream, err)
			}
			if _, err := conn.Exec(ctx, w.s.sql.markUnpurged, int64(r.res.Positions[i])); err != nil {
				return fmt.Errorf("erase %s: %w", r.stream, err)
			}
		}
	}
	return nil
}

// querier is what eraseBefore needs of a connection or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// eraseBefore rewrites the events of stream before version to what the
// erasure x makes of them, and says how many it rewrote.
func eraseBefore(ctx context.Context, conn querier, sql *statements, stream string, version uint64, x row) (int, error) {
	rows, err := conn.Query(ctx, sql.eraseRead, stream, int64(version))
	if err != nil {
		return 0, err
	}
	var positions []int64
	var data, meta []string
	for rows.Next() {
		var position int64
		var typ, d, m string
		if err := rows.Scan(&position, &typ, &d, &m); err != nil {
			rows.Close()
			return 0, err
		}
		e, err := events.Decode(typ, []byte(d))
		if err != nil {
			// An event this build cannot read may hold content: refuse
			// rather than leave it behind.
			rows.Close()
			return 0, fmt.Errorf("position %d: %w", position, err)
		}
		erased, changed := x.erasure.Erase(e)
		if !changed {
			continue
		}
		enc, err := events.Encode(erased)
		if err != nil {
			rows.Close()
			return 0, err
		}
		var md events.Metadata
		if err := json.Unmarshal([]byte(m), &md); err != nil {
			rows.Close()
			return 0, fmt.Errorf("position %d: metadata: %w", position, err)
		}
		md.Redacted = x.id
		mdEnc, err := json.Marshal(md)
		if err != nil {
			rows.Close()
			return 0, err
		}
		positions, data, meta = append(positions, position), append(data, string(enc)), append(meta, string(mdEnc))
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(positions) == 0 {
		return 0, nil
	}
	_, err = conn.Exec(ctx, sql.eraseUpdate, positions, data, meta)
	return len(positions), err
}

// purgePoll is how often Purge looks again while an older snapshot (a
// session's transaction begun before the erasure) would keep the old row
// versions alive through the rewrite.
const purgePoll = 50 * time.Millisecond

// Purge implements events.Eraser: once no session of the database holds a
// snapshot from before the call, it rewrites the events and snapshots
// tables (VACUUM FULL), so the row versions an erasure replaced are in no
// file of the tables, their TOAST tables or their indexes; a plain VACUUM
// would only mark their space free, leaving their bytes in the pages
// (TestPurge_PlainVacuumLeavesTheBytes). Without an erasure since the last
// purge it does nothing; several nodes purging at once take turns, and the
// second finds nothing left.
//
// The rewrite holds an ACCESS EXCLUSIVE lock on each table while it copies
// it: appends and reads of this store wait meanwhile (see the package doc
// for its cost). What stays out of reach — the write-ahead log not yet
// recycled, archives, base backups, replicas' WAL — is in the package doc.
func (s *Store) Purge(ctx context.Context) error {
	if err := s.writable(); err != nil {
		return fmt.Errorf("purge event store: %w", err)
	}
	if err := s.purge(ctx); err != nil {
		return fmt.Errorf("purge event store (schema %s): %w", s.schema, err)
	}
	return nil
}

func (s *Store) purge(ctx context.Context) error {
	var pending bool
	if err := s.readers.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+s.sql.schema+".unpurged_erasures)").Scan(&pending); err != nil {
		return err
	}
	if !pending {
		return nil
	}
	// A connection of its own: VACUUM runs outside any transaction, and
	// its session settings must not reach the readers' pool.
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", s.keys.purge); err != nil {
		return fmt.Errorf("take the purge lock: %w", err)
	}
	var upTo int64
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(position), 0) FROM "+s.sql.schema+".unpurged_erasures").Scan(&upTo); err != nil {
		return err
	}
	if upTo == 0 {
		return nil // another node purged meanwhile
	}
	if err := waitOlderSnapshots(ctx, conn); err != nil {
		return err
	}
	// The rewrite of a big log outlasts the default statement_timeout.
	if _, err := conn.Exec(ctx, "SET statement_timeout = 0"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "VACUUM (FULL) "+s.sql.schema+".events, "+s.sql.schema+".snapshots"); err != nil {
		return fmt.Errorf("rewrite the tables: %w", err)
	}
	if _, err := conn.Exec(ctx, "DELETE FROM "+s.sql.schema+".unpurged_erasures WHERE position <= $1", upTo); err != nil {
		return err
	}
	return nil
}

// waitOlderSnapshots waits until no other session of this database, no
// replication slot and no prepared transaction holds a snapshot that
// could still see a row version replaced before the call: VACUUM FULL
// copies such "recently dead" versions into the new files. It reads the
// oldest snapshot horizon (backend_xmin) of each session against the next
// transaction id as of its start; PostgreSQL shows it for every role's
// sessions. An autovacuum worker's horizon does not hold rows back, but a
// role that may not see other roles' backend types waits for it too.
func waitOlderSnapshots(ctx context.Context, conn *pgx.Conn) error {
	var horizon string
	if err := conn.QueryRow(ctx, "SELECT (pg_snapshot_xmax(pg_current_snapshot())::text::bigint % 4294967296)::text").Scan(&horizon); err != nil {
		return fmt.Errorf("read the transaction horizon: %w", err)
	}
	for {
		var holders int
		var example *string
		err := conn.QueryRow(ctx, `WITH older AS (
				SELECT format('session %s (%s, %s)', pid, coalesce(application_name, ''), state) AS who
					FROM pg_stat_activity
					WHERE datname = current_database() AND pid <> pg_backend_pid()
						AND backend_type IS DISTINCT FROM 'autovacuum worker'
						AND backend_xmin IS NOT NULL AND age(backend_xmin) > age($1::xid)
				UNION ALL
				SELECT format('replication slot %s', slot_name) FROM pg_replication_slots
					WHERE (database IS NULL OR database = current_database())
						AND xmin IS NOT NULL AND age(xmin) > age($1::xid)
				UNION ALL
				SELECT format('prepared transaction %s', gid) FROM pg_prepared_xacts
					WHERE database = current_database() AND age(transaction) > age($1::xid))
			SELECT count(*), min(who) FROM older`, horizon).Scan(&holders, &example)
		if err != nil {
			return fmt.Errorf("look for older snapshots: %w", err)
		}
		if holders == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			who := ""
			if example != nil {
				who = *example
			}
			return errors.Join(fmt.Errorf("%d snapshots from before the erasure are still held (%s); the rewrite would keep the erased rows for them", holders, who), ctx.Err())
		case <-time.After(purgePoll):
		}
	}
}
