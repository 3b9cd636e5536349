package storage

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
)

// Conn is one SQLite connection (a *sql.Conn, or a pool of one): the scrub
// reads and writes pages in one transaction on it.
type Conn interface {
	RowQueryer
	Queryer
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// ScrubResult says what ScrubFreeSpace read and rewrote.
type ScrubResult struct {
	Pages     int // pages read
	Rewritten int // pages whose free space held bytes, now zeroed
}

// ScrubFreeSpace zeroes the free space of every b-tree page of the database
// c is on: the unallocated gap between a page's cell-pointer array and its
// cell content, and the bodies of its freeblocks. The rows are unchanged;
// only bytes SQLite no longer reads are cleared.
//
// secure_delete zeroes a cell SQLite deletes, but when a b-tree rebalance
// rebuilds a page (btree.c's rebuildPage) it writes the page's cells afresh
// from the end and leaves the old content area below them as it was: the
// old copies of cells that moved to a sibling page, or higher in the same
// page, stay there, unread, until the page is rebuilt or defragmented
// again. When such a row is erased later, secure_delete zeroes its live
// cell only (docs/ERASURE.md). ScrubFreeSpace finds and clears those
// copies: FindDirtyPages, then ZeroFreeSpace on the same connection.
func ScrubFreeSpace(ctx context.Context, c Conn) (ScrubResult, error) {
	pages, dirty, err := FindDirtyPages(ctx, c)
	if err != nil {
		return ScrubResult{Pages: pages}, fmt.Errorf("scrub free space: %w", err)
	}
	n, err := ZeroFreeSpace(ctx, c, dirty)
	return ScrubResult{Pages: pages, Rewritten: n}, err
}

// ZeroFreeSpace zeroes the free space of the given pages, in one IMMEDIATE
// transaction on c, and returns how many pages it rewrote. A page is read
// again inside the transaction, so pages found by FindDirtyPages on
// another connection before a later write are handled as they are now.
// The caller checkpoints the WAL afterwards so the old images leave it.
func ZeroFreeSpace(ctx context.Context, c Conn, pages []int64) (rewritten int, err error) {
	if len(pages) == 0 {
		return 0, nil
	}
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return 0, fmt.Errorf("zero free space: %w", err)
	}
	defer func() {
		if err != nil {
			_, rerr := c.ExecContext(context.Background(), "ROLLBACK")
			err = errors.Join(err, rerr)
		}
	}()
	if err := checkScrubbable(ctx, c); err != nil {
		return 0, fmt.Errorf("zero free space: %w", err)
	}
	for _, pgno := range pages {
		var page []byte
		if err := c.QueryRowContext(ctx, "SELECT data FROM sqlite_dbpage WHERE pgno = ?", pgno).Scan(&page); err != nil {
			return 0, fmt.Errorf("zero free space: read page %d: %w", pgno, err)
		}
		if !zeroFreeSpace(page, pgno) {
			continue
		}
		if _, err := c.ExecContext(ctx, "UPDATE sqlite_dbpage SET data = ? WHERE pgno = ?", page, pgno); err != nil {
			return 0, fmt.Errorf("zero free space: write page %d: %w", pgno, err)
		}
		rewritten++
	}
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		return 0, fmt.Errorf("zero free space: commit: %w", err)
	}
	return rewritten, nil
}

