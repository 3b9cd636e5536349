package fts5

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// postings walks the entries of one term of an FTS5 index in ascending
// rowid order, segment by segment, oldest first, or the entries of a
// doclist already read (listPostings). An entry is decoded where it lies
// on its leaf page: the cursor keeps the page and an offset, and only a
// position list that runs over a page end is copied (into spill). Moving
// to a rowid (skipTo) decodes the entries before it without looking at
// their position lists, so a phrase compares positions only in the rows
// all its terms hold.
//
// The rowids must ascend across segments too (no newer segment holds a
// row of an older one, which is the case while rows are only appended);
// an entry that does not is errUnordered, and the caller reads the
// doclists merged instead.
type postings struct {
	x        *ftsIndex
	key      []byte       // the term with the index prefix byte
	segments []ftsSegment // still to read, the oldest last
	seg      ftsSegment   // the segment being read
	rows     *sql.Rows    // its leaves from the page read next; nil between segments
	base     int64        // the first %_data id of the segment
	pgno     int64        // the page read last
	term     []byte       // the last term read on a page (terms are prefix-compressed)

	// The page being read: valid until the next rows.Next (what outlives
	// it is copied). The next entry is at page[i:], the term's entries on
	// this page end at end, and more says they go on on the next page.
	page   []byte
	i, end int
	more   bool
	// acc is what the next rowid delta is added to (0 where the rowid
	// is stored whole: the first of the term and of each page).
	acc int64
	// pending is how much of the position list of the entry read last is
	// on the pages after this one.
	pending int
	spill   []byte

	// The current entry: its rowid, and where its position list is
	// (poslist): page[from:i], or spill if from is -1 (for listPostings,
	// the list's entry at-1). Offsets rather than a slice: moving
	// stores no pointer, so no write barrier while the garbage collector
	// marks. Past the last entry (skipTo false), rowid is the last rowid
	// read, of every entry passed over as well; math.MinInt64 before the
	// first.
	rowid int64
	from  int
	// first is the first rowid read (math.MinInt64: none yet).
	first int64
	err   error

	list *ftsDoclist // listPostings: the doclist read, and its next entry
	at   int
}

// postings returns a cursor over the entries of term (without the index
// prefix byte) in the segments of s.
func (x *ftsIndex) postings(s ftsStructure, term string) *postings {
	return &postings{x: x, key: append([]byte{ftsMainPrefix}, term...), segments: slices.Clone(s.segments),
		rowid: math.MinInt64, first: math.MinInt64}
}

// listPostings returns a cursor over the entries of d.
func listPostings(d *ftsDoclist) *postings {
	return &postings{list: d, rowid: math.MinInt64, first: math.MinInt64}
}

// close ends the read of the segment being read, if any.
func (c *postings) close() {
	if c.rows != nil {
		_ = c.rows.Close() // a read-only query of the caller's transaction
		c.rows = nil
	}
}

func (c *postings) bad(what string) bool {
	c.err = fmt.Errorf("%w: %s, segment %d page %d", errUnsupportedIndex, what, c.seg.id, c.pgno)
	c.close()
	return false
}

// skipTo moves to the first entry whose rowid is target or more, staying
// where it is if the current one is; false when there is none, or on an
// error (c.err).
func (c *postings) skipTo(target int64) bool {
	if c.rowid >= target {
		return true
	}
	if c.err != nil {
		return false
	}
	if c.list != nil {
		return c.listSkipTo(target)
	}
	for {
		page, i, end, rowid := c.page, c.i, c.end, c.acc
		start := i
		for i < end {
			// Both varints are one byte in most entries of a common term.
			var v uint64
			if b := page[i]; b < 0x80 {
				v, i = uint64(b), i+1
			} else {
				var ok bool
				if v, i, ok = ftsVarint(page, i); !ok {
					return c.bad("rowid")
				}
			}
			rowid += int64(v)
			var size uint64
			if i < len(page) && page[i] < 0x80 {
				size, i = uint64(page[i]), i+1
			} else {
				var ok bool
				if size, i, ok = ftsVarint(page, i); !ok {
					return c.bad("position list size")
				}
			}
			n := int(size >> 1)
			if i+n > end {
				// The list runs over the page end.
				if !c.more {
					return c.bad("position list runs into a term")
				}
				c.pending = n - (end - i)
				if rowid < target {
					i = end
					break
				}
				c.spill = append(c.spill[:0], page[i:end]...)
				c.i, c.acc, c.rowid = end, rowid, rowid
				if !c.nextPage(true) {
					if c.err == nil {
						c.bad("position list runs past the segment")
					}
					return false
				}
				c.from = -1
				return true
			}
			if rowid >= target {
				c.i, c.acc, c.rowid, c.from = i+n, rowid, rowid, i
				return true
			}
			i += n
		}
		c.i, c.acc = i, rowid
		if i != start {
			c.rowid = rowid
		}
		if !c.nextPage(false) {
			return false
		}
	}
}

