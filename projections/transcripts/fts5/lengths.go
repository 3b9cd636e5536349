package fts5

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
)

// docLengths keeps, per FTS table, the token count of every row (what
// bm25() reads from %_docsize through xColumnSize, one b-tree lookup per
// match) in memory: 4 bytes a row. It is brought up to date at each
// search from the rows appended since (the transcripts projection's
// messages only ever get new ids, and their content never changes in
// place: a rewind updates only `active`, and FTS5 re-indexes the same
// text; see the package doc). Reading every row (the first search
// of a table, or after rows went away, as the row count and the token
// total say) is done in the background: until it is done, searches take
// SQLite's path, so a one-shot search (the CLI) never pays for it.
type docLengths struct {
	mu      sync.Mutex
	byTable map[string]*docLengthTable
	loading map[string]bool
	loads   sync.WaitGroup
	// stop cancels the background reads (close); closed refuses new ones.
	stop   context.CancelFunc
	ctx    context.Context
	closed bool
}

// close cancels the background reads and waits for them: a Close (a
// live swap holds every request meanwhile) does not wait for a full read
// of a big table.
func (l *docLengths) close() {
	l.mu.Lock()
	l.closed = true
	if l.stop != nil {
		l.stop()
	}
	l.mu.Unlock()
	l.loads.Wait()
}

// errLengthsNotLoaded says the table's lengths are being read.
var errLengthsNotLoaded = fmt.Errorf("%w: document lengths not in memory yet", errUnsupportedIndex)

// docLengthTable is one table's lengths as of one state of the index. It
// is never changed once published, except by appending past len(lens).
type docLengthTable struct {
	writeCounter uint64
	rows, tokens int64    // the averages record it agrees with
	lens         []uint32 // by rowid: the length + 1, or 0 for no row
	maxID        int64
}

// maxDocLengthID bounds the ids the copy covers (a denser file is
// searched by SQLite's statement).
const maxDocLengthID = 1 << 27

// docLengthIDLimit is the highest id a copy of a table of rows rows
// covers: maxDocLengthID, and at most four ids a row (plus a margin), so
// a sparse id space (pruned or imported ranges) cannot make the copy, 4
// bytes an id, much bigger than the rows it describes; a sparser file is
// searched by SQLite's statement.
func docLengthIDLimit(rows int64) int64 { return min(maxDocLengthID, 4*rows+1<<16) }

func (t *docLengthTable) of(id int64) (uint32, bool) {
	if id < 0 || id >= int64(len(t.lens)) {
		return 0, false
	}
	return t.lens[id] - 1, t.lens[id] != 0
}

// of returns the lengths of table as of the caller's snapshot, whose
// structure write counter and averages record are given. It returns
// errLengthsNotLoaded when they must be read in full (load does it), and
// errUnsupportedIndex when another search has already moved the copy past
// this snapshot.
func (l *docLengths) of(ctx context.Context, tx *sql.Tx, table string, writeCounter uint64, rows, tokens int64) (*docLengthTable, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.byTable[table]
	if cur != nil && cur.writeCounter == writeCounter && cur.rows == rows && cur.tokens == tokens {
		return cur, nil
	}
	if cur == nil {
		return nil, errLengthsNotLoaded
	}
	var snapshotMax int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM `+table+`_docsize`).Scan(&snapshotMax); err != nil {
		return nil, fmt.Errorf("document lengths of %s: %w", table, err)
	}
	if snapshotMax < cur.maxID {
		// Either an older snapshot than the copy (appends since wrote
		// leaves: FTS5's write counter only grows with them), or the rows
		// of the highest ids went away (their deletion writes no leaf
		// when secure-delete takes their terms out in place): the copy
		// is then read again, as after any rows went away.
		if writeCounter < cur.writeCounter {
			return nil, errUnsupportedIndex
		}
		return nil, errLengthsNotLoaded
	}
	if snapshotMax > docLengthIDLimit(rows) {
		return nil, errUnsupportedIndex
	}
	next := &docLengthTable{writeCounter: writeCounter, rows: rows, tokens: tokens, lens: cur.lens, maxID: cur.maxID}
	added, sum, err := next.load(ctx, tx, table, cur.maxID)
	if err != nil {
		return nil, err
	}
	if cur.rows+added != rows || cur.tokens+sum != tokens {
		return nil, errLengthsNotLoaded // rows went away
	}
	l.byTable[table] = next
	return next, nil
}

// load reads every length of table in tx (a snapshot whose structure
// write counter and averages record are given) and publishes them.
func (l *docLengths) load(ctx context.Context, tx *sql.Tx, table string, writeCounter uint64, rows, tokens int64) error {
	next := &docLengthTable{writeCounter: writeCounter, rows: rows, tokens: tokens}
	added, sum, err := next.load(ctx, tx, table, 0)
	if err != nil {
		return err
	}
	if added != rows || sum != tokens {
		return fmt.Errorf("%w: %s_docsize holds %d rows and %d tokens, the averages record %d and %d",
			errUnsupportedIndex, table, added, sum, rows, tokens)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byTable == nil {
		l.byTable = map[string]*docLengthTable{}
	}
	l.byTable[table] = next
	return nil
}

// startLoad marks table as being read and returns the context of the
// read; false if it already is, or the reader is closed.
func (l *docLengths) startLoad(table string) (context.Context, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loading[table] || l.closed {
		return nil, false
	}
	if l.ctx == nil {
		l.ctx, l.stop = context.WithCancel(context.Background())
	}
	if l.loading == nil {
		l.loading = map[string]bool{}
	}
	l.loading[table] = true
	l.loads.Add(1)
	return l.ctx, true
}

func (l *docLengths) endLoad(table string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.loading, table)
	l.loads.Done()
}

// load appends the lengths of the rows after id `after`, returning how
// many rows and tokens it added.
func (t *docLengthTable) load(ctx context.Context, tx *sql.Tx, table string, after int64) (added, sum int64, err error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, sz FROM `+table+`_docsize WHERE id > ? ORDER BY id`, after)
	if err != nil {
		return 0, 0, fmt.Errorf("document lengths of %s: %w", table, err)
	}
	defer rows.Close()
	lens := t.lens
	var sz []byte
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &sz); err != nil {
			return 0, 0, fmt.Errorf("document lengths of %s: %w", table, err)
		}
		if id <= 0 || id > docLengthIDLimit(t.rows) {
			return 0, 0, errUnsupportedIndex
		}
		var n uint64
		for i := 0; i < len(sz); {
			v, next, ok := ftsVarint(sz, i)
			if !ok {
				return 0, 0, errUnsupportedIndex
			}
			n, i = n+v, next
		}
		if n >= 1<<31 {
			return 0, 0, errUnsupportedIndex
		}
		if int64(len(lens)) <= id {
			old := len(lens)
			lens = slices.Grow(lens, int(id)+1-old)[:id+1]
			clear(lens[old:])
		}
		lens[id] = uint32(n) + 1 // 0 stands for "no row"
		t.maxID = id
		added++
		sum += int64(n)
	}
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("document lengths of %s: %w", table, err)
	}
	t.lens = lens
	return added, sum, nil
}
