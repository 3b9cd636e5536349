package node

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/projections/transcripts"
)

// The log is the only truth: a backup is a consistent snapshot of it
// (SQLite's VACUUM INTO on a read transaction, so the node keeps appending
// meanwhile) with a manifest; the read models are not backed up, a
// restore rebuilds them.

// Manifest describes a backup: the snapshot file and what it holds.
type Manifest struct {
	Format        string    `json:"format"`
	CreatedAt     time.Time `json:"created_at"`
	HermesVersion string    `json:"hermes_version"`
	Source        string    `json:"source"`
	File          string    `json:"file"`
	Bytes         int64     `json:"bytes"`
	SHA256        string    `json:"sha256"`
	HeadPosition  uint64    `json:"head_position"`
	Events        uint64    `json:"events"`
}

const (
	manifestFormat = "hermes-backup/1"
	// ManifestName is the manifest's file in a backup's directory.
	ManifestName = "manifest.json"
	// BackupLogName is the snapshot's file in a backup's directory.
	BackupLogName = "events.db"
)

// roDSN is a read-only connection to a SQLite file.
func roDSN(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs // a relative path would read as the URI's authority
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(10000)")
	return (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String()
}

// Backup snapshots h's log into a new directory hermes-<UTC time> under
// dir (files 0600 in a 0700 directory) and returns its manifest, the
// directory and how long the snapshot took. version goes into the
// manifest. progress, when not nil, is told the bytes written so far of
// about total as the snapshot begins and while it is written, and total,
// total once it is.
func Backup(ctx context.Context, h Home, dir string, now time.Time, version string, progress func(written, total int64)) (Manifest, string, time.Duration, error) {
	if err := h.RequireStore(); err != nil {
		return Manifest{}, "", 0, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Manifest{}, "", 0, fmt.Errorf("backup: %w", err)
	}
	target := filepath.Join(dir, "hermes-"+now.UTC().Format("20060102T150405.000Z"))
	if err := os.Mkdir(target, 0o700); err != nil {
		return Manifest{}, "", 0, fmt.Errorf("backup: %w", err)
	}
	file := filepath.Join(target, BackupLogName)
	start := time.Now()
	if err := vacuumInto(ctx, h.EventsDB(), file, progress); err != nil {
		os.RemoveAll(target)
		return Manifest{}, "", 0, err
	}
	took := time.Since(start)
	m, err := describeSnapshot(ctx, file)
	if err != nil {
		os.RemoveAll(target)
		return Manifest{}, "", 0, err
	}
	m.CreatedAt, m.HermesVersion, m.Source = now.UTC(), version, h.EventsDB()
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, "", 0, err
	}
	if err := writeSynced(filepath.Join(target, ManifestName), append(data, '\n')); err != nil {
		return Manifest{}, "", 0, fmt.Errorf("backup: %w", err)
	}
	syncDir(target)
	syncDir(dir)
	return m, target, took, nil
}

