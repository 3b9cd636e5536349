package fts5

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
)

// The rows of one phrase of a query, read from FTS5's index
// (index.go), each with the number of times the phrase occurs in it.
// A phrase's idf needs every row where it occurs, so nothing can be
// skipped; what is kept small is the work per entry. No term of a phrase
// is stored whole: a cursor over each term (postings) decodes its entries
// in place on the leaf pages, the cursors are moved to the rows they all
// hold (phraseScan), and only there are position lists compared; a long
// phrase is read by segments on two goroutines (phraseBySegments).
// The terms of a prefix are added up in an array by rowid as they are read
// (prefixTally). Both need each term's rows to come in ascending order,
// which they do when no newer segment holds a row of an older one (rows
// are only appended); otherwise (a rewound or deleted row re-indexed) the
// terms are read into merged doclists first, and the same code runs over
// those.

// phraseRows are the rows where a phrase occurs, ascending, with its
// number of occurrences in each (what bm25() adds up through xInst); for
// a prefix, also the term each row holds when it holds only one.
type phraseRows struct {
	rowids []int64
	freqs  []int32
	only   []int32 // prefix: index in terms, or -1 for rows with several
	terms  []string
}

// phraseMatches returns the rows of phrase p; maxID bounds the rowids.
func phraseMatches(x *ftsIndex, s ftsStructure, p ftsPhrase, maxID int64) (phraseRows, error) {
	if p.prefix {
		return prefixMatches(x, s, p.terms[0], maxID)
	}
	return termsMatches(x, s, p)
}

// termsMatches returns the rows of a phrase of whole terms.
func termsMatches(x *ftsIndex, s ftsStructure, p ftsPhrase) (phraseRows, error) {
	if len(p.terms) == 1 {
		byTerm, err := x.termDoclists(s, p.terms[0], false, false)
		if err != nil {
			return phraseRows{}, err
		}
		d := byTerm[p.terms[0]]
		if d == nil {
			return phraseRows{}, nil
		}
		return phraseRows{rowids: d.rowids, freqs: d.counts}, nil
	}
	most := int64(-1)
	for _, t := range p.terms {
		pages, err := x.termPages(s, t)
		if err != nil {
			return phraseRows{}, err
		}
		most = max(most, pages)
	}
	var rows phraseRows
	var err error
	if pp := x.r.opts.ParallelPages; pp >= 0 && most >= pp && len(s.segments) > 1 && runtime.GOMAXPROCS(0) > 1 {
		rows, err = phraseBySegments(x, s, p)
	} else {
		rows, err = phraseInIndex(x, s, p)
	}
	if errors.Is(err, errUnordered) {
		x.r.merged.Add(1)
		rows, err = phraseMerged(x, s, p)
	}
	return rows, err
}

// phraseInIndex finds the rows of phrase p with a cursor over each of its
// terms in the index.
func phraseInIndex(x *ftsIndex, s ftsStructure, p ftsPhrase) (phraseRows, error) {
	cs := make([]*postings, len(p.terms))
	for i, t := range p.terms {
		cs[i] = x.postings(s, t)
	}
	defer closeAll(cs)
	var rows phraseRows
	err := phraseScan(cs, &rows)
	return rows, err
}

// phraseMerged finds the rows of phrase p from its terms' doclists merged
// from every segment.
func phraseMerged(x *ftsIndex, s ftsStructure, p ftsPhrase) (phraseRows, error) {
	cs := make([]*postings, len(p.terms))
	for i, t := range p.terms {
		byTerm, err := x.termDoclists(s, t, false, true)
		if err != nil || byTerm[t] == nil {
			return phraseRows{}, err
		}
		cs[i] = listPostings(byTerm[t])
	}
	var rows phraseRows
	err := phraseScan(cs, &rows)
	return rows, err
}

func closeAll(cs []*postings) {
	for _, c := range cs {
		if c != nil {
			c.close()
		}
	}
}

