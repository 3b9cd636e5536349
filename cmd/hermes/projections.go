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

	"hermes/adapters/gatewaylock"
	"hermes/node"
	"hermes/projections"
)

func newProjectionsCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "projections", Short: "Rebuild and verify the read models"}
	var server string
	rebuild := &cobra.Command{
		Use:   "rebuild",
		Short: "Rebuild every read model from the event log (live while hermes serve runs)",
		Long: `Rebuilds the lane read model (lanes.db) and state.db from position 0 of the
event log into a scratch directory, then swaps them into place. The event
log is only read.

When hermes serve holds the home, the rebuild runs inside it without
stopping the API: the new files are built while the old ones serve, caught
up, and swapped in atomically (POST /v1/projections/rebuild); this command
asks for it and shows the progress until the swap. Otherwise it rebuilds
offline. Both refuse to start when the disk cannot hold the new files
beside the old ones.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRebuild(orBackground(cmd.Context()), g, server, cmd.ErrOrStderr())
		},
	}
	rebuild.Flags().StringVar(&server, "server", "", "URL of the running hermes serve (default: the address it recorded in the home, else api.addr)")
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Rebuild into a temporary directory and compare with the live read models",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVerify(orBackground(cmd.Context()), g, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.AddCommand(rebuild, verify)
	return cmd
}

func progressReporter(w io.Writer, what string) func(done, total uint64) {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f) {
		return nil
	}
	var bar *progressbar.ProgressBar
	return func(done, total uint64) {
		if bar == nil {
			bar = progressbar.NewOptions64(int64(total), progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription(what), progressbar.OptionShowCount(),
				progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
		}
		bar.Set64(int64(done))
	}
}

func runRebuild(ctx context.Context, g *globalFlags, server string, stderr io.Writer) error {
	h, err := resolveHome(g)
	if err != nil {
		return err
	}
	spec, err := resolveStore(g, h)
	if err != nil {
		return err
	}
	if spec.Embedded() {
		if err := h.RequireStore(); err != nil {
			return err
		}
	} else if err := h.Ensure(); err != nil {
		return err
	}
	lock, err := h.Lock()
	if errors.Is(err, gatewaylock.ErrLocked) {
		return rebuildLive(ctx, g, h, server, stderr)
	}
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	defer lock.Release()
	if err := node.CheckRebuildSpace(h); err != nil {
		return err
	}
	return rebuildReadModels(ctx, h, spec, stderr)
}

// rebuildReadModels rebuilds h's read models from its log into a scratch
// directory and swaps them into place; the caller holds the gateway lock.
func rebuildReadModels(ctx context.Context, h node.Home, spec node.StoreSpec, stderr io.Writer) error {
	store, err := node.OpenStoreReadOnly(ctx, spec, h)
	if err != nil {
		return err
	}
	defer store.Close()
	tracker := projections.NewRebuildTracker(time.Now)
	if _, err := tracker.Begin(); err != nil {
		return err
	}
	stopBar := drawRebuild(stderr, tracker.Status)
	clamps := &clampList{}
	err = node.RebuildOffline(ctx, h, store, tracker, clamps)
	tracker.Finish(err)
	stopBar()
	if err != nil {
		return err
	}
	if n := clamps.print(stderr); n > 0 {
		fmt.Fprintf(stderr, "%d event values were clamped or quarantined (docs/FOLD_LIMITS.md)\n", n)
	}
	st := tracker.Status()
	took := st.FinishedAt.Sub(st.StartedAt)
	rate := float64(st.Total) / max(took.Seconds(), 1e-3)
	if !spec.Embedded() {
		fmt.Fprintf(stderr, "rebuilt the read models up to position %d of %s in %s (%.0f events/s)\n", st.Total, spec, took.Round(time.Millisecond), rate)
		return nil
	}
	fmt.Fprintf(stderr, "rebuilt the read models from %d events in %s (%.0f events/s)\n", st.Total, took.Round(time.Millisecond), rate)
	return nil
}

func runVerify(ctx context.Context, g *globalFlags, stdout, stderr io.Writer) error {
	h, err := resolveHome(g)
	if err != nil {
		return err
	}
	spec, err := resolveStore(g, h)
	if err != nil {
		return err
	}
	if spec.Embedded() {
		if err := h.RequireStore(); err != nil {
			return err
		}
	}
	lock, err := h.Lock()
	if err != nil {
		return fmt.Errorf("verify needs hermes serve stopped (it compares at one position): %w", err)
	}
	defer lock.Release()
	store, err := node.OpenStoreReadOnly(ctx, spec, h)
	if err != nil {
		return err
	}
	defer store.Close()
	live, err := node.OpenReadModels(h)
	if err != nil {
		return err
	}
	defer live.Close()
	scratch, err := os.MkdirTemp(h.HermesDir(), "verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	clamps := &clampList{}
	diff, err := projections.Verify(ctx, store, node.ScratchOpener(clamps), live.Projections(), scratch, progressReporter(stderr, "verify"))
	if err != nil {
		return err
	}
	// Clamped values are reported, not failed: the log holds them for good
	// and the read models agree on them (docs/FOLD_LIMITS.md).
	n := clamps.print(stdout)
	if diff != nil {
		return fmt.Errorf("read model differs from a rebuild: %s", diff)
	}
	head, _ := store.Head(ctx)
	what := fmt.Sprintf("from %d events", head)
	if !spec.Embedded() {
		what = fmt.Sprintf("up to position %d of %s", head, spec)
	}
	if n > 0 {
		fmt.Fprintf(stdout, "ok: the read models match a rebuild %s; %d event values were clamped or quarantined (docs/FOLD_LIMITS.md)\n", what, n)
		return nil
	}
	fmt.Fprintf(stdout, "ok: the read models match a rebuild %s\n", what)
	return nil
}
