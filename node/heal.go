package node

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"hermes/projections/transcripts"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Self-healing read models. lanes.db and state.db are disposable: one that
// cannot be opened or fails SQLite's quick check at start is moved aside
// (<name>.broken-<UTC time>, with its -wal and -shm) and rebuilt from the
// log before /readyz turns ready. The moved-aside copy is kept for
// storage.broken_retention_seconds (7 days by default), then deleted: it
// may hold content erased since, and erased content must not survive in
// the files hermes writes for longer than that bound.
//
// A state.db hermes cannot tell it wrote (Python Hermes' own, or one too
// damaged to say) is never moved: the start is refused, as before.

// brokenSuffix marks a read model moved aside.
const brokenSuffix = ".broken-"

// brokenStamp is the UTC time in a moved-aside name.
const brokenStamp = "20060102T150405Z"

// startCheckMaxBytes bounds the read models checked before ready. SQLite's
// quick check reads the whole file, slowly for state.db's FTS5 indexes:
// ~18 MB/s on the 2-core test machine (95 MB in 5.3 s; 52 s for the read
// models of a 1,000,000-event history), so 16 MiB stays under a second. A
// bigger file is checked in the background once serving (checkLater);
// damage found there is recorded in <file>.damaged, and the next start
// moves the file aside and rebuilds it. It is a node's default
// (runtime.startCheckMax), which a test may lower.
const startCheckMaxBytes int64 = 16 << 20

// damagedMarker records, for the next start, damage found in the
// background.
func damagedMarker(path string) string { return path + ".damaged" }

// dbBytes is the size of a SQLite file with its WAL.
func dbBytes(path string) int64 {
	var n int64
	for _, suffix := range []string{"", "-wal"} {
		if st, err := os.Stat(path + suffix); err == nil {
			n += st.Size()
		}
	}
	return n
}

// healable opens a read model and checks it: SQLite's quick check when it
// is at most checkMax bytes (startCheckMaxBytes), or the damage a
// background check of the previous run recorded. When opening or the check
// fails it moves the file aside and opens a fresh one. ours says whether a file that failed may be
// moved: false for a state.db hermes cannot tell it wrote.
func healable[P io.Closer](log *slog.Logger, now time.Time, path, what string, checkMax int64, open func() (P, error), ours func(error) bool) (P, error) {
	p, err := open()
	if err == nil {
		if data, statErr := os.ReadFile(damagedMarker(path)); statErr == nil {
			err = fmt.Errorf("%s: %w (found while the previous run served: %s)", path, errQuickCheck, strings.TrimSpace(string(data)))
		} else if dbBytes(path) <= checkMax {
			err = quickCheck(context.Background(), path)
		}
		if err != nil {
			p.Close()
		}
	}
	if err == nil {
		return p, nil
	}
	var zero P
	if !damaged(err) {
		return zero, err
	}
	if !ours(err) {
		if errors.Is(err, transcripts.ErrForeignDatabase) {
			return zero, err
		}
		return zero, fmt.Errorf("%s is damaged (%w) and hermes cannot tell it wrote it, so it is left untouched (Python Hermes' state.db never is): if it is hermes' read model, move it aside and start again, hermes rebuilds it from the log", what, err)
	}
	aside, moveErr := moveBrokenAside(path, now)
	if moveErr != nil {
		return zero, fmt.Errorf("%s is damaged (%w) and could not be moved aside: %w; run `hermes projections rebuild`", what, err, moveErr)
	}
	if err := os.Remove(damagedMarker(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return zero, err
	}
	log.Warn("read model damaged: moved aside, rebuilding it from the event log before serving",
		"read_model", what, "err", err, "moved_to", aside)
	return open()
}

// checkLater runs SQLite's quick check on a read model too big to be
// checked before ready (more than checkMax bytes, startCheckMaxBytes),
// while hermes serves, and reports whether it found damage. Damage is
// logged and recorded in <file>.damaged for the next start; the node heals
// it while serving (healing.go).
func checkLater(ctx context.Context, log *slog.Logger, path, what string, checkMax int64) bool {
	if dbBytes(path) <= checkMax {
		return false
	}
	start := time.Now()
	err := quickCheck(ctx, path)
	switch {
	case ctx.Err() != nil:
	case err == nil:
		log.Info("read model passed its quick check", "read_model", what, "took", time.Since(start).Round(time.Millisecond))
	case damaged(err):
		if werr := os.WriteFile(damagedMarker(path), []byte(err.Error()+"\n"), 0o600); werr != nil {
			log.Error("read model damaged, and recording it for the next start failed", "read_model", what, "err", err, "record_err", werr)
		} else {
			log.Error("read model damaged: rebuilding the read models from the event log while serving", "read_model", what, "err", err)
		}
		return true
	default:
		log.Warn("read model quick check could not run", "read_model", what, "err", err)
	}
	return false
}

// errQuickCheck: SQLite's quick check found damage.
var errQuickCheck = errors.New("quick check failed")

// damaged says whether an error opening or checking a read model means the
// file is damaged (and not, say, a full disk or a permission).
func damaged(err error) bool {
	if errors.Is(err, errQuickCheck) {
		return true
	}
	var se *sqlitedriver.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return true
		}
	}
	return false
}

