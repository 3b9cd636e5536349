package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"hermes/node"
)

func newStoreCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Work on an event store as a whole",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newStoreCopyCommand(g))
	return cmd
}

func newStoreCopyCommand(_ *globalFlags) *cobra.Command {
	var from, to string
	var batch int
	cmd := &cobra.Command{
		Use:   "copy --from STORE --to STORE",
		Short: "Copy an event log into another store (SQLite, PostgreSQL, KurrentDB), resumably, and verify it",
		Long: `Copies every event of --from that --to lacks, each with its id, stream,
version, type, data, metadata and recorded time, in the same global order,
then verifies both sides: the count of events, a digest of every stream
and of the global order.

A store is a URL (postgres://…, esdb://…, kurrentdb://…), a hermes home
directory (its hermes/events.db; created when it does not exist), or an
events.db file (sqlite://PATH or a path ending in .db). A home given as
the target is locked as hermes serve locks it; stop every hermes serve
that uses the target before copying into it. The source may be in use:
the copy takes the events committed when it reads them, and a later run
takes the rest.

The target must be empty or an earlier copy of the same source; anything
else is refused before anything is written. Each write is one transaction
of the target: a second run copies nothing, a run that was stopped (even
killed) is completed by the next. Snapshots are not copied (a cache of the
log; the target writes its own). An erased event is copied erased.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStoreCopy(orBackground(cmd.Context()), from, to, batch, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the store to copy from")
	cmd.Flags().StringVar(&to, "to", "", "the store to copy into (empty, or an earlier copy of --from)")
	cmd.Flags().IntVar(&batch, "batch", 2000, "events per transaction of the target")
	return cmd
}

func runStoreCopy(ctx context.Context, fromArg, toArg string, batch int, stdout, stderr io.Writer) error {
	if fromArg == "" || toArg == "" {
		return usageError(errors.New("store copy needs --from and --to"))
	}
	if batch < 1 || batch > 100_000 {
		return usageError(fmt.Errorf("--batch %d: want 1 to 100000", batch))
	}
	from, err := node.ParseCopyEnd(fromArg)
	if err != nil {
		return usageError(fmt.Errorf("--from: %w", err))
	}
	to, err := node.ParseCopyEnd(toArg)
	if err != nil {
		return usageError(fmt.Errorf("--to: %w", err))
	}
	if from.String() == to.String() {
		return usageError(fmt.Errorf("--from and --to are the same store (%s)", from))
	}
	src, err := node.OpenCopySource(ctx, from)
	if err != nil {
		return fmt.Errorf("--from %s: %w", from, err)
	}
	defer src.Close()
	dst, release, err := node.OpenCopyTarget(ctx, to)
	if err != nil {
		return fmt.Errorf("--to %s: %w", to, err)
	}
	defer release()
	defer dst.Close()

	start := time.Now()
	rep, err := node.CopyLog(ctx, src, dst, node.CopyOptions{Batch: batch, Progress: copyProgress(stderr)})
	elapsed := time.Since(start)
	if errors.Is(err, node.ErrNotACopy) {
		return fmt.Errorf("--to %s: %w; nothing was written (copy into an empty store, or into an earlier copy of %s)", to, err, from)
	}
	if err != nil {
		return fmt.Errorf("%w (%d events copied before the error; run the same command again to go on)", err, rep.Copied)
	}
	rate := ""
	if rep.Copied > 0 {
		rate = fmt.Sprintf(", %.0f events/s", float64(rep.Copied)/elapsed.Seconds())
	}
	fmt.Fprintf(stdout, "copied %d events from %s to %s (%d already there) in %s%s\n",
		rep.Copied, from, to, rep.Already, elapsed.Round(time.Millisecond), rate)
	fmt.Fprintf(stdout, "phases: check of the target %s, copy %s, purge %s, verification %s\n",
		rep.Check.Round(time.Millisecond), rep.Copy.Round(time.Millisecond), rep.Purge.Round(time.Millisecond), rep.Verify.Round(time.Millisecond))
	if rep.ErasedSince > 0 {
		fmt.Fprintf(stdout, "%d events erased on the source since the earlier copy are erased on the target too\n", rep.ErasedSince)
	}
	fmt.Fprintf(stdout, "ok: verified %d events in %d streams, each stream's digest and the global order equal on both sides (order %x)\n",
		rep.Verified.Events, rep.Verified.Streams, rep.Verified.Order[:8])
	return nil
}

// copyProgress draws each phase of a copy as a bar on a terminal; nil
// elsewhere.
func copyProgress(w io.Writer) func(phase string, done, total uint64) {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f) {
		return nil
	}
	var bar *progressbar.ProgressBar
	current := ""
	return func(phase string, done, total uint64) {
		if phase != current {
			if bar != nil {
				_ = bar.Finish()
			}
			current = phase
			bar = progressbar.NewOptions64(int64(total), progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription(phase), progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish())
		}
		_ = bar.Set64(int64(min(done, total)))
	}
}
