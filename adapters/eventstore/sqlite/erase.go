package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"hermes/events"
	"hermes/projections/storage"
)

// erase applies the erasures of reqs inside the open transaction: every
// earlier event of the erasure's stream is rewritten to what the erasure
// makes of it (events.Erasure), with the erasure's id in its metadata. The
// rows keep their stream, version, position and id. The writer connection
// runs with secure_delete, so the space the old payload held is zeroed in
// the pages this transaction writes. The stream's snapshot, if any, is
// deleted with them.
func (w *writer) erase(reqs []*request) error {
	for _, r := range reqs {
		if !r.erases || r.err != nil || r.res.Duplicate {
			continue
		}
		for i, row := range r.rows {
			if row.erasure == nil {
				continue
			}
			// The rows it rewrites may have older copies in the free
			// space of pages (Purge).
			w.erasedSinceScrub.Store(true)
			if err := w.eraseBefore(r.stream, r.res.Versions[i], row); err != nil {
				return fmt.Errorf("erase %s before version %d: %w", r.stream, r.res.Versions[i], err)
			}
			// The stream's snapshot was folded from the content just
			// erased: it goes in the same transaction (secure_delete
			// zeroes its bytes); the next load folds the erased events.
			if _, err := w.conn.ExecContext(context.Background(), "DELETE FROM snapshots WHERE stream = ?", r.stream); err != nil {
				return fmt.Errorf("erase %s: delete its snapshot: %w", r.stream, err)
			}
		}
	}
	return nil
}

type storedRow struct {
	position int64
	typ      string
	data, md string
}

func (w *writer) eraseBefore(stream string, version uint64, x row) error {
	ctx := context.Background()
	rows, err := w.conn.QueryContext(ctx, "SELECT position, type, data, metadata FROM events WHERE stream = ? AND version < ? ORDER BY version", stream, int64(version))
	if err != nil {
		return err
	}
	var todo []storedRow
	for rows.Next() {
		var s storedRow
		if err := rows.Scan(&s.position, &s.typ, &s.data, &s.md); err != nil {
			rows.Close()
			return err
		}
		e, err := events.Decode(s.typ, []byte(s.data))
		if err != nil {
			// An event this build cannot read may hold content: refuse
			// rather than leave it behind.
			rows.Close()
			return fmt.Errorf("position %d: %w", s.position, err)
		}
		erased, changed := x.erasure.Erase(e)
		if !changed {
			continue
		}
		data, err := events.Encode(erased)
		if err != nil {
			rows.Close()
			return err
		}
		var md events.Metadata
		if err := json.Unmarshal([]byte(s.md), &md); err != nil {
			rows.Close()
			return fmt.Errorf("position %d: metadata: %w", s.position, err)
		}
		md.Redacted = x.id
		meta, err := json.Marshal(md)
		if err != nil {
			rows.Close()
			return err
		}
		s.data, s.md = string(data), string(meta)
		todo = append(todo, s)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, s := range todo {
		if _, err := w.conn.ExecContext(ctx, "UPDATE events SET data = ?, metadata = ? WHERE position = ?", s.data, s.md, s.position); err != nil {
			return fmt.Errorf("position %d: %w", s.position, err)
		}
	}
	return nil
}

// op is a job run on the writer's connection between batches.
type op struct {
	run   func(w *writer) error
	reply chan error
}

// Purge implements events.Eraser: it checkpoints the write-ahead log into
// the database file and truncates it to zero bytes, so the page images an
// erasure replaced are neither in the WAL nor in the file (the file's pages
// were rewritten, freed space zeroed by secure_delete). It waits while a
// reader holds an older snapshot, and fails if one keeps holding it.
//
// When an erasure was committed since the last scrub (or this is the
// process's first purge), it first zeroes the free space of every page
// (storage.ScrubFreeSpace): a redaction that makes a row longer (the
// erasure's id in its metadata) can overflow its page, and the rebalance
// leaves old copies of the cells it moves in the pages' free space, where
// secure_delete never looks (TestPurge_LeavesNoCopyInFreeSpace). The pages
// are read on a reader connection while the writer goes on appending; the
// writer is held only to rewrite the pages found and to checkpoint.
func (s *Store) Purge(ctx context.Context) error {
	if s.w == nil {
		return fmt.Errorf("purge event store: %w", ErrReadOnly)
	}
	var dirty []int64
	erased, unknown := s.w.erasedSinceScrub.Swap(false), s.w.notScrubbedSinceOpen.Load()
	if erased || unknown {
		var err error
		if _, dirty, err = storage.FindDirtyPages(ctx, s.readers); err != nil {
			if erased {
				s.w.erasedSinceScrub.Store(true)
			}
			return fmt.Errorf("purge event store %s: %w", s.path, err)
		}
	}
	o := op{reply: make(chan error, 1), run: func(w *writer) error {
		if _, err := storage.ZeroFreeSpace(ctx, w.conn, dirty); err != nil {
			return err
		}
		return storage.CheckpointTruncate(ctx, w.conn)
	}}
	err := func() error {
		select {
		case s.w.ops <- o:
		case <-s.closing:
			return fmt.Errorf("purge event store: %w", ErrClosed)
		case <-ctx.Done():
			return fmt.Errorf("purge event store: %w", ctx.Err())
		}
		if err := <-o.reply; err != nil {
			return fmt.Errorf("purge event store %s: %w", s.path, err)
		}
		return nil
	}()
	switch {
	case err != nil && erased:
		s.w.erasedSinceScrub.Store(true)
	case err == nil && unknown:
		s.w.notScrubbedSinceOpen.Store(false)
	}
	return err
}

// MarkPurged tells the store that the clean stop of the last process that
// wrote the file purged it (cmd's purged_at_stop) and nothing was written
// since: the first purge of this process scrubs the free space only if an
// erasure was committed in between.
func (s *Store) MarkPurged() {
	if s.w != nil {
		s.w.notScrubbedSinceOpen.Store(false)
	}
}
