package fts5

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// This file reads FTS5's own index (the %_data and %_idx tables of an FTS5
// table) in Go, read-only, inside the caller's read transaction: the
// document list of a term or of every term with a prefix, with positions.
// The layout is the one fts5_index.c documents (structure record, leaf
// pages with a 4-byte header, prefix-compressed terms, doclists of rowid
// deltas and position lists that may run over page ends). Anything the
// reader does not expect (a contentless-delete structure, a page that does
// not parse) is errUnsupportedIndex: the caller then uses SQLite's own
// statement instead.

// errUnsupportedIndex says the FTS5 index is laid out in a way this reader
// does not handle; the search falls back to SQLite's bm25().
var errUnsupportedIndex = errors.New("fts5 index layout not supported by the Go reader")

// ftsMainPrefix is the byte FTS5 puts before every term of the main index.
const ftsMainPrefix = '0'

// ftsSegment is one segment of the index, as the structure record lists it.
type ftsSegment struct {
	id, first, last int64
}

// ftsStructure is the decoded structure record: the segments newest first
// (level 0 before level 1; within a level the last listed is the newest),
// and the write counter, which moves on every flush.
type ftsStructure struct {
	segments     []ftsSegment
	writeCounter uint64
}

// ftsVarint decodes one SQLite varint (big-endian groups of 7 bits, the
// ninth byte whole) at b[i:], returning the value and the next offset; a
// truncated varint gives ok false.
func ftsVarint(b []byte, i int) (v uint64, next int, ok bool) {
	for n := 0; n < 8; n++ {
		if i >= len(b) {
			return 0, i, false
		}
		c := b[i]
		i++
		v = v<<7 | uint64(c&0x7f)
		if c < 0x80 {
			return v, i, true
		}
	}
	if i >= len(b) {
		return 0, i, false
	}
	return v<<8 | uint64(b[i]), i + 1, true
}

// ftsIndex reads one FTS5 table's index within a read transaction.
type ftsIndex struct {
	ctx   context.Context
	tx    *sql.Tx
	table string // a fixed name, never user input
	// r is the Ranker reading: its options and counters.
	r *Ranker
	// used holds the doclists handed out, returned to doclistPool by
	// release.
	used []*ftsDoclist
}

// doclistPool keeps doclists' buffers between searches: a common word's
// list is megabytes, grown by appends.
var doclistPool = sync.Pool{New: func() any { return &ftsDoclist{} }}

// newDoclist returns an empty doclist, with position lists or not.
func (x *ftsIndex) newDoclist(withLists bool) *ftsDoclist {
	d := doclistPool.Get().(*ftsDoclist)
	d.rowids, d.counts, d.starts, d.raw, d.withLists = d.rowids[:0], d.counts[:0], d.starts[:0], d.raw[:0], withLists
	x.used = append(x.used, d)
	return d
}

// release gives back every doclist handed out; none may be used after.
func (x *ftsIndex) release() {
	for _, d := range x.used {
		doclistPool.Put(d)
	}
	x.used = nil
}

func (x *ftsIndex) block(id int64) ([]byte, error) {
	var b []byte
	err := x.tx.QueryRowContext(x.ctx, `SELECT block FROM `+x.table+`_data WHERE id = ?`, id).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s_data row %d missing", errUnsupportedIndex, x.table, id)
	}
	return b, err
}

// structure decodes the structure record (%_data id 10).
func (x *ftsIndex) structure() (ftsStructure, error) {
	b, err := x.block(10)
	if err != nil {
		return ftsStructure{}, err
	}
	bad := fmt.Errorf("%w: structure record of %s", errUnsupportedIndex, x.table)
	if len(b) < 8 || bytes.Equal(b[4:8], []byte{0xff, 0x00, 0x00, 0x01}) {
		return ftsStructure{}, bad // too short, or V2 (contentless_delete)
	}
	i := 4
	next := func() uint64 {
		var v uint64
		var ok bool
		if v, i, ok = ftsVarint(b, i); !ok {
			err = bad
		}
		return v
	}
	levels, _ := next(), next()
	var s ftsStructure
	s.writeCounter = next()
	perLevel := make([][]ftsSegment, 0, levels)
	for range levels {
		_, n := next(), next() // segments in an ongoing merge, segments
		var segs []ftsSegment
		for range n {
			segs = append(segs, ftsSegment{id: int64(next()), first: int64(next()), last: int64(next())})
		}
		perLevel = append(perLevel, segs)
	}
	if err != nil {
		return ftsStructure{}, err
	}
	for _, segs := range perLevel {
		for j := len(segs) - 1; j >= 0; j-- {
			s.segments = append(s.segments, segs[j])
		}
	}
	return s, nil
}