// phraseScan appends to rows the rows where the terms of a phrase (cs:
// their cursors, in the phrase's order) occur one after the other, with
// how many times; it ends when a cursor has no entries left.
func phraseScan(cs []*postings, rows *phraseRows) error {
	if len(cs) == 2 {
		return pairScan(cs[0], cs[1], rows)
	}
	lists := make([]positionCursor, len(cs))
	target := int64(math.MinInt64 + 1)
	for {
		all := true
		for _, c := range cs {
			if !c.skipTo(target) {
				return c.err
			}
			if c.rowid > target {
				target, all = c.rowid, false
				break
			}
		}
		if !all {
			continue
		}
		for j, c := range cs {
			lists[j] = positionCursor{list: c.poslist()}
		}
		n, ok := phraseOccurrences(lists)
		if !ok {
			return errUnsupportedIndex
		}
		if n > 0 {
			rows.rowids = append(rows.rowids, target)
			rows.freqs = append(rows.freqs, n)
		}
		if target == math.MaxInt64 {
			return nil
		}
		target++
	}
}

// pairScan is phraseScan of a phrase of two terms (the usual one).
func pairScan(a, b *postings, rows *phraseRows) error {
	rowids, freqs := rows.rowids, rows.freqs
	defer func() { rows.rowids, rows.freqs = rowids, freqs }()
	if !a.next() {
		return a.err
	}
	for {
		// Each cursor is moved an entry at a time while that is cheap
		// (step), else by skipTo.
		for b.rowid < a.rowid {
			if !b.step() {
				if !b.skipTo(a.rowid) {
					return b.err
				}
				break
			}
		}
		if b.rowid > a.rowid {
			for a.rowid < b.rowid {
				if !a.step() {
					if !a.skipTo(b.rowid) {
						return a.err
					}
					break
				}
			}
			continue
		}
		// Position lists of a short row, compared as bit masks here;
		// others by pairOccurrences.
		la, lb := a.poslist(), b.poslist()
		ma, okA := positionMask(la)
		mb, okB := positionMask(lb)
		n := int32(bits.OnesCount64(ma << 1 & mb))
		if !okA || !okB {
			var ok bool
			if n, ok = pairOccurrences(la, lb); !ok {
				return errUnsupportedIndex
			}
		}
		if n > 0 {
			rowids = append(rowids, a.rowid)
			freqs = append(freqs, n)
		}
		if !a.step() && !a.next() {
			return a.err
		}
	}
}

// phraseBySegments is phraseInIndex on two goroutines: each reads whole
// segments (every term's entries of one segment), the segments shared out
// by size. A row's current entries are all in the segment that indexed it
// last, so each segment's matches are found in it alone, as long as no
// newer segment holds rows of an older one: each term's rowids are checked
// to ascend from segment to segment, oldest first (errUnordered otherwise;
// every entry of every term is read for that).
func phraseBySegments(x *ftsIndex, s ftsStructure, p ftsPhrase) (phraseRows, error) {
	type part struct {
		rows        phraseRows
		first, last []int64 // by term: the segment's first and last rowid, math.MinInt64 if none
		err         error
	}
	x.r.bySegments.Add(1)
	parts := make([]part, len(s.segments))
	read := func(i int) {
		one := ftsStructure{segments: s.segments[i : i+1], writeCounter: s.writeCounter}
		pt := &parts[i]
		cs := make([]*postings, len(p.terms))
		for j, t := range p.terms {
			cs[j] = x.postings(one, t)
		}
		defer closeAll(cs)
		if pt.err = phraseScan(cs, &pt.rows); pt.err != nil {
			return
		}
		pt.first, pt.last = make([]int64, len(p.terms)), make([]int64, len(p.terms))
		for j, c := range cs {
			if !c.drain() {
				pt.err = c.err
				return
			}
			pt.first[j], pt.last[j] = c.first, c.rowid
		}
	}
	// Two shares of about the same number of pages.
	order := make([]int, len(s.segments))
	for i := range order {
		order[i] = i
	}
	pages := func(i int) int64 { return s.segments[i].last - s.segments[i].first + 1 }
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(pages(b), pages(a)) })
	var shares [2][]int
	var sizes [2]int64
	for _, i := range order {
		k := 0
		if sizes[1] < sizes[0] {
			k = 1
		}
		shares[k], sizes[k] = append(shares[k], i), sizes[k]+pages(i)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, i := range shares[1] {
			read(i)
		}
	})
	for _, i := range shares[0] {
		read(i)
	}
	wg.Wait()
	// The segments oldest first: each term's rows must ascend.
	var out phraseRows
	prev := make([]int64, len(p.terms))
	for j := range prev {
		prev[j] = math.MinInt64
	}
	for i := len(parts) - 1; i >= 0; i-- {
		pt := parts[i]
		if pt.err != nil {
			return phraseRows{}, pt.err
		}
		for j := range prev {
			if pt.first[j] == math.MinInt64 {
				continue
			}
			if pt.first[j] <= prev[j] {
				return phraseRows{}, errUnordered
			}
			prev[j] = pt.last[j]
		}
		out.rowids = append(out.rowids, pt.rows.rowids...)
		out.freqs = append(out.freqs, pt.rows.freqs...)
	}
	return out, nil
}

