// Package fts5 ranks full-text queries over SQLite FTS5 tables as FTS5's
// bm25() ranks them, bit for bit, by reading FTS5's own index (the %_data
// and %_idx tables of a table) in Go, read-only, inside the caller's read
// transaction. It exists for speed: SQLite's bm25() costs, per match, the
// position list, a %_docsize lookup and a sorter insert, and each statement
// first counts every match of each phrase (its idf), about a second for a
// common word over a million rows in the pure-Go SQLite; this package
// scores the same matches in a fraction of that. It reimplements part of
// FTS5 (the index layout of fts5_index.c, the query grammar, the
// tokenizers' handling of ASCII words and Han trigrams, bm25() of
// fts5_aux.c), so it is fenced here: one type (Ranker), a contract, page
// fixtures (testdata/, see testdata/README.md) and a test that pins the
// SQLite whose layout it reads (TestLinkedSQLiteIsTheOneRead).
//
// The contract, in one list:
//
//   - Exact: for a query it ranks, Ranker.Rank returns every row that
//     `SELECT rowid, bm25(t) FROM t WHERE t MATCH query` returns, no other,
//     each with bm25()'s double bit for bit (the same operations in the same
//     order, and the C library's log() that SQLite links: sqliteLog). Ties
//     are broken by ascending rowid (Ranking.Best), the order SQLite's
//     stable sorter gives for rows fed in ascending rowid.
//   - Exact over any structure of segments FTS5 writes: levels, merged
//     and unmerged segments, and an incremental merge under way (a segment
//     it has taken whole is listed with pages 0 and skipped: its entries
//     are in the merge's output).
//   - Exact: what it reads is the caller's snapshot: the index pages, the
//     averages record and %_docsize as of tx. The row lengths kept in
//     memory are used only when they agree with that snapshot (structure
//     write counter, row count and token total); else they are brought up
//     to date from the rows appended since, or read again in full. This
//     assumes what the transcripts projection does: rows are appended
//     (rowids grow) or deleted, and a row indexed again keeps its text. Two
//     rows rewritten in one interval with lengths that change by opposite
//     amounts would keep the totals and go unseen.
//   - The queries it ranks: one to eight phrases joined all by AND
//     (written or implicit) or all by OR. In a Unicode61 table a phrase is
//     a bare ASCII word of letters and digits (folded to lower case),
//     optionally a prefix (word*), or a quoted field of ASCII text (split
//     into words as unicode61 splits it). In a Trigram table a phrase is a
//     quoted field of three or more Han characters (its trigrams).
//   - SQLite answers instead (Rank returns an error wrapping ErrDeclined)
//     for every other query: NOT, NEAR, column filters, AND mixed with OR,
//     a quoted phrase followed by *, non-ASCII words in a Unicode61 table,
//     anything but Han text in a Trigram table, nine phrases or more.
//   - SQLite answers instead when the index is not laid out as this
//     reader expects: a contentless-delete (V2) structure record, a page or
//     record that does not parse, a page missing from a segment, a position
//     list that runs past its segment, a table of no rows.
//   - SQLite answers instead while the row lengths are not in memory (the
//     first search of a table, or after rows went away): they are read in
//     the background meanwhile (Options.LoadLengthsInline reads them in the
//     search), and when the snapshot is older than the lengths already in
//     memory, or the rowids are too sparse or past 2^27 to keep 4 bytes
//     each (docLengthIDLimit).
//   - SQLite answers instead when the linked SQLite is not SQLiteVersion
//     (checked once per Ranker), and always when Options.Off is set.
//   - Nothing it declines is wrong, only slower: the caller runs SQLite's
//     own statement, whose answer is the reference this package is tested
//     against (fixtures in testdata/, and the transcripts projection's
//     tests over real histories).
//
// It must not write to the database, hold a page past the transaction it
// was read in, or take a table name from user input.
package fts5

// SQLiteVersion is the SQLite whose FTS5 index layout, query grammar,
// bm25() and log() this package reproduces, and whose files are the
// fixtures of testdata/. A Ranker declines every query when another
// version is linked; TestLinkedSQLiteIsTheOneRead fails then, until the
// fixtures are made again with the new version (testdata/README.md), the
// tests pass against it, and this is moved on.
const SQLiteVersion = "3.53.4"