// withEntries returns s without the segments that an incremental merge
// has taken whole: FTS5 lists them with first and last page 0 until the
// merge ends (their leaves are deleted only then) and reads nothing from
// them, their entries being in the merge's output segment.
func (s ftsStructure) withEntries() ftsStructure {
	kept := ftsStructure{writeCounter: s.writeCounter}
	for _, seg := range s.segments {
		if seg.first != 0 {
			kept.segments = append(kept.segments, seg)
		}
	}
	return kept
}

// averages returns the row count and the total token count (all columns)
// of the averages record (%_data id 1), as xRowCount and
// xColumnTotalSize(-1) report them.
func (x *ftsIndex) averages() (rows, tokens int64, err error) {
	b, err := x.block(1)
	if err != nil {
		return 0, 0, err
	}
	v, i, ok := ftsVarint(b, 0)
	if !ok {
		return 0, 0, fmt.Errorf("%w: averages record of %s", errUnsupportedIndex, x.table)
	}
	rows = int64(v)
	for i < len(b) {
		if v, i, ok = ftsVarint(b, i); !ok {
			return 0, 0, fmt.Errorf("%w: averages record of %s", errUnsupportedIndex, x.table)
		}
		tokens += int64(v)
	}
	return rows, tokens, nil
}

// startPage is the leaf page of seg where a term >= key can first be:
// the last page whose %_idx key is <= key, else the segment's first page.
func (x *ftsIndex) startPage(seg ftsSegment, key []byte) (int64, error) {
	var pgno int64
	err := x.tx.QueryRowContext(x.ctx, `SELECT pgno FROM `+x.table+`_idx WHERE segid = ? AND term <= ? ORDER BY term DESC LIMIT 1`,
		seg.id, key).Scan(&pgno)
	if errors.Is(err, sql.ErrNoRows) {
		return seg.first, nil
	}
	if err != nil {
		return 0, err
	}
	return max(pgno>>1, seg.first), nil
}

// ftsDoclist is the document list of one term in one segment (or merged):
// ascending rowids and, for each, the number of positions (0: an entry
// that deletes the row from older segments) or, when positions are asked
// for, the size of its position list, kept undecoded in raw.
type ftsDoclist struct {
	rowids []int64
	counts []int32
	starts []int32 // with positions: the list of rowids[i] is raw[starts[i]:starts[i]+counts[i]]
	raw    []byte
	// withLists says counts are list sizes and raw holds the lists.
	withLists bool
}

func (d *ftsDoclist) len() int { return len(d.rowids) }

// copyEntry appends entry i of from.
func (d *ftsDoclist) copyEntry(from *ftsDoclist, i int) {
	d.rowids = append(d.rowids, from.rowids[i])
	d.counts = append(d.counts, from.counts[i])
	if from.withLists {
		d.starts = append(d.starts, int32(len(d.raw)))
		d.raw = append(d.raw, from.raw[from.starts[i]:from.starts[i]+from.counts[i]]...)
	}
}

// countPositions counts the offsets of one position list.
func countPositions(poslist []byte) (int32, bool) {
	var n int32
	for i := 0; i < len(poslist); {
		v, next, ok := ftsVarint(poslist, i)
		if !ok {
			return 0, false
		}
		i = next
		if v == 1 { // a column marker, then the column number
			if _, i, ok = ftsVarint(poslist, i); !ok {
				return 0, false
			}
			continue
		}
		if v < 2 {
			return 0, false
		}
		n++
	}
	return n, true
}