// positionCursor reads a position list one position at a time.
type positionCursor struct {
	list     []byte
	i        int
	col, off int64
}

// next returns the next position (column<<32 | offset); end at the end of
// the list, ok false for a list that does not parse.
func (c *positionCursor) next() (pos int64, end, ok bool) {
	for c.i < len(c.list) {
		v, next, ok := ftsVarint(c.list, c.i)
		if !ok {
			return 0, false, false
		}
		c.i = next
		if v == 1 { // a column marker, then the column number
			col, next, ok := ftsVarint(c.list, c.i)
			if !ok {
				return 0, false, false
			}
			c.i, c.col, c.off = next, int64(col), 0
			continue
		}
		if v < 2 {
			return 0, false, false
		}
		c.off += int64(v) - 2
		return c.col<<32 | c.off, false, true
	}
	return 0, true, true
}

// pairOccurrences is phraseOccurrences of two lists: how many positions
// p of a have p+1 in b. Lists of one-byte offsets in the first column
// (words of a short row: the usual case) are compared as bytes
// (pairOccurrencesShort); others are decoded.
func pairOccurrences(a, b []byte) (int32, bool) {
	if n, ok := pairOccurrencesShort(a, b); ok {
		return n, true
	}
	ca, cb := positionCursor{list: a}, positionCursor{list: b}
	pa, end, ok := ca.next()
	if !ok || end {
		return 0, ok
	}
	pb, end, ok := cb.next()
	if !ok || end {
		return 0, ok
	}
	var n int32
	for {
		for pb < pa+1 {
			if pb, end, ok = cb.next(); !ok || end {
				return n, ok
			}
		}
		if pb == pa+1 {
			n++
		}
		if pa, end, ok = ca.next(); !ok || end {
			return n, ok
		}
	}
}

// pairOccurrencesShort is pairOccurrences of lists whose every byte is
// an offset delta of one byte (2 to 0x7f: no column marker, no longer
// varint); false for others. Positions below 64 (a short row: the usual
// case) are compared as bit masks.
func pairOccurrencesShort(a, b []byte) (int32, bool) {
	if ma, ok := positionMask(a); ok {
		if mb, ok := positionMask(b); ok {
			return int32(bits.OnesCount64(ma << 1 & mb)), true
		}
	}
	var n int32
	pa, pb := int64(0), int64(0)
	j := 0
	haveB := false
	for _, c := range a {
		if c < 2 || c >= 0x80 {
			return 0, false
		}
		pa += int64(c) - 2
		for !haveB || pb <= pa {
			if j == len(b) {
				return n, true
			}
			c := b[j]
			if c < 2 || c >= 0x80 {
				return 0, false
			}
			j++
			pb += int64(c) - 2
			haveB = true
		}
		if pb == pa+1 {
			n++
		}
	}
	return n, true
}