// vacuumInto writes a consistent snapshot of src to dst (which must not
// exist), mode 0600, telling progress (when not nil) how far it is.
func vacuumInto(ctx context.Context, src, dst string, progress func(written, total int64)) error {
	db, err := sql.Open("sqlite", roDSN(src))
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer db.Close()
	var pages, pageSize int64
	if err := db.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// The file exists, empty and private, before SQLite writes it (VACUUM
	// INTO takes an empty file and keeps its mode).
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	f.Close()
	done := make(chan struct{})
	var wg sync.WaitGroup
	total := pages * pageSize
	if progress != nil {
		progress(0, total)
		wg.Go(func() {
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-done:
					progress(total, total)
					return
				case <-t.C:
					if st, err := os.Stat(dst); err == nil {
						progress(st.Size(), total)
					}
				}
			}
		})
	}
	_, err = db.ExecContext(ctx, "VACUUM INTO ?", dst)
	close(done)
	wg.Wait() // progress is not called once Backup returned
	if err != nil {
		os.Remove(dst)
		return fmt.Errorf("backup: vacuum into %s: %w", dst, err)
	}
	if err := os.Chmod(dst, 0o600); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	out, err := os.OpenFile(dst, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer out.Close()
	if err := out.Sync(); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// describeSnapshot reads a snapshot's head, event count, size and checksum.
func describeSnapshot(ctx context.Context, file string) (Manifest, error) {
	m := Manifest{Format: manifestFormat, File: BackupLogName}
	db, err := sql.Open("sqlite", roDSN(file))
	if err != nil {
		return m, err
	}
	defer db.Close()
	var head, n int64
	if err := db.QueryRowContext(ctx, "SELECT coalesce(max(position), 0), count(*) FROM events").Scan(&head, &n); err != nil {
		return m, fmt.Errorf("read snapshot %s: %w", file, err)
	}
	m.HeadPosition, m.Events = uint64(head), uint64(n)
	sum, size, err := fileSHA256(file)
	if err != nil {
		return m, err
	}
	m.SHA256, m.Bytes = sum, size
	return m, nil
}

func fileSHA256(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	hash := sha256.New()
	n, err := io.Copy(hash, f)
	if err != nil {
		return "", 0, fmt.Errorf("checksum %s: %w", path, err)
	}
	return hex.EncodeToString(hash.Sum(nil)), n, nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// ErrHomeNotEmpty is Restore's refusal of a home that holds files, without
// force.
var ErrHomeNotEmpty = errors.New("not empty")

// RestoreReport is what Restore did: the backup's manifest, what it
// measured in the copy it put in place, and where the log it replaced
// was kept.
type RestoreReport struct {
	Manifest Manifest
	// Events and Head are counted in the restored log, not taken from the
	// manifest.
	Events, Head uint64
	// PreviousLog is the log the restore replaced, kept aside as
	// events.db.pre-restore-<UTC time> (with its -wal and -shm); "" when
	// the home had none.
	PreviousLog string
}

// preRestoreSuffix marks the log a restore replaced.
const preRestoreSuffix = ".pre-restore-"

// Restore puts the backup in dir into home h: it verifies the backup
// against its manifest, copies it into the home and checks the copy
// whole, as hermes check does (SQLite's integrity check, every event read
// and decoded, positions without holes, each stream's versions 1, 2, 3,
// …) and against the manifest's counts, before it replaces anything; then,
// holding the home's lock, it keeps the current log aside
// (events.db.pre-restore-<time>, deleted by the next erasure's purge),
// puts the copy in place, and calls rebuild, which rebuilds the read
// models from it (RebuildOffline). A copy that fails a check is deleted
// and the home is left as it was. A home that is not empty is refused
// (ErrHomeNotEmpty) unless force; a Python Hermes state.db always is.
func Restore(ctx context.Context, h Home, dir string, force bool, rebuild func(context.Context) error) (RestoreReport, error) {
	var rep RestoreReport
	m := &rep.Manifest
	data, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return rep, fmt.Errorf("restore: %w", err)
	}
	if err := json.Unmarshal(data, m); err != nil {
		return rep, fmt.Errorf("restore: %s: %w", ManifestName, err)
	}
	if m.Format != manifestFormat || m.File != BackupLogName {
		return rep, fmt.Errorf("restore: %s is not a hermes backup (format %q)", dir, m.Format)
	}
	src := filepath.Join(dir, m.File)
	sum, _, err := fileSHA256(src)
	if err != nil {
		return rep, fmt.Errorf("restore: %w", err)
	}
	if sum != m.SHA256 {
		return rep, fmt.Errorf("restore: %s does not match its manifest (sha256 %s, manifest %s): the backup is damaged", src, sum, m.SHA256)
	}
	if entries, err := os.ReadDir(h.Dir); err == nil && len(entries) > 0 && !force {
		return rep, fmt.Errorf("restore: %s is %w; pass --force to replace its log (hermes serve stopped)", h.Dir, ErrHomeNotEmpty)
	}
	if err := h.Ensure(); err != nil {
		return rep, err
	}
	lock, err := h.Lock()
	if err != nil {
		return rep, fmt.Errorf("restore needs hermes serve stopped: %w", err)
	}
	defer lock.Release()
	if foreignStateDB(h.StateDB()) {
		return rep, fmt.Errorf("restore: %s: %w; move it aside first", h.StateDB(), transcripts.ErrForeignDatabase)
	}
	tmp := h.EventsDB() + ".restore-tmp"
	if err := copySynced(src, tmp); err != nil {
		os.Remove(tmp)
		return rep, fmt.Errorf("restore: %w", err)
	}
	if err := checkRestoredCopy(ctx, tmp, *m, &rep); err != nil {
		removeDB(tmp)
		return rep, fmt.Errorf("restore: %w; the home's log is untouched", err)
	}
	if _, err := os.Stat(h.EventsDB()); err == nil {
		rep.PreviousLog = h.EventsDB() + preRestoreSuffix + time.Now().UTC().Format("20060102T150405Z")
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Rename(h.EventsDB()+suffix, rep.PreviousLog+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return rep, fmt.Errorf("restore: keep the previous log aside: %w", err)
			}
		}
	}
	if err := os.Rename(tmp, h.EventsDB()); err != nil {
		return rep, fmt.Errorf("restore: %w", err)
	}
	syncDir(h.HermesDir())
	// A marker of the home's previous run says nothing about this log.
	if err := os.Remove(h.CleanShutdown()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return rep, fmt.Errorf("restore: %w", err)
	}
	if err := rebuild(ctx); err != nil {
		return rep, fmt.Errorf("restore: the log is in place, rebuilding the read models failed (run hermes projections rebuild): %w", err)
	}
	return rep, nil
}