// step moves to the next entry if it lies whole on the current page and
// both its varints are one byte (most entries of a common term): cheap
// enough to be inlined in the loops that move cursors one entry at a time
// (pairScan). False otherwise, the cursor unmoved: skipTo or next then
// does the rest.
func (c *postings) step() bool {
	i := c.i
	if i+2 > c.end {
		return false
	}
	d, s := c.page[i], c.page[i+1]
	j := i + 2 + int(s>>1)
	if d|s >= 0x80 || j > c.end {
		return false
	}
	c.acc += int64(d)
	c.rowid, c.from, c.i = c.acc, i+2, j
	return true
}

// next moves to the next entry; false when there is none, or on an error.
func (c *postings) next() bool {
	if c.rowid == math.MaxInt64 {
		return false
	}
	return c.skipTo(c.rowid + 1)
}

// listSkipTo is skipTo over a doclist.
func (c *postings) listSkipTo(target int64) bool {
	rs, i := c.list.rowids, c.at
	for i < len(rs) && rs[i] < target {
		i++
	}
	if i == len(rs) {
		if i > c.at {
			c.rowid = rs[i-1]
		}
		c.at = i
		return false
	}
	if c.first == math.MinInt64 {
		c.first = rs[i]
	}
	c.at = i + 1
	c.rowid = rs[i]
	return true
}

// poslist is the position list of the current entry, valid until the
// cursor moves.
func (c *postings) poslist() []byte {
	switch {
	case c.list != nil:
		d, j := c.list, c.at-1
		return d.raw[d.starts[j] : d.starts[j]+d.counts[j]]
	case c.from < 0:
		return c.spill
	}
	return c.page[c.from:c.i]
}

// drain reads the entries left, so that rowid is the last rowid of the
// term (and the order of every entry is checked).
func (c *postings) drain() bool {
	c.skipTo(math.MaxInt64)
	return c.err == nil
}

// nextPage moves to the next part of the term's entries: on the next page
// if they go on there (the rest of a position list first: into spill if
// collect), else in the next segment that holds the term; false when there
// is none, or on an error.
func (c *postings) nextPage(collect bool) bool {
	if c.rows == nil || !c.more {
		c.close()
		return c.nextSegment()
	}
	for {
		page, ok := c.readPage()
		if !ok {
			if c.err != nil {
				return false
			}
			// The segment ended while the term's entries went on.
			if c.pgno != c.seg.last {
				return c.bad("missing last page")
			}
			if c.pending > 0 {
				return c.bad("position list runs past the segment")
			}
			c.close()
			return c.nextSegment()
		}
		firstRowid := int(binary.BigEndian.Uint16(page[0:2]))
		szLeaf := int(binary.BigEndian.Uint16(page[2:4]))
		end, hasTerm := szLeaf, szLeaf < len(page)
		if hasTerm {
			off, _, ok := ftsVarint(page, szLeaf)
			if !ok || off < 4 || int(off) > szLeaf {
				return c.bad("term offset")
			}
			end = int(off)
		}
		i := 4
		if c.pending > 0 {
			n := min(c.pending, end-i)
			if collect {
				c.spill = append(c.spill, page[i:i+n]...)
			}
			c.pending -= n
			i += n
			if c.pending > 0 {
				continue // the position list covers this whole page
			}
		}
		c.page = page
		if firstRowid == 0 {
			// No entry starts on this page: the term's entries end at a
			// term, else they may go on on the next page (this one held
			// only the end of a position list).
			c.i, c.end, c.more = i, i, !hasTerm
			return true
		}
		if firstRowid != i {
			return c.bad("first rowid offset")
		}
		c.i, c.end, c.more = i, end, !hasTerm
		return c.startRun()
	}
}

