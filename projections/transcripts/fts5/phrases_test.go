package fts5

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// encodePositions writes positions (column<<32 | offset, ascending) as an
// FTS5 position list: a column marker (1, column) before each column but
// 0, then each offset as its delta + 2, as varints.
func encodePositions(positions []int64) []byte {
	var out []byte
	varint := func(v uint64) {
		var groups []byte
		for {
			groups = append(groups, byte(v&0x7f))
			if v >>= 7; v == 0 {
				break
			}
		}
		for i := len(groups) - 1; i >= 0; i-- {
			c := groups[i]
			if i > 0 {
				c |= 0x80
			}
			out = append(out, c)
		}
	}
	col, prev := int64(0), int64(0)
	for _, p := range positions {
		if c := p >> 32; c != col {
			varint(1)
			varint(uint64(c))
			col, prev = c, 0
		}
		off := p & (1<<32 - 1)
		varint(uint64(off-prev) + 2)
		prev = off
	}
	return out
}

// TestPhraseOccurrences: given random position lists (columns, offsets
// past one byte), when a phrase's occurrences are counted from the
// encoded lists, then the count is the one found by looking up every
// position, for pairs (pairOccurrences and phraseOccurrences) and for
// longer phrases.
func TestPhraseOccurrences(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	randomList := func() []int64 {
		var out []int64
		for range rng.IntN(6) {
			out = append(out, int64(rng.IntN(2))<<32|int64(rng.IntN(12)))
			if rng.IntN(8) == 0 {
				out = append(out, int64(rng.IntN(300)))
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	for i := range 3000 {
		n := 2 + i%3
		lists := make([][]int64, n)
		cursors := make([]positionCursor, n)
		for j := range lists {
			lists[j] = randomList()
			cursors[j] = positionCursor{list: encodePositions(lists[j])}
		}
		var want int32
		for _, p := range lists[0] {
			all := true
			for j := 1; j < n; j++ {
				all = all && slices.Contains(lists[j], p+int64(j))
			}
			if all {
				want++
			}
		}
		if n == 2 {
			got, ok := pairOccurrences(cursors[0].list, cursors[1].list)
			if !ok || got != want {
				t.Fatalf("pairOccurrences(%v, %v) = %d, %t, want %d", lists[0], lists[1], got, ok, want)
			}
		}
		got, ok := phraseOccurrences(cursors)
		if !ok || got != want {
			t.Fatalf("phraseOccurrences(%v) = %d, %t, want %d", lists, got, ok, want)
		}
	}
	if _, ok := pairOccurrences([]byte{0x80}, []byte{3}); ok {
		t.Errorf("pairOccurrences of a truncated varint: ok, want not ok")
	}
}

// TestPrefixTally: given the entries of a prefix's terms, when they are
// tallied by row, then each row has the sum of its occurrences and the
// index (in the sorted terms) of its only term, or -1; entries without
// positions add nothing; the array is left all zeros; a row past what a
// tally holds, or a rowid past the table, is refused.
func TestPrefixTally(t *testing.T) {
	var pt prefixTally
	pt.start(10)
	pt.at([]byte("deploy"))
	for _, e := range [][2]int64{{3, 2}, {5, 1}} {
		if !pt.add(e[0], int32(e[1])) {
			t.Fatalf("add(%d, %d) refused", e[0], e[1])
		}
	}
	pt.at([]byte("deploy"[:3] + "ing"))
	for _, e := range [][2]int64{{5, 4}, {7, 0}, {9, 1}} {
		if !pt.add(e[0], int32(e[1])) {
			t.Fatalf("add(%d, %d) refused", e[0], e[1])
		}
	}

	got := pt.rows()

	want := phraseRows{rowids: []int64{3, 5, 9}, freqs: []int32{2, 5, 1}, only: []int32{1, -1, 0}, terms: []string{"deping", "deploy"}}
	if !slices.Equal(got.rowids, want.rowids) || !slices.Equal(got.freqs, want.freqs) || !slices.Equal(got.only, want.only) || !slices.Equal(got.terms, want.terms) {
		t.Errorf("rows() = %+v, want %+v", got, want)
	}
	if i := slices.IndexFunc(pt.byRow, func(r rowTally) bool { return r != 0 }); i >= 0 {
		t.Errorf("row %d of the tally is %#x after rows(), want 0", i, pt.byRow[i])
	}

	pt.start(10)
	pt.at([]byte("x"))
	if !pt.add(2, 0xffff) || pt.add(2, 1) || !pt.overflow {
		t.Errorf("a row with 0x10000 occurrences: not refused as an overflow")
	}
	pt.clear()
	if pt.add(11, 1) || !pt.outOfIDs {
		t.Errorf("rowid 11 of a tally up to 10: not refused")
	}
}