// positionMask is the set of positions of a list of one-byte offset
// deltas, as bits; false if a byte is not one, or a position is past 63.
func positionMask(list []byte) (uint64, bool) {
	var m uint64
	pos := uint(0)
	for _, c := range list {
		if c < 2 || c >= 0x80 {
			return 0, false
		}
		if pos += uint(c) - 2; pos >= 64 {
			return 0, false
		}
		m |= 1 << pos
	}
	return m, true
}

// phraseOccurrences counts the positions p of the first list such that
// list j holds p+j for every j (positions ascend in each list, so every
// list is read once).
func phraseOccurrences(lists []positionCursor) (int32, bool) {
	var n int32
	// at[j] is list j's current position; every one starts at its first.
	var small [8]int64
	at := small[:0]
	if len(lists) > len(small) {
		at = make([]int64, 0, len(lists))
	}
	for j := range lists {
		pos, end, ok := lists[j].next()
		if !ok || end {
			return 0, ok
		}
		at = append(at, pos)
	}
	for {
		p := at[0]
		found := true
		for j := 1; j < len(lists); j++ {
			want := p + int64(j)
			for at[j] < want {
				pos, end, ok := lists[j].next()
				if !ok || end {
					return n, ok
				}
				at[j] = pos
			}
			if at[j] != want {
				found = false
				break
			}
		}
		if found {
			n++
		}
		pos, end, ok := lists[0].next()
		if !ok || end {
			return n, ok
		}
		at[0] = pos
	}
}

// prefixMatches adds up the occurrences of every term with the prefix,
// row by row, as the entries are read (prefixTally).
func prefixMatches(x *ftsIndex, s ftsStructure, prefix string, maxID int64) (phraseRows, error) {
	pt := prefixTallyPool.Get().(*prefixTally)
	defer prefixTallyPool.Put(pt)
	pt.start(maxID)
	err := x.streamPrefix(s, prefix, pt, pt.at)
	if pt.unordered {
		// Read every term merged, and tally them again.
		x.r.merged.Add(1)
		pt.clear()
		lists, err := x.termDoclists(s, prefix, true, false)
		if err != nil {
			return phraseRows{}, err
		}
		terms := make([]string, 0, len(lists))
		for t := range lists {
			terms = append(terms, t)
		}
		slices.Sort(terms)
		for _, t := range terms {
			pt.at([]byte(t))
			d := lists[t]
			for i, id := range d.rowids {
				if !pt.add(id, d.counts[i]) {
					pt.clear()
					return phraseRows{}, errUnsupportedIndex
				}
			}
		}
	} else if err != nil {
		pt.clear()
		if pt.outOfIDs || pt.overflow {
			return phraseRows{}, fmt.Errorf("%w: %s* has a row the tally does not hold", errUnsupportedIndex, prefix)
		}
		return phraseRows{}, err
	}
	return pt.rows(), nil
}

// prefixTally adds up, in an array by rowid, the occurrences of the terms
// of a prefix, and which term a row holds when it holds only one. Kept
// between searches (prefixTallyPool): its array is all zeros between
// uses.
type prefixTally struct {
	byRow    []rowTally // by rowid
	maxID    int64
	terms    []string // in the order they were read
	term     int32    // the term whose entries are being read
	last     []int64  // by term: the last rowid read
	lo, hi   int64    // the rowids tallied
	n        int      // rows tallied
	outOfIDs bool     // a rowid above maxID
	overflow bool     // a row with more occurrences than a rowTally holds
	// unordered: an entry came before the one before it of the same
	// term (the caller reads the terms merged instead).
	unordered bool
}

