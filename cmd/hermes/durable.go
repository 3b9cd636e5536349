package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"hermes/adapters/eventstore/sqlite"
	"hermes/projections/transcripts"
)

// The log is the only truth: `hermes check` examines it, `hermes backup`
// snapshots it while hermes serve runs, `hermes restore` puts a snapshot
// back and rebuilds the read models from it.

func newCheckCommand(g *globalFlags) *cobra.Command {
	var quick bool
	var salvage string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check the event log: SQLite's integrity check and hermes' invariants",
		Long: `Examines <home>/hermes/events.db on a read-only connection (hermes serve may
run): SQLite's integrity check, then every event: positions strictly
increasing without holes, each stream's versions 1, 2, 3, …, every event
decodes. Damaged rows are narrowed down to their exact positions. Exits 1
when anything was found.

--salvage FILE copies every event that reads and decodes, at its own
position, version and id, into a new log FILE: with hermes serve stopped,
keep the damaged events.db aside, put FILE in its place and run
'hermes projections rebuild'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCheck(orBackground(cmd.Context()), g, quick, salvage, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "run SQLite's quick_check instead of integrity_check")
	cmd.Flags().StringVar(&salvage, "salvage", "", "copy every readable event into this new log file")
	return cmd
}

func runCheck(ctx context.Context, g *globalFlags, quick bool, salvage string, stdout, stderr io.Writer) error {
	h, err := resolveHome(g)
	if err != nil {
		return err
	}
	if err := requireEmbedded(g, h, "check"); err != nil {
		return err
	}
	if err := h.requireStore(); err != nil {
		return err
	}
	start := time.Now()
	rep, err := sqlite.Check(ctx, h.eventsDB(), sqlite.CheckOptions{Quick: quick, SalvageTo: salvage, Progress: progressReporter(stderr, "check")})
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, rep.Summary())
	if salvage != "" {
		fmt.Fprintf(stdout, "salvaged %d events into %s\n", rep.Events, salvage)
	}
	if !rep.OK() {
		return &exitError{code: exitFailure, err: fmt.Errorf("the event log is damaged; restore a backup (hermes restore <backup> --home %s --force) or salvage what reads (hermes check --salvage <new file>)", h.dir)}
	}
	fmt.Fprintf(stdout, "ok: the event log is intact (%s)\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// requireEmbedded refuses check, backup and restore on a KurrentDB store.
func requireEmbedded(g *globalFlags, h homeLayout, what string) error {
	spec, err := resolveStore(g, h)
	if err != nil {
		return err
	}
	if !spec.embedded() {
		return usageError(fmt.Errorf("hermes %s works on the embedded SQLite log; the store is %s: use KurrentDB's own tools", what, spec))
	}
	return nil
}

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
	manifestName   = "manifest.json"
	backupLogName  = "events.db"
)

func newBackupCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "backup <dir>",
		Short: "Snapshot the event log into <dir>/hermes-<time>/ (hermes serve may run)",
		Long: `Takes a consistent snapshot of <home>/hermes/events.db with SQLite's VACUUM
INTO on a read transaction, so hermes serve keeps appending meanwhile: the
snapshot holds every event committed when it began. Writes
<dir>/hermes-<UTC time>/events.db and manifest.json (head position, event
count, SHA-256), files 0600 in a 0700 directory. The read models are not
backed up: restore rebuilds them.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := resolveHome(g)
			if err != nil {
				return err
			}
			if err := requireEmbedded(g, h, "backup"); err != nil {
				return err
			}
			m, dir, took, err := backup(orBackground(cmd.Context()), h, args[0], time.Now(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if rel, err := filepath.Rel(h.dir, dir); err == nil && !strings.HasPrefix(rel, "..") {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s is under the home; an erasure does not reach into backups, so erased content would stay under the home (docs/ERASURE.md)\n", dir)
			}
			secs := max(took.Seconds(), 1e-9)
			fmt.Fprintf(cmd.OutOrStdout(), "backed up %d events (head position %d) to %s: %.1f MB in %s (%.1f MB/s, %.0f events/s)\n",
				m.Events, m.HeadPosition, dir, float64(m.Bytes)/1e6, took.Round(time.Millisecond), float64(m.Bytes)/1e6/secs, float64(m.Events)/secs)
			return nil
		},
	}
}

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

// backup snapshots h's log into a new directory under dir and returns its
// manifest, the directory and how long the snapshot took.
func backup(ctx context.Context, h homeLayout, dir string, now time.Time, stderr io.Writer) (Manifest, string, time.Duration, error) {
	if err := h.requireStore(); err != nil {
		return Manifest{}, "", 0, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Manifest{}, "", 0, fmt.Errorf("backup: %w", err)
	}
	target := filepath.Join(dir, "hermes-"+now.UTC().Format("20060102T150405.000Z"))
	if err := os.Mkdir(target, 0o700); err != nil {
		return Manifest{}, "", 0, fmt.Errorf("backup: %w", err)
	}
	file := filepath.Join(target, backupLogName)
	start := time.Now()
	if err := vacuumInto(ctx, h.eventsDB(), file, stderr); err != nil {
		os.RemoveAll(target)
		return Manifest{}, "", 0, err
	}
	took := time.Since(start)
	m, err := describeSnapshot(ctx, file)
	if err != nil {
		os.RemoveAll(target)
		return Manifest{}, "", 0, err
	}
	m.CreatedAt, m.HermesVersion, m.Source = now.UTC(), version, h.eventsDB()
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, "", 0, err
	}
	if err := writeSynced(filepath.Join(target, manifestName), append(data, '\n')); err != nil {
		return Manifest{}, "", 0, fmt.Errorf("backup: %w", err)
	}
	syncDir(target)
	syncDir(dir)
	return m, target, took, nil
}