// quickCheck runs PRAGMA quick_check on the SQLite file at path, on a
// read-only connection of its own.
func quickCheck(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", roDSN(path))
	if err != nil {
		return fmt.Errorf("quick check %s: %w", path, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "PRAGMA quick_check")
	if err != nil {
		return fmt.Errorf("quick check %s: %w", path, err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("quick check %s: %w", path, err)
		}
		if line != "ok" && len(problems) < 5 {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("quick check %s: %w", path, err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s: %w: %s", path, errQuickCheck, strings.Join(problems, "; "))
	}
	return nil
}

// moveBrokenAside renames path and its -wal and -shm to <path>.broken-<time>…
// and returns the new name.
func moveBrokenAside(path string, now time.Time) (string, error) {
	aside := path + brokenSuffix + now.UTC().Format(brokenStamp)
	for _, suffix := range []string{"-wal", "-shm", ""} {
		if err := os.Rename(path+suffix, aside+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return aside, nil
}

// stateDBIsOurs says whether a state.db that failed to open or check may be
// moved aside: not when it is foreign (Python Hermes'), and only when its
// schema (page 1, read despite damage elsewhere) has hermes' own state_meta
// table, which Python Hermes never creates.
func stateDBIsOurs(path string) func(error) bool {
	return func(err error) bool {
		if errors.Is(err, transcripts.ErrForeignDatabase) {
			return false
		}
		db, openErr := sql.Open("sqlite", roDSN(path))
		if openErr != nil {
			return false
		}
		defer db.Close()
		var n int
		if db.QueryRow("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'state_meta'").Scan(&n) != nil {
			return false
		}
		return n == 1
	}
}

// sweepBroken deletes the read models moved aside longer ago than
// retention (from their name's time) in the directories of paths.
func sweepBroken(log *slog.Logger, now time.Time, retention time.Duration, paths ...string) {
	for _, p := range paths {
		matches, _ := filepath.Glob(p + brokenSuffix + "*")
		for _, m := range matches {
			stamp := strings.TrimPrefix(m, p+brokenSuffix)
			stamp = strings.TrimSuffix(strings.TrimSuffix(stamp, "-wal"), "-shm")
			at, err := time.Parse(brokenStamp, stamp)
			if err != nil || now.Sub(at) < retention {
				continue
			}
			if err := os.Remove(m); err != nil {
				log.Warn("could not delete an expired damaged read model", "file", m, "err", err)
				continue
			}
			log.Info("deleted a damaged read model past storage.broken_retention_seconds", "file", m)
		}
	}
}

// foreignStateDB says, reading only, whether path holds tables but not
// hermes' state_meta: a state.db written by Python Hermes.
func foreignStateDB(path string) bool {
	if _, err := os.Stat(path); err != nil {
		return false
	}
	db, err := sql.Open("sqlite", roDSN(path))
	if err != nil {
		return false
	}
	defer db.Close()
	var tables, ours int
	err = db.QueryRow("SELECT count(*), count(*) FILTER (WHERE name = 'state_meta') FROM sqlite_schema WHERE type = 'table'").Scan(&tables, &ours)
	return err == nil && tables > 0 && ours == 0
}

// dropBrokenCopies deletes every read model moved aside (with its -wal and
// -shm): after an erasure, erased content must not survive in any file
// hermes wrote, and a damaged copy cannot be erased in.
func dropBrokenCopies(log *slog.Logger, paths ...string) error {
	for _, p := range paths {
		matches, _ := filepath.Glob(p + brokenSuffix + "*")
		for _, m := range matches {
			if err := os.Remove(m); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("delete %s after an erasure: %w", m, err)
			}
			log.Info("deleted a damaged read model moved aside: an erasure happened since", "file", m)
		}
	}
	return nil
}