// entrySink takes the entries of a term, one at a time, in the order
// segmentTerms reads them: a doclist (appends them), or a caller that
// works through them as they are read (a phrase's longest term, the
// terms of a prefix). poslist is valid only during the call; false stops
// the read with errUnsupportedIndex.
type entrySink interface {
	entry(rowid int64, poslist []byte) bool
}

// entry appends one entry to d.
func (d *ftsDoclist) entry(rowid int64, poslist []byte) bool {
	d.rowids = append(d.rowids, rowid)
	if !d.withLists {
		n, ok := countPositions(poslist)
		d.counts = append(d.counts, n)
		return ok
	}
	d.starts = append(d.starts, int32(len(d.raw)))
	d.counts = append(d.counts, int32(len(poslist)))
	d.raw = append(d.raw, poslist...)
	return true
}

// segmentTerms reads seg from the page where key can start. For each term
// at or after key (as stored: with the index prefix byte), in term order,
// open says where its entries go (nil: nowhere, they are skipped), or
// stop to end the read there; after its last entry, closed is called
// with that sink and says whether to go on. Entries are handed over
// straight from the pages (only a position list that runs over a page end
// goes through a buffer).
func (x *ftsIndex) segmentTerms(seg ftsSegment, key []byte,
	open func(term []byte) (sink entrySink, stop bool), closed func(sink entrySink) bool) error {
	r, err := x.readSegment(seg, key, open, closed)
	if err != nil {
		return err
	}
	defer r.close()
	for {
		more, err := r.page()
		if err != nil {
			return err
		}
		if !more {
			return r.finish()
		}
	}
}

// segmentReader is the state of segmentTerms' read, carried from one leaf
// page to the next. (A phrase's terms are read side by side by postings
// cursors, which decode in place; this reader hands every entry over.)
type segmentReader struct {
	seg    ftsSegment
	key    []byte
	open   func(term []byte) (entrySink, bool)
	closed func(entrySink) bool
	rows   *sql.Rows
	base   int64 // the first %_data id of the segment
	pgno   int64 // the page read last
	// The state carried from page to page.
	term      []byte
	cur       entrySink // where the term's entries go (nil: not in one, or skipping)
	inDoclist bool      // a doclist may continue on the next page
	rowid     int64
	pending   int // position-list bytes still to read on the next page
	spill     []byte
	// done: a sink said to stop; stopped: open did, or the main index
	// ended (the pages after are not read).
	done, stopped bool
	termOffsets   []int
}

// readSegment starts reading seg at the page where key can start.
func (x *ftsIndex) readSegment(seg ftsSegment, key []byte,
	open func(term []byte) (entrySink, bool), closed func(entrySink) bool) (*segmentReader, error) {
	pgno, err := x.startPage(seg, key)
	if err != nil {
		return nil, err
	}
	// The leaves of a segment are the rows segid<<37 + page number, in
	// order; they are read as one range.
	base := seg.id << 37
	rows, err := x.tx.QueryContext(x.ctx, `SELECT id, block FROM `+x.table+`_data WHERE id BETWEEN ? AND ? ORDER BY id`,
		base+pgno, base+seg.last)
	if err != nil {
		return nil, err
	}
	return &segmentReader{seg: seg, key: key, open: open, closed: closed, rows: rows, base: base, pgno: pgno - 1}, nil
}

func (r *segmentReader) close() { _ = r.rows.Close() } // a read-only query of the caller's transaction

func (r *segmentReader) bad(what string) error {
	return fmt.Errorf("%w: %s, segment %d page %d", errUnsupportedIndex, what, r.seg.id, r.pgno)
}

func (r *segmentReader) finishTerm() {
	if r.cur != nil && !r.done {
		r.done = !r.closed(r.cur)
	}
	r.cur = nil
}