// rowTally is one row's occurrences of a prefix's terms (the low 16 bits;
// 0: none) and its only term (the high 16 bits: its index in
// prefixTally.terms + 1, or severalTerms), in 4 bytes: the array is read
// and written at random (about 1 row in 5 of a million for a common
// prefix), so its size is what it costs.
type rowTally uint32

// severalTerms marks a row holding several terms of the prefix (or one
// whose index does not fit: its snippet comes from the user's query,
// which gives the same).
const severalTerms = 0xffff

var prefixTallyPool = sync.Pool{New: func() any { return &prefixTally{} }}

func (pt *prefixTally) start(maxID int64) {
	if int64(len(pt.byRow)) <= maxID {
		pt.byRow = make([]rowTally, maxID+1)
	}
	pt.maxID, pt.terms, pt.last = maxID, pt.terms[:0], pt.last[:0]
	pt.lo, pt.hi, pt.n, pt.outOfIDs, pt.overflow, pt.unordered = maxID+1, -1, 0, false, false, false
}

// clear sets the rows tallied back to zero.
func (pt *prefixTally) clear() {
	if pt.hi >= pt.lo {
		clear(pt.byRow[pt.lo : pt.hi+1])
	}
	pt.lo, pt.hi, pt.n = pt.maxID+1, -1, 0
	pt.terms, pt.last = pt.terms[:0], pt.last[:0]
}

// at says the entries that follow are term's.
func (pt *prefixTally) at(term []byte) {
	i := slices.Index(pt.terms, string(term))
	if i < 0 {
		i = len(pt.terms)
		pt.terms = append(pt.terms, string(term))
		pt.last = append(pt.last, math.MinInt64)
	}
	pt.term = int32(i)
}

func (pt *prefixTally) entry(rowid int64, poslist []byte) bool {
	if rowid <= pt.last[pt.term] {
		pt.unordered = true
		return false
	}
	pt.last[pt.term] = rowid
	n, ok := countPositions(poslist)
	return ok && pt.add(rowid, n)
}

// add tallies n occurrences of the current term in rowid (none: an entry
// that deletes the row).
func (pt *prefixTally) add(rowid int64, n int32) bool {
	if rowid < 0 || rowid > pt.maxID {
		pt.outOfIDs = true
		return false
	}
	if n == 0 {
		return true
	}
	t := pt.byRow[rowid]
	if t == 0 {
		t = rowTally(min(pt.term+1, severalTerms)) << 16
		pt.n++
	} else {
		t |= severalTerms << 16
	}
	count := uint32(t&0xffff) + uint32(n)
	if n < 0 || count > 0xffff {
		pt.overflow = true
		return false
	}
	pt.byRow[rowid] = t&^0xffff | rowTally(count)
	pt.lo, pt.hi = min(pt.lo, rowid), max(pt.hi, rowid)
	return true
}

// rows returns the rows tallied, ascending, the terms sorted, and leaves
// the array all zeros.
func (pt *prefixTally) rows() phraseRows {
	out := phraseRows{terms: slices.Clone(pt.terms)}
	slices.Sort(out.terms)
	rank := make([]int32, len(pt.terms))
	for i, t := range pt.terms {
		j, _ := slices.BinarySearch(out.terms, t)
		rank[i] = int32(j)
	}
	out.rowids, out.freqs, out.only = make([]int64, 0, pt.n), make([]int32, 0, pt.n), make([]int32, 0, pt.n)
	if pt.hi >= pt.lo {
		for i, t := range pt.byRow[pt.lo : pt.hi+1] {
			if t == 0 {
				continue
			}
			only := int32(-1)
			if term := t >> 16; term != severalTerms {
				only = rank[term-1]
			}
			out.rowids = append(out.rowids, pt.lo+int64(i))
			out.freqs = append(out.freqs, int32(t&0xffff))
			out.only = append(out.only, only)
		}
	}
	pt.clear()
	return out
}
