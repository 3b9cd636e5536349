package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"hermes/adapters/eventstore/sqlite"
	"hermes/node"
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
	if err := h.RequireStore(); err != nil {
		return err
	}
	start := time.Now()
	rep, err := sqlite.Check(ctx, h.EventsDB(), sqlite.CheckOptions{Quick: quick, SalvageTo: salvage, Progress: progressReporter(stderr, "check")})
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, rep.Summary())
	if salvage != "" {
		fmt.Fprintf(stdout, "salvaged %d events into %s\n", rep.Events, salvage)
	}
	if !rep.OK() {
		return &exitError{code: exitFailure, err: fmt.Errorf("the event log is damaged; restore a backup (hermes restore <backup> --home %s --force) or salvage what reads (hermes check --salvage <new file>)", h.Dir)}
	}
	fmt.Fprintf(stdout, "ok: the event log is intact (%s)\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// requireEmbedded refuses check, backup and restore on a KurrentDB store.
func requireEmbedded(g *globalFlags, h node.Home, what string) error {
	spec, err := resolveStore(g, h)
	if err != nil {
		return err
	}
	if !spec.Embedded() {
		return usageError(fmt.Errorf("hermes %s works on the embedded SQLite log; the store is %s: use the server's own tools (pg_dump or pg_basebackup for PostgreSQL, KurrentDB's for KurrentDB)", what, spec))
	}
	return nil
}

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
			m, dir, took, err := node.Backup(orBackground(cmd.Context()), h, args[0], time.Now(), version, backupProgress(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			if rel, err := filepath.Rel(h.Dir, dir); err == nil && !strings.HasPrefix(rel, "..") {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s is under the home; an erasure does not reach into backups, so erased content would stay under the home (docs/ERASURE.md)\n", dir)
			}
			secs := max(took.Seconds(), 1e-9)
			fmt.Fprintf(cmd.OutOrStdout(), "backed up %d events (head position %d) to %s: %.1f MB in %s (%.1f MB/s, %.0f events/s)\n",
				m.Events, m.HeadPosition, dir, float64(m.Bytes)/1e6, took.Round(time.Millisecond), float64(m.Bytes)/1e6/secs, float64(m.Events)/secs)
			return nil
		},
	}
}

func newRestoreCommand(g *globalFlags) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "restore <backup>",
		Short: "Restore a backup into --home and rebuild the read models",
		Long: `Verifies the backup's checksum, copies its log into the home and checks the
copy whole (as hermes check does, and against the manifest's counts) before
it replaces anything, keeps the log it replaces as
<home>/hermes/events.db.pre-restore-<time> (deleted by the next erasure),
puts the copy at <home>/hermes/events.db and rebuilds lanes.db and state.db
from it. A backup that fails a check leaves the home untouched. <backup> is
a backup's folder, or the folder given to hermes backup (its newest
complete backup is restored). A home that is not empty is refused unless
--force (hermes serve must be stopped; Python Hermes' state.db is never
overwritten). Start hermes serve afterwards.`,
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
			rep, err := restore(orBackground(cmd.Context()), h, dir, force, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %d events (head position %d, checked whole) into %s and rebuilt the read models in %s\n",
				rep.Events, rep.Head, h.Dir, time.Since(start).Round(time.Millisecond))
			if rep.PreviousLog != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "the log it replaced is kept as %s (deleted by the next erasure; remove it once you no longer need it)\n", rep.PreviousLog)
			}
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
	if _, err := os.Stat(filepath.Join(path, node.ManifestName)); err == nil {
		return path, 1, nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", 0, usageError(fmt.Errorf("restore: %w", err))
	}
	if !st.IsDir() {
		return "", 0, usageError(fmt.Errorf("restore: %s is not a directory: give the folder of a backup (it holds %s) or the folder given to hermes backup", path, node.ManifestName))
	}
	matches, err := filepath.Glob(filepath.Join(path, "hermes-*", node.ManifestName))
	if err != nil {
		return "", 0, fmt.Errorf("restore: %w", err)
	}
	var complete []string
	for _, m := range matches {
		if info, err := os.Stat(filepath.Join(filepath.Dir(m), node.BackupLogName)); err == nil && info.Mode().IsRegular() {
			complete = append(complete, filepath.Dir(m))
		}
	}
	if len(complete) == 0 {
		return "", 0, usageError(fmt.Errorf("restore: %s holds no hermes backup (neither %s nor hermes-<time>/%s with its %s)", path, node.ManifestName, node.ManifestName, node.BackupLogName))
	}
	// The names hold the UTC time: lexical order is age.
	return complete[len(complete)-1], len(complete), nil
}

// restore puts the backup in dir into home h and rebuilds the read models,
// printing the rebuild's progress on stderr.
func restore(ctx context.Context, h node.Home, dir string, force bool, stderr io.Writer) (node.RestoreReport, error) {
	rep, err := node.Restore(ctx, h, dir, force, func(ctx context.Context) error {
		return rebuildReadModels(ctx, h, node.StoreSpec{}, stderr)
	})
	if errors.Is(err, node.ErrHomeNotEmpty) {
		return rep, usageError(err)
	}
	return rep, err
}

// backupProgress draws a backup's progress (node.Backup) on a terminal;
// nil elsewhere.
func backupProgress(w io.Writer) func(written, total int64) {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f) {
		return nil
	}
	var bar *progressbar.ProgressBar
	return func(written, total int64) {
		if bar == nil {
			bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription("backup"), progressbar.OptionShowBytes(true),
				progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
		}
		if bar.IsFinished() {
			return
		}
		if written >= total {
			bar.Finish()
			return
		}
		bar.Set64(written)
	}
}