// entries reads doclist entries of page from i to end; the first rowid is
// absolute when absolute is set. (An entry's delete flag is not looked at:
// an entry with positions is present even if it also deletes an older
// version.)
func (r *segmentReader) entries(page []byte, i, end int, absolute bool) error {
	rowid, cur := r.rowid, r.cur
	defer func() { r.rowid = rowid }()
	for i < end {
		v, next, ok := ftsVarint(page, i)
		if !ok {
			return r.bad("rowid")
		}
		if absolute {
			rowid, absolute = int64(v), false
		} else {
			rowid += int64(v)
		}
		size, next2, ok := ftsVarint(page, next)
		if !ok {
			return r.bad("position list size")
		}
		i = next2
		n := int(size >> 1)
		if i+n > end {
			if cur != nil {
				r.spill = append(r.spill[:0], page[i:end]...)
			}
			r.pending = n - (end - i)
			return nil
		}
		if cur != nil && !cur.entry(rowid, page[i:i+n]) {
			return r.bad("position list")
		}
		i += n
	}
	return nil
}

// page reads the next leaf page; false when the read is over (finish
// then checks it ended where it should).
func (r *segmentReader) page() (bool, error) {
	if r.done || r.stopped || !r.rows.Next() {
		return false, nil
	}
	var id int64
	var page sql.RawBytes // valid until the next row: what is kept is copied
	if err := r.rows.Scan(&id, &page); err != nil {
		return false, err
	}
	if r.pgno++; id != r.base+r.pgno {
		return false, r.bad("missing page")
	}
	if len(page) < 4 {
		return false, r.bad("short page")
	}
	firstRowid := int(binary.BigEndian.Uint16(page[0:2]))
	szLeaf := int(binary.BigEndian.Uint16(page[2:4]))
	if szLeaf < 4 || szLeaf > len(page) || firstRowid > szLeaf {
		return false, r.bad("page header")
	}
	termOffsets := r.termOffsets[:0]
	for i, off := szLeaf, 0; i < len(page); {
		v, next, ok := ftsVarint(page, i)
		if !ok {
			return false, r.bad("page footer")
		}
		off += int(v)
		if off < 4 || off > szLeaf {
			return false, r.bad("term offset")
		}
		termOffsets = append(termOffsets, off)
		i = next
	}
	r.termOffsets = termOffsets
	endOfContinuation := szLeaf
	if len(termOffsets) > 0 {
		endOfContinuation = termOffsets[0]
	}
	i := 4
	if r.inDoclist {
		if r.pending > 0 {
			n := min(r.pending, endOfContinuation-i)
			if r.cur != nil {
				r.spill = append(r.spill, page[i:i+n]...)
			}
			r.pending -= n
			i += n
			if r.pending > 0 {
				return true, nil // the position list covers this whole page
			}
			if r.cur != nil && !r.cur.entry(r.rowid, r.spill) {
				return false, r.bad("position list")
			}
		}
		if firstRowid != 0 {
			if firstRowid != i {
				return false, r.bad("first rowid offset")
			}
			if err := r.entries(page, i, endOfContinuation, true); err != nil {
				return false, err
			}
			if r.pending > 0 {
				if len(termOffsets) > 0 {
					return false, r.bad("position list runs into a term")
				}
				return true, nil
			}
		}
		if len(termOffsets) == 0 {
			// The doclist may go on: it ends at a term or at the end of
			// the segment, not where a position list ends with the page.
			return true, nil
		}
		r.inDoclist = false
		if r.finishTerm(); r.done {
			return false, nil
		}
	} else if firstRowid != 0 && len(termOffsets) == 0 {
		return true, nil // a page of a doclist started before key's page
	}
	for t, off := range termOffsets {
		i = off
		if t == 0 {
			n, next, ok := ftsVarint(page, i)
			if !ok || next+int(n) > szLeaf {
				return false, r.bad("first term")
			}
			r.term = append(r.term[:0], page[next:next+int(n)]...)
			i = next + int(n)
		} else {
			keep, next, ok := ftsVarint(page, i)
			if !ok {
				return false, r.bad("term prefix")
			}
			n, next2, ok := ftsVarint(page, next)
			if !ok || int(keep) > len(r.term) || next2+int(n) > szLeaf {
				return false, r.bad("term suffix")
			}
			r.term = append(r.term[:keep], page[next2:next2+int(n)]...)
			i = next2 + int(n)
		}
		if len(r.term) == 0 || r.term[0] != ftsMainPrefix {
			r.stopped = true // a prefix index (none is configured) or past the main index
			return false, nil
		}
		if bytes.Compare(r.term, r.key) >= 0 {
			var stop bool
			if r.cur, stop = r.open(r.term); stop {
				r.stopped = true
				return false, nil
			}
		}
		end := szLeaf
		if t+1 < len(termOffsets) {
			end = termOffsets[t+1]
		}
		if err := r.entries(page, i, end, true); err != nil {
			return false, err
		}
		if t+1 < len(termOffsets) {
			if r.pending > 0 {
				return false, r.bad("position list runs into a term")
			}
			if r.finishTerm(); r.done {
				return false, nil
			}
		} else {
			r.inDoclist = true
		}
	}
	return true, nil
}