// checkRestoredCopy checks the copy at path whole (sqlite.Check) and
// against the manifest's event count and head, and records what it
// counted in rep.
func checkRestoredCopy(ctx context.Context, path string, m Manifest, rep *RestoreReport) error {
	found, err := sqlite.Check(ctx, path, sqlite.CheckOptions{})
	if err != nil {
		return fmt.Errorf("the backup cannot be checked: %w", err)
	}
	if !found.OK() {
		lines := strings.Split(strings.TrimSpace(found.Summary()), "\n")
		return fmt.Errorf("the backup is damaged: %s", strings.Join(lines[min(1, len(lines)-1):], "; "))
	}
	if found.Events != m.Events || found.Head != m.HeadPosition {
		return fmt.Errorf("the backup holds %d events up to position %d, its manifest says %d up to %d: it is not the backup the manifest describes",
			found.Events, found.Head, m.Events, m.HeadPosition)
	}
	rep.Events, rep.Head = found.Events, found.Head
	return nil
}

// removeDB removes a SQLite file with its -wal and -shm.
func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
}

// dropPreRestoreLogs deletes the logs restores kept aside in h (an erasure
// cannot reach into them).
func dropPreRestoreLogs(log *slog.Logger, h Home) error {
	matches, err := filepath.Glob(h.EventsDB() + preRestoreSuffix + "*")
	if err != nil {
		return err
	}
	for _, p := range matches {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("delete %s: %w", p, err)
		}
		log.Info("deleted the log a restore kept aside: an erasure cannot reach into it", "file", p)
	}
	return nil
}

func copySynced(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// backupEvery takes a snapshot of the log every backup.interval_seconds
// into backup.dir while serve runs, keeping the backup.keep newest.
func (rt *runtime) backupEvery(ctx context.Context, log *slog.Logger) {
	b := rt.cfg.Backup
	if b.Interval <= 0 || rt.cfg.Store.URL != "" {
		return
	}
	dir := b.Dir
	if dir == "" {
		// Not under the home: erasure makes erased content unrecoverable
		// from every file there, and it does not reach into backups.
		log.Error("backup.interval_seconds is set but backup.dir is not: no periodic backups (set backup.dir outside the home)")
		return
	}
	tick := time.NewTicker(b.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		m, target, took, err := Backup(ctx, rt.home, dir, time.Now(), rt.version, nil)
		if err != nil {
			if ctx.Err() == nil {
				log.Error("periodic backup failed", "err", err)
			}
			continue
		}
		log.Info("backed up the event log", "dir", target, "events", m.Events, "head", m.HeadPosition, "bytes", m.Bytes, "took", took.Round(time.Millisecond))
		pruneBackups(log, dir, b.Keep)
	}
}

// pruneBackups deletes all but the keep newest backups in dir (those with
// a manifest: nothing else is touched).
func pruneBackups(log interface{ Info(string, ...any) }, dir string, keep int) {
	matches, _ := filepath.Glob(filepath.Join(dir, "hermes-*", ManifestName))
	if len(matches) <= keep {
		return
	}
	// The names hold the UTC time: lexical order is age.
	for _, m := range matches[:len(matches)-keep] {
		old := filepath.Dir(m)
		if err := os.RemoveAll(old); err == nil {
			log.Info("deleted a backup past backup.keep", "dir", old)
		}
	}
}