// Queryer is what FindDirtyPages reads with: a connection or a pool.
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// FindDirtyPages reads every page of the database once, through the
// sqlite_dbpage virtual table (modernc's SQLite has it built in) in one
// statement, hence one snapshot, and returns how many it read and the
// numbers of those whose free space holds a non-zero byte. It writes
// nothing: it may run on a reader connection while the writer appends.
func FindDirtyPages(ctx context.Context, c Queryer) (pages int, dirty []int64, err error) {
	if err := checkScrubbable(ctx, c); err != nil {
		return 0, nil, err
	}
	rows, err := c.QueryContext(ctx, "SELECT pgno, data FROM sqlite_dbpage")
	if err != nil {
		return 0, nil, fmt.Errorf("read pages: %w", err)
	}
	for rows.Next() {
		var pgno int64
		var page sql.RawBytes
		if err := rows.Scan(&pgno, &page); err != nil {
			rows.Close()
			return pages, nil, fmt.Errorf("read pages: %w", err)
		}
		pages++
		if freeSpaceHolds(page, pgno) {
			dirty = append(dirty, pgno)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return pages, nil, fmt.Errorf("read pages: %w", err)
	}
	return pages, dirty, nil
}

// freeSpaceHolds reports whether a b-tree page's free space (the gap and
// the freeblocks' bodies) holds a non-zero byte.
func freeSpaceHolds(page []byte, pgno int64) bool {
	holds := false
	eachFreeRange(page, pgno, func(from, to int) {
		for _, b := range page[from:to] {
			if b != 0 {
				holds = true
				return
			}
		}
	})
	return holds
}

// zeroFreeSpace zeroes a b-tree page's free space in place and reports
// whether a byte changed.
func zeroFreeSpace(page []byte, pgno int64) bool {
	changed := false
	eachFreeRange(page, pgno, func(from, to int) {
		for i := from; i < to; i++ {
			if page[i] != 0 {
				page[i] = 0
				changed = true
			}
		}
	})
	return changed
}

// eachFreeRange calls f with every byte range of a b-tree page that holds
// no live data: the gap between the cell-pointer array and the first
// cell, and each freeblock after its 4-byte header (the SQLite file
// format, "B-tree Pages"). A page that is no b-tree page (overflow,
// freelist, the lock-byte page) or whose header is inconsistent is left
// alone: every range is checked against the page's bounds.
func eachFreeRange(page []byte, pgno int64, f func(from, to int)) {
	hdr := 0
	if pgno == 1 {
		hdr = 100 // the database header
	}
	if len(page) < hdr+8 {
		return
	}
	var headerSize int
	switch page[hdr] {
	case 0x0a, 0x0d: // index and table leaves
		headerSize = 8
	case 0x02, 0x05: // index and table interior pages
		headerSize = 12
	default:
		return
	}
	cells := int(binary.BigEndian.Uint16(page[hdr+3:]))
	content := int(binary.BigEndian.Uint16(page[hdr+5:]))
	if content == 0 {
		content = 65536
	}
	gapStart := hdr + headerSize + 2*cells
	if gapStart <= content && content <= len(page) {
		f(gapStart, content)
	}
	// Freeblocks are chained in increasing order inside the content area.
	next := int(binary.BigEndian.Uint16(page[hdr+1:]))
	for prev := 0; next != 0; {
		if next <= prev || next < content || next+4 > len(page) {
			return
		}
		size := int(binary.BigEndian.Uint16(page[next+2:]))
		if size < 4 || next+size > len(page) {
			return
		}
		f(next+4, next+size)
		prev, next = next, int(binary.BigEndian.Uint16(page[next:]))
	}
}

// maxScrubPages bounds the files the scrub handles. A page is told to be a
// b-tree page by its first byte (2, 5, 10 or 13); an overflow or freelist
// trunk page starts with a page number instead, whose first byte is 0 as
// long as the file has fewer than 2^25 pages (128 GiB of 4 KiB pages).
const maxScrubPages = 1 << 25

// checkScrubbable refuses a file whose pages the first byte cannot tell
// apart: one too big (maxScrubPages), or one with auto_vacuum, whose
// pointer-map pages start with an entry type (1 to 5).
func checkScrubbable(ctx context.Context, c Queryer) error {
	pages, err := pragmaInt(ctx, c, "page_count")
	if err != nil {
		return err
	}
	if pages >= maxScrubPages {
		return fmt.Errorf("page count %d: a file of %d pages or more cannot be scrubbed safely", pages, maxScrubPages)
	}
	autoVacuum, err := pragmaInt(ctx, c, "auto_vacuum")
	if err != nil {
		return err
	}
	if autoVacuum != 0 {
		return fmt.Errorf("auto_vacuum %d: a file with pointer-map pages cannot be scrubbed safely", autoVacuum)
	}
	return nil
}

func pragmaInt(ctx context.Context, c Queryer, name string) (int64, error) {
	rows, err := c.QueryContext(ctx, "PRAGMA "+name)
	if err != nil {
		return 0, fmt.Errorf("pragma %s: %w", name, err)
	}
	var n int64
	if rows.Next() {
		err = rows.Scan(&n)
	}
	if err := errors.Join(err, rows.Err(), rows.Close()); err != nil {
		return 0, fmt.Errorf("pragma %s: %w", name, err)
	}
	return n, nil
}