// finish ends a read that page ended: the term being read is closed, and
// a read that ran to the end of the segment must have read its last page.
func (r *segmentReader) finish() error {
	if err := r.rows.Err(); err != nil {
		return err
	}
	if r.done || r.stopped {
		return nil
	}
	if r.pgno != r.seg.last {
		return r.bad("missing last page")
	}
	if r.inDoclist {
		if r.pending > 0 {
			return fmt.Errorf("%w: position list runs past segment %d", errUnsupportedIndex, r.seg.id)
		}
		r.finishTerm()
	}
	return nil
}

// mergeNewer returns the doclist of older overridden by newer: a rowid
// in newer takes newer's entry.
func (x *ftsIndex) mergeNewer(older, newer *ftsDoclist) *ftsDoclist {
	out := x.newDoclist(newer.withLists)
	i, j := 0, 0
	for i < older.len() || j < newer.len() {
		switch {
		case j == newer.len() || (i < older.len() && older.rowids[i] < newer.rowids[j]):
			out.copyEntry(older, i)
			i++
		case i < older.len() && older.rowids[i] == newer.rowids[j]:
			i++
		default:
			out.copyEntry(newer, j)
			j++
		}
	}
	return out
}

// entries returns entries [from, to) of d, sharing its memory.
func (d *ftsDoclist) entries(from, to int) *ftsDoclist {
	v := &ftsDoclist{rowids: d.rowids[from:to:to], counts: d.counts[from:to:to], raw: d.raw, withLists: d.withLists}
	if d.withLists {
		v.starts = d.starts[from:to:to]
	}
	return v
}

// newerAppended returns d, whose entries from mark on were read from a
// newer segment than those before, as one doclist: d itself when the
// newer entries all come after the older ones (new rows: the usual case),
// else the older entries overridden by the newer (mergeNewer).
func (x *ftsIndex) newerAppended(d *ftsDoclist, mark int) *ftsDoclist {
	if mark == 0 || mark == d.len() || d.rowids[mark] > d.rowids[mark-1] {
		return d
	}
	return x.mergeNewer(d.entries(0, mark), d.entries(mark, d.len()))
}

// present drops the entries without positions (deleted rows).
func (x *ftsIndex) present(d *ftsDoclist) *ftsDoclist {
	if !slices.Contains(d.counts, 0) {
		return d
	}
	out := x.newDoclist(d.withLists)
	for i := range d.rowids {
		if d.counts[i] > 0 {
			out.copyEntry(d, i)
		}
	}
	return out
}