// readPage reads the next leaf of the segment; false at its end or on an
// error.
func (c *postings) readPage() ([]byte, bool) {
	if !c.rows.Next() {
		if err := c.rows.Err(); err != nil {
			c.err = err
			c.close()
		}
		return nil, false
	}
	var id int64
	var page sql.RawBytes // valid until the next row: what is kept is copied
	if err := c.rows.Scan(&id, &page); err != nil {
		c.err = err
		c.close()
		return nil, false
	}
	if c.pgno++; id != c.base+c.pgno {
		return nil, c.bad("missing page")
	}
	if len(page) < 4 {
		return nil, c.bad("short page")
	}
	szLeaf := int(binary.BigEndian.Uint16(page[2:4]))
	if firstRowid := int(binary.BigEndian.Uint16(page[0:2])); szLeaf < 4 || szLeaf > len(page) || firstRowid > szLeaf {
		return nil, c.bad("page header")
	}
	return page, true
}

// startRun starts reading entries at c.i, whose rowid is stored whole:
// it must come after every rowid read before.
func (c *postings) startRun() bool {
	c.acc = 0
	v, _, ok := ftsVarint(c.page, c.i)
	if !ok {
		return c.bad("rowid")
	}
	switch rowid := int64(v); {
	case c.first == math.MinInt64:
		c.first = rowid
	case rowid <= c.rowid:
		c.err = errUnordered
		c.close()
		return false
	}
	return true
}

// nextSegment starts reading the next segment that holds the term, at
// its first entry; false when no segment is left.
func (c *postings) nextSegment() bool {
	for len(c.segments) > 0 {
		c.seg = c.segments[len(c.segments)-1]
		c.segments = c.segments[:len(c.segments)-1]
		pgno, err := c.x.startPage(c.seg, c.key)
		if err != nil {
			c.err = err
			return false
		}
		c.base = c.seg.id << 37
		// The leaves of a segment are the rows segid<<37 + page number,
		// in order; they are read as one range.
		c.rows, err = c.x.tx.QueryContext(c.x.ctx, `SELECT id, block FROM `+c.x.table+`_data WHERE id BETWEEN ? AND ? ORDER BY id`,
			c.base+pgno, c.base+c.seg.last)
		if err != nil {
			c.err = err
			c.rows = nil
			return false
		}
		c.pgno = pgno - 1
		if c.findTerm() {
			return true
		}
		c.close()
		if c.err != nil {
			return false
		}
	}
	c.page, c.i, c.end, c.more = nil, 0, 0, false
	return false
}

// findTerm reads the segment's pages up to the one where the term starts
// and sets the cursor at its first entry; false if the segment does not
// hold it.
func (c *postings) findTerm() bool {
	for {
		page, ok := c.readPage()
		if !ok {
			if c.err == nil && c.pgno != c.seg.last {
				c.bad("missing last page")
			}
			return false
		}
		szLeaf := int(binary.BigEndian.Uint16(page[2:4]))
		c.term = c.term[:0]
		// The footer lists where each term that starts on the page
		// starts (as deltas); a page without one holds only the rest of
		// a doclist begun before it.
		for j, off := szLeaf, 0; j < len(page); {
			v, next, ok := ftsVarint(page, j)
			if !ok {
				return c.bad("page footer")
			}
			j = next
			first := off == 0
			if off += int(v); off < 4 || off > szLeaf {
				return c.bad("term offset")
			}
			i := off
			if first {
				n, next, ok := ftsVarint(page, i)
				if !ok || next+int(n) > szLeaf {
					return c.bad("first term")
				}
				c.term = append(c.term[:0], page[next:next+int(n)]...)
				i = next + int(n)
			} else {
				keep, next, ok := ftsVarint(page, i)
				if !ok {
					return c.bad("term prefix")
				}
				n, next2, ok := ftsVarint(page, next)
				if !ok || int(keep) > len(c.term) || next2+int(n) > szLeaf {
					return c.bad("term suffix")
				}
				c.term = append(c.term[:keep], page[next2:next2+int(n)]...)
				i = next2 + int(n)
			}
			if len(c.term) == 0 || c.term[0] != ftsMainPrefix {
				return false // a prefix index (none is configured) or past the main index
			}
			switch bytes.Compare(c.term, c.key) {
			case -1:
				continue
			case 1:
				return false
			}
			// The term's entries run to the next term, or on past the
			// page's end if it is the last.
			end, more := szLeaf, true
			if j < len(page) {
				v, _, ok := ftsVarint(page, j)
				if !ok || off+int(v) < 4 || off+int(v) > szLeaf {
					return c.bad("term offset")
				}
				end, more = off+int(v), false
			}
			c.page, c.i, c.end, c.more, c.pending = page, i, end, more, 0
			if i == end {
				return true // its first entry is on the next page
			}
			return c.startRun()
		}
	}
}
