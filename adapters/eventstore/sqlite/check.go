package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"hermes/events"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrDamaged: the event log is damaged (SQLite finds corrupt pages, an
// event does not read or decode, positions are missing). It is the only
// truth: nothing is served from it until it is restored or salvaged. It is
// the port's [events.ErrLogDamaged].
var ErrDamaged = events.ErrLogDamaged

// IsDamaged reports whether err says the file is damaged: ErrDamaged, or
// SQLite's corruption error wherever it was met, or a header SQLite does
// not recognise (for a file where the log must be, that is damage).
func IsDamaged(err error) bool {
	return errors.Is(err, ErrDamaged) || isCode(err, sqlite3.SQLITE_CORRUPT) || isCode(err, sqlite3.SQLITE_NOTADB)
}

// tailEvents and tailBytes bound what Open reads and decodes of the last
// events: 1,024 of them, or fewer when they hold more than 4 MiB (a log
// ending in big transcript events would otherwise be decoded by the
// hundred megabytes at every start).
const (
	tailEvents = 1024
	tailBytes  = 4 << 20
)

// checkTail reads the header (done by checkSchema) and the last events
// (tailEvents, tailBytes): each must read and decode, positions strictly
// decreasing, as many events as the highest position, and the highest
// position must agree with the AUTOINCREMENT counter. It costs a few milliseconds whatever the size of the log, and
// decodes one event at a time, so its garbage is one event's.
func checkTail(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) error {
	rows, err := q.QueryContext(ctx, "SELECT position, type, data, metadata FROM events ORDER BY position DESC LIMIT ?", tailEvents)
	if err != nil {
		return damagedError("read the last events", err)
	}
	defer rows.Close()
	var last, prev int64
	read := 0
	for rows.Next() {
		var position int64
		var typ string
		var data, meta sql.RawBytes
		if err := rows.Scan(&position, &typ, &data, &meta); err != nil {
			return damagedError("read the last events", err)
		}
		if _, err := events.Decode(typ, data); err != nil {
			return damagedError("read the last events", fmt.Errorf("position %d: %w", position, err))
		}
		var md events.Metadata
		if err := json.Unmarshal(meta, &md); err != nil {
			return damagedError("read the last events", fmt.Errorf("position %d: decode metadata: %w", position, err))
		}
		if last == 0 {
			last = position
		} else if position >= prev {
			return fmt.Errorf("%w: positions out of order at %d", ErrDamaged, position)
		}
		prev = position
		if read += len(data) + len(meta); read > tailBytes {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return damagedError("read the last events", err)
	}
	if err := rows.Close(); err != nil {
		return damagedError("read the last events", err)
	}
	// Positions are contiguous (AUTOINCREMENT inside the write
	// transaction, never deleted): fewer events than the last position is
	// a hole, events lost from the middle (a restored copy missing one,
	// say). Counting reads the smallest index: 17-44 ms at 1,000,000
	// events (440 MB, in the page cache).
	// One statement, one snapshot: another process may append meanwhile.
	var n, top int64
	if err := q.QueryRowContext(ctx, "SELECT count(*), coalesce(max(position), 0) FROM events").Scan(&n, &top); err != nil {
		return damagedError("count the events", err)
	}
	if n != top {
		return fmt.Errorf("%w: %d events up to position %d: %d positions are missing", ErrDamaged, n, top, top-n)
	}
	var seq sql.NullInt64
	err = q.QueryRowContext(ctx, "SELECT seq FROM sqlite_sequence WHERE name = 'events'").Scan(&seq)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return damagedError("read the position counter", err)
	}
	if last > 0 && seq.Valid && seq.Int64 < last {
		return fmt.Errorf("%w: the position counter (%d) is below the last position (%d)", ErrDamaged, seq.Int64, last)
	}
	return nil
}

// damagedError says ErrDamaged for SQLite's corruption errors and for an
// event that does not decode (an error that is not SQLite's); other errors
// (a busy file, a full disk) are wrapped as they are.
func damagedError(what string, err error) error {
	var se *sqlitedriver.Error
	if !errors.As(err, &se) || isCode(err, sqlite3.SQLITE_CORRUPT) || isCode(err, sqlite3.SQLITE_NOTADB) {
		return fmt.Errorf("%w: %s: %w", ErrDamaged, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Range is positions From to To, inclusive.
type Range struct{ From, To uint64 }

func (r Range) String() string {
	if r.From == r.To {
		return fmt.Sprintf("%d", r.From)
	}
	return fmt.Sprintf("%d-%d", r.From, r.To)
}

// Problem is one finding of [Check] at a position.
type Problem struct {
	Position uint64
	Stream   string
	What     string
}

// CheckReport is what [Check] found.
type CheckReport struct {
	// Path is the log checked.
	Path string
	// Head is the highest position found; Events how many events read and
	// decoded.
	Head, Events uint64
	// SQLite lists what PRAGMA integrity_check (quick_check with Quick)
	// reported, nil when it said ok.
	SQLite []string
	// Unreadable are the positions whose rows SQLite cannot read.
	Unreadable []Range
	// Missing are the positions absent between two readable events (a
	// damaged page loses its rows without an error; a crash never leaves a
	// gap: positions come from an AUTOINCREMENT counter).
	Missing []Range
	// Problems are the events that do not decode and the streams whose
	// versions are not contiguous.
	Problems []Problem
}

// OK reports whether nothing was found.
func (r CheckReport) OK() bool {
	return len(r.SQLite) == 0 && len(r.Unreadable) == 0 && len(r.Missing) == 0 && len(r.Problems) == 0
}

// Damaged is every position range that is unreadable or missing, in order.
func (r CheckReport) Damaged() []Range {
	all := append(append([]Range(nil), r.Unreadable...), r.Missing...)
	for i := 1; i < len(all); i++ {
		for j := i; j > 0 && all[j].From < all[j-1].From; j-- {
			all[j], all[j-1] = all[j-1], all[j]
		}
	}
	return all
}

// CheckOptions configure [Check].
type CheckOptions struct {
	// Quick runs PRAGMA quick_check instead of integrity_check (it skips
	// the comparison of the indexes with the table).
	Quick bool
	// Progress, when not nil, is told how far the scan of the events got
	// (position, highest position).
	Progress func(done, total uint64)
	// SalvageTo, when not empty, is a new file that receives every event
	// that reads and decodes, at its position, version and id.
	SalvageTo string
}

// checkChunk is how many positions one scan query covers.
const checkChunk = 4096

// Check examines the event log at path without changing it, on a read-only
// connection, so it runs while hermes serve appends: SQLite's integrity
// check, then hermes' own invariants over every event (positions strictly
// increasing and without holes, each stream's versions 1, 2, 3, …, every
// event decodes). Rows SQLite cannot read are narrowed down to the exact
// positions. Its error is for a file it cannot examine at all.
func Check(ctx context.Context, path string, o CheckOptions) (CheckReport, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return CheckReport{}, err
	}
	rep := CheckReport{Path: abs}
	if _, err := os.Stat(abs); err != nil {
		return rep, fmt.Errorf("check %s: %w", abs, err)
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "query_only(1)")
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String())
	if err != nil {
		return rep, fmt.Errorf("check %s: %w", abs, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := checkSchema(ctx, db, false, len(migrations)); err != nil && !errors.Is(err, ErrOlderSchema) {
		return rep, fmt.Errorf("check %s: %w", abs, err)
	}
	pragma := "PRAGMA integrity_check(100)"
	if o.Quick {
		pragma = "PRAGMA quick_check(100)"
	}
	lines, err := pragmaLines(ctx, db, pragma)
	if err != nil {
		rep.SQLite = append(rep.SQLite, err.Error())
	} else if len(lines) != 1 || lines[0] != "ok" {
		rep.SQLite = lines
	}

	var salvage *sql.DB
	if o.SalvageTo != "" {
		if salvage, err = openSalvage(ctx, o.SalvageTo); err != nil {
			return rep, err
		}
		defer salvage.Close()
	}
	top, err := highestPosition(ctx, db)
	if err != nil {
		return rep, fmt.Errorf("check %s: %w", abs, err)
	}
	s := &scanner{db: db, rep: &rep, versions: map[string]uint64{}, salvage: salvage}
	for from := uint64(1); from <= top; from += checkChunk {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if err := s.scanRange(ctx, from, min(from+checkChunk-1, top)); err != nil {
			return rep, err
		}
		if o.Progress != nil {
			o.Progress(min(from+checkChunk-1, top), top)
		}
	}
	if s.last < top {
		// Positions issued (the counter) but not found at the end.
		s.missing(s.last+1, top)
	}
	return rep, nil
}

// highestPosition is the highest position issued: the larger of the
// AUTOINCREMENT counter and max(position), whichever can be read.
func highestPosition(ctx context.Context, db *sql.DB) (uint64, error) {
	var seq, maxPos sql.NullInt64
	seqErr := db.QueryRowContext(ctx, "SELECT seq FROM sqlite_sequence WHERE name = 'events'").Scan(&seq)
	maxErr := db.QueryRowContext(ctx, "SELECT max(position) FROM events").Scan(&maxPos)
	if seqErr != nil && !errors.Is(seqErr, sql.ErrNoRows) && maxErr != nil {
		return 0, fmt.Errorf("read the highest position: %w", errors.Join(seqErr, maxErr))
	}
	return uint64(max(seq.Int64, maxPos.Int64)), nil
}

func pragmaLines(ctx context.Context, db *sql.DB, pragma string) ([]string, error) {
	rows, err := db.QueryContext(ctx, pragma)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

type scanner struct {
	db       *sql.DB
	rep      *CheckReport
	versions map[string]uint64
	last     uint64 // last position read
	salvage  *sql.DB
}

// scanRange reads positions from..to; a range SQLite cannot read is halved
// until the unreadable positions are single.
func (s *scanner) scanRange(ctx context.Context, from, to uint64) error {
	rows, err := s.read(ctx, from, to)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		if from == to {
			s.unreadable(from)
			return nil
		}
		mid := from + (to-from)/2
		if err := s.scanRange(ctx, from, mid); err != nil {
			return err
		}
		return s.scanRange(ctx, mid+1, to)
	}
	for _, r := range rows {
		s.take(r)
	}
	if s.salvage != nil {
		return s.copy(ctx, rows)
	}
	return nil
}

type rawEvent struct {
	position, version, recordedAt int64
	stream, id, typ               string
	data, meta                    []byte
}

func (s *scanner) read(ctx context.Context, from, to uint64) ([]rawEvent, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+columns+" FROM events WHERE position BETWEEN ? AND ? ORDER BY position", int64(from), int64(to))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []rawEvent
	for rows.Next() {
		var r rawEvent
		if err := rows.Scan(&r.position, &r.stream, &r.version, &r.id, &r.typ, &r.data, &r.meta, &r.recordedAt); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *scanner) take(r rawEvent) {
	pos := uint64(r.position)
	if pos <= s.last {
		s.rep.Problems = append(s.rep.Problems, Problem{Position: pos, Stream: r.stream, What: fmt.Sprintf("position not above the previous one (%d)", s.last)})
		return
	}
	if pos > s.last+1 {
		s.missing(s.last+1, pos-1)
	}
	s.last = pos
	s.rep.Head = pos
	if _, err := events.Decode(r.typ, r.data); err != nil {
		s.rep.Problems = append(s.rep.Problems, Problem{Position: pos, Stream: r.stream, What: fmt.Sprintf("%s does not decode: %v", r.typ, err)})
	} else if err := json.Unmarshal(r.meta, new(events.Metadata)); err != nil {
		s.rep.Problems = append(s.rep.Problems, Problem{Position: pos, Stream: r.stream, What: fmt.Sprintf("metadata does not decode: %v", err)})
	} else {
		s.rep.Events++
	}
	prev := s.versions[r.stream]
	if want := prev + 1; uint64(r.version) != want {
		s.rep.Problems = append(s.rep.Problems, Problem{Position: pos, Stream: r.stream, What: fmt.Sprintf("version %d follows version %d", r.version, prev)})
	}
	s.versions[r.stream] = uint64(r.version)
}

// unreadable adds pos to the unreadable ranges (and moves past it).
func (s *scanner) unreadable(pos uint64) {
	if s.last+1 < pos {
		s.missing(s.last+1, pos-1)
	}
	s.last = max(s.last, pos)
	s.rep.Unreadable = addToRanges(s.rep.Unreadable, pos, pos)
}

func (s *scanner) missing(from, to uint64) {
	s.rep.Missing = addToRanges(s.rep.Missing, from, to)
}

// addToRanges appends from..to, merged with the last range when adjacent.
func addToRanges(rs []Range, from, to uint64) []Range {
	if n := len(rs); n > 0 && rs[n-1].To+1 >= from {
		rs[n-1].To = max(rs[n-1].To, to)
		return rs
	}
	return append(rs, Range{From: from, To: to})
}

// openSalvage creates a new, empty event log at path for the events that
// read and decode, and returns a connection to it.
func openSalvage(ctx context.Context, path string) (*sql.DB, error) {
	if _, err := os.Stat(path); err == nil {
		return nil, fmt.Errorf("salvage to %s: the file exists", path)
	}
	st, err := Open(path)
	if err != nil {
		return nil, fmt.Errorf("salvage to %s: %w", path, err)
	}
	if err := st.Close(); err != nil {
		return nil, fmt.Errorf("salvage to %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", dsn(path, false, defaultBusyTimeout))
	if err != nil {
		return nil, fmt.Errorf("salvage to %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// copy inserts the rows that decode into the salvage log, as they were.
func (s *scanner) copy(ctx context.Context, rows []rawEvent) error {
	tx, err := s.salvage.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("salvage: %w", err)
	}
	defer tx.Rollback()
	for _, r := range rows {
		if _, err := events.Decode(r.typ, r.data); err != nil {
			continue
		}
		if json.Unmarshal(r.meta, new(events.Metadata)) != nil {
			continue
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO events ("+columns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
			r.position, r.stream, r.version, r.id, r.typ, string(r.data), string(r.meta), r.recordedAt); err != nil {
			return fmt.Errorf("salvage position %d: %w", r.position, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("salvage: %w", err)
	}
	return nil
}

// Summary is the report in a few lines.
func (r CheckReport) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d events read and decoded, head position %d\n", r.Path, r.Events, r.Head)
	if len(r.SQLite) == 0 {
		b.WriteString("sqlite integrity check: ok\n")
	} else {
		fmt.Fprintf(&b, "sqlite integrity check: %d problem(s):\n", len(r.SQLite))
		for _, l := range r.SQLite {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	if d := r.Damaged(); len(d) > 0 {
		parts := make([]string, len(d))
		for i, rg := range d {
			parts[i] = rg.String()
		}
		fmt.Fprintf(&b, "damaged positions (unreadable or missing): %s\n", strings.Join(parts, ", "))
	}
	for i, p := range r.Problems {
		if i == 20 {
			fmt.Fprintf(&b, "… and %d more problems\n", len(r.Problems)-20)
			break
		}
		fmt.Fprintf(&b, "position %d (%s): %s\n", p.Position, p.Stream, p.What)
	}
	return b.String()
}