// termDoclists returns the doclist of term (prefix false) or of every term
// starting with term (prefix true), each merged over every segment,
// without deleted rows. Terms are given without the index prefix byte.
func (x *ftsIndex) termDoclists(s ftsStructure, term string, prefix, withPositions bool) (map[string]*ftsDoclist, error) {
	key := append([]byte{ftsMainPrefix}, term...)
	byTerm := map[string]*ftsDoclist{}
	var (
		name string // the term being read
		mark int    // where its entries from this segment start
	)
	open := func(t []byte) (entrySink, bool) {
		if !bytes.HasPrefix(t, key) || (!prefix && len(t) != len(key)) {
			return nil, true
		}
		d, ok := byTerm[string(t[1:])]
		if !ok {
			d = x.newDoclist(withPositions)
			byTerm[string(t[1:])] = d
		}
		name, mark = string(t[1:]), d.len()
		return d, false
	}
	closed := func(sink entrySink) bool {
		byTerm[name] = x.newerAppended(sink.(*ftsDoclist), mark)
		return prefix
	}
	// Oldest segment first, so that each newer one overrides.
	for i := len(s.segments) - 1; i >= 0; i-- {
		if err := x.segmentTerms(s.segments[i], key, open, closed); err != nil {
			return nil, err
		}
	}
	for t, d := range byTerm {
		if d = x.present(d); d.len() == 0 {
			delete(byTerm, t)
		} else {
			byTerm[t] = d
		}
	}
	return byTerm, nil
}

// streamPrefix hands every entry of every term starting with prefix
// (given without the index prefix byte) to sink, segment by segment,
// oldest first, with the entries that delete a row (no positions): before
// each term's entries in a segment, at says which term they are of. A
// term's entries come in ascending rowid order when no newer segment
// holds a row of an older one (the sink checks).
func (x *ftsIndex) streamPrefix(s ftsStructure, prefix string, sink entrySink, at func(term []byte)) error {
	key := append([]byte{ftsMainPrefix}, prefix...)
	open := func(t []byte) (entrySink, bool) {
		if !bytes.HasPrefix(t, key) {
			return nil, true
		}
		at(t[1:])
		return sink, false
	}
	closed := func(entrySink) bool { return true }
	for i := len(s.segments) - 1; i >= 0; i-- {
		if err := x.segmentTerms(s.segments[i], key, open, closed); err != nil {
			return err
		}
	}
	return nil
}

// termPages estimates how many leaf pages the doclists of term take over
// every segment: from the page where it can start to the first page
// %_idx lists with a later term.
func (x *ftsIndex) termPages(s ftsStructure, term string) (int64, error) {
	key := append([]byte{ftsMainPrefix}, term...)
	var pages int64
	for _, seg := range s.segments {
		start, err := x.startPage(seg, key)
		if err != nil {
			return 0, err
		}
		var next int64
		err = x.tx.QueryRowContext(x.ctx, `SELECT pgno FROM `+x.table+`_idx WHERE segid = ? AND term > ? ORDER BY term LIMIT 1`,
			seg.id, key).Scan(&next)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			next = seg.last
		case err != nil:
			return 0, err
		default:
			next >>= 1
		}
		pages += max(next-start, 0) + 1
	}
	return pages, nil
}

// errUnordered says a term's entries did not come in ascending rowid
// order: a newer segment holds rows of an older one (a row deleted or
// indexed again). The caller reads the doclists merged instead.
var errUnordered = errors.New("fts5 doclist: a newer segment holds rows of an older one")

// Segment is one segment of an FTS5 index, as its structure record lists
// it: its id and the range of its leaf pages.
type Segment struct {
	ID, FirstPage, LastPage int64
}

// Segments returns the segments of table's index in tx, newest first (level
// 0 before level 1; within a level the last listed first). An index this
// package does not read (a contentless-delete structure record) is an
// error wrapping ErrDeclined.
func Segments(ctx context.Context, tx *sql.Tx, table string) ([]Segment, error) {
	s, err := (&ftsIndex{ctx: ctx, tx: tx, table: table}).structure()
	if errors.Is(err, errUnsupportedIndex) {
		return nil, fmt.Errorf("%w: %w", ErrDeclined, err)
	}
	if err != nil {
		return nil, err
	}
	out := make([]Segment, len(s.segments))
	for i, seg := range s.segments {
		out[i] = Segment{ID: seg.id, FirstPage: seg.first, LastPage: seg.last}
	}
	return out, nil
}