// vacuumInto writes a consistent snapshot of src to dst (which must not
// exist), mode 0600, showing its progress on a terminal.
func vacuumInto(ctx context.Context, src, dst string, stderr io.Writer) error {
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
	if sf, ok := stderr.(*os.File); ok && isTerminal(sf) {
		bar := progressbar.NewOptions64(pages*pageSize, progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription("backup"), progressbar.OptionShowBytes(true),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
		go func() {
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-done:
					bar.Finish()
					return
				case <-t.C:
					if st, err := os.Stat(dst); err == nil {
						bar.Set64(st.Size())
					}
				}
			}
		}()
	}
	_, err = db.ExecContext(ctx, "VACUUM INTO ?", dst)
	close(done)
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
	m := Manifest{Format: manifestFormat, File: backupLogName}
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

func newRestoreCommand(g *globalFlags) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "restore <backup>",
		Short: "Restore a backup into --home and rebuild the read models",
		Long: `Verifies the backup's checksum, copies its log to <home>/hermes/events.db
and rebuilds lanes.db and state.db from it. A home that is not empty is
refused unless --force (hermes serve must be stopped; Python Hermes'
state.db is never overwritten). Start hermes serve afterwards.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := resolveHome(g)
			if err != nil {
				return err
			}
			if err := requireEmbedded(g, h, "restore"); err != nil {
				return err
			}
			start := time.Now()
			dir, found, err := findBackup(args[0])
			if err != nil {
				return err
			}
			if dir != args[0] {
				fmt.Fprintf(cmd.OutOrStdout(), "%s holds %d backups; restoring the newest complete one: %s\n", args[0], found, dir)
			}
			m, err := restore(orBackground(cmd.Context()), h, dir, force, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %d events (head position %d) into %s and rebuilt the read models in %s\n",
				m.Events, m.HeadPosition, h.dir, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "restore into a home that is not empty, replacing its log")
	return cmd
}

// findBackup names the backup to restore from path: path itself when it
// holds a manifest, or else the newest complete backup among its
// hermes-<time>/ folders (the folder given to hermes backup), with the
// number of complete ones found. A backup is complete once its manifest is
// written, which backup does last, and its log file is there.
func findBackup(path string) (string, int, error) {
	if _, err := os.Stat(filepath.Join(path, manifestName)); err == nil {
		return path, 1, nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", 0, usageError(fmt.Errorf("restore: %w", err))
	}
	if !st.IsDir() {
		return "", 0, usageError(fmt.Errorf("restore: %s is not a directory: give the folder of a backup (it holds %s) or the folder given to hermes backup", path, manifestName))
	}
	matches, err := filepath.Glob(filepath.Join(path, "hermes-*", manifestName))
	if err != nil {
		return "", 0, fmt.Errorf("restore: %w", err)
	}
	var complete []string
	for _, m := range matches {
		if info, err := os.Stat(filepath.Join(filepath.Dir(m), backupLogName)); err == nil && info.Mode().IsRegular() {
			complete = append(complete, filepath.Dir(m))
		}
	}
	if len(complete) == 0 {
		return "", 0, usageError(fmt.Errorf("restore: %s holds no hermes backup (neither %s nor hermes-<time>/%s with its %s)", path, manifestName, manifestName, backupLogName))
	}
	// The names hold the UTC time: lexical order is age.
	return complete[len(complete)-1], len(complete), nil
}

// restore puts the backup in dir into home h and rebuilds the read models.
func restore(ctx context.Context, h homeLayout, dir string, force bool, stderr io.Writer) (Manifest, error) {
	var m Manifest
	data, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("restore: %s: %w", manifestName, err)
	}
	if m.Format != manifestFormat || m.File != backupLogName {
		return m, fmt.Errorf("restore: %s is not a hermes backup (format %q)", dir, m.Format)
	}
	src := filepath.Join(dir, m.File)
	sum, _, err := fileSHA256(src)
	if err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	if sum != m.SHA256 {
		return m, fmt.Errorf("restore: %s does not match its manifest (sha256 %s, manifest %s): the backup is damaged", src, sum, m.SHA256)
	}
	if entries, err := os.ReadDir(h.dir); err == nil && len(entries) > 0 && !force {
		return m, usageError(fmt.Errorf("restore: %s is not empty; pass --force to replace its log (hermes serve stopped)", h.dir))
	}
	if err := h.ensure(); err != nil {
		return m, err
	}
	lock, err := acquireGatewayLock(h)
	if err != nil {
		return m, fmt.Errorf("restore needs hermes serve stopped: %w", err)
	}
	defer lock.release()
	if foreignStateDB(h.stateDB()) {
		return m, fmt.Errorf("restore: %s: %w; move it aside first", h.stateDB(), transcripts.ErrForeignDatabase)
	}
	tmp := h.eventsDB() + ".restore-tmp"
	if err := copySynced(src, tmp); err != nil {
		os.Remove(tmp)
		return m, fmt.Errorf("restore: %w", err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(h.eventsDB() + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return m, fmt.Errorf("restore: %w", err)
		}
	}
	if err := os.Rename(tmp, h.eventsDB()); err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	syncDir(h.hermesDir())
	// A marker of the home's previous run says nothing about this log.
	if err := os.Remove(h.cleanShutdown()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return m, fmt.Errorf("restore: %w", err)
	}
	if err := rebuildReadModels(ctx, h, storeSpec{}, stderr); err != nil {
		return m, fmt.Errorf("restore: the log is in place, rebuilding the read models failed (run hermes projections rebuild): %w", err)
	}
	return m, nil
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
