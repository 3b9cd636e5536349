package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"hermes/api"
	"hermes/domain"
	"hermes/events"
	"hermes/node"
)

func newSessionsCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "sessions", Short: "Inspect session lanes"}
	var activeMinutes int
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List lanes, most recently active first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSessionsList(cmd.Context(), g, activeMinutes, asJSON, cmd.OutOrStdout())
		},
	}
	list.Flags().IntVar(&activeMinutes, "active-minutes", 0, "only lanes active in the last N minutes (0: all)")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	var at string
	var atVersion uint64
	show := &cobra.Command{
		Use:   "show <session-key>",
		Short: "Show a lane's entry, now or as it was (--at TIME, --at-version N)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSessionsShow(cmd.Context(), g, args[0], at, atVersion, cmd.OutOrStdout())
		},
	}
	show.Flags().StringVar(&at, "at", "", "time travel: the entry as it was at this RFC 3339 time")
	show.Flags().Uint64Var(&atVersion, "at-version", 0, "time travel: the entry as it was right after this lane version")
	cmd.AddCommand(list, show)
	return cmd
}

// readLanes replays every lane from the log (read-only): the CLI's view
// needs no read model, so it works with or without a running server.
func readLanes(ctx context.Context, store events.Store) (map[string][]events.Envelope, error) {
	lanes := map[string][]events.Envelope{}
	var after uint64
	for {
		page, err := store.ReadAll(ctx, after, 4096)
		if err != nil {
			return nil, err
		}
		for _, env := range page {
			after = env.Position
			if key, ok := events.SessionKeyOf(env.Stream); ok {
				lanes[key] = append(lanes[key], env)
			}
		}
		if len(page) < 4096 {
			return lanes, nil
		}
	}
}

func openReadOnly(ctx context.Context, g *globalFlags) (events.Store, error) {
	h, err := resolveHome(g)
	if err != nil {
		return nil, err
	}
	spec, err := resolveStore(g, h)
	if err != nil {
		return nil, err
	}
	return node.OpenStoreReadOnly(ctx, spec, h)
}

func runSessionsList(ctx context.Context, g *globalFlags, activeMinutes int, asJSON bool, out io.Writer) error {
	if activeMinutes < 0 {
		return usageError(errors.New("--active-minutes must not be negative"))
	}
	store, err := openReadOnly(ctx, g)
	if err != nil {
		return err
	}
	defer store.Close()
	lanes, err := readLanes(orBackground(ctx), store)
	if err != nil {
		return err
	}
	var entries []api.Entry
	var latest time.Time
	for _, history := range lanes {
		l := domain.StateAtVersion(history, history[len(history)-1].Version)
		if !l.Exists() {
			continue
		}
		entries = append(entries, api.NewEntry(l, history[len(history)-1].Version))
		if l.UpdatedAt.After(latest) {
			latest = l.UpdatedAt
		}
	}
	sortEntries(entries)
	if activeMinutes > 0 {
		cutoff := time.Now().Add(-time.Duration(activeMinutes) * time.Minute)
		kept := entries[:0]
		for _, e := range entries {
			if !time.Time(e.UpdatedAt).Before(cutoff) {
				kept = append(kept, e)
			}
		}
		entries = kept
	}
	if asJSON {
		return json.NewEncoder(out).Encode(struct {
			Sessions []api.Entry `json:"sessions"`
		}{nonNilEntries(entries)})
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION KEY\tSESSION ID\tUPDATED\tTOKENS\tFLAGS")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", e.SessionKey, e.SessionID,
			time.Time(e.UpdatedAt).UTC().Format(time.RFC3339), e.TotalTokens, flags(e))
	}
	return tw.Flush()
}

func flags(e api.Entry) string {
	var f []string
	if e.Suspended {
		f = append(f, "suspended")
	}
	if e.ResumePending {
		f = append(f, "resume_pending("+deref(e.ResumeReason)+")")
	}
	if e.WasAutoReset {
		f = append(f, "auto_reset("+deref(e.AutoResetReason)+")")
	}
	if e.OpenTurnID != nil {
		f = append(f, "turn_open")
	}
	if len(f) == 0 {
		return "-"
	}
	return fmt.Sprint(f)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func sortEntries(es []api.Entry) {
	sort.SliceStable(es, func(i, j int) bool {
		ti, tj := time.Time(es[i].UpdatedAt), time.Time(es[j].UpdatedAt)
		if !ti.Equal(tj) {
			return ti.After(tj)
		}
		return es[i].SessionKey < es[j].SessionKey
	})
}

func nonNilEntries(es []api.Entry) []api.Entry {
	if es == nil {
		return []api.Entry{}
	}
	return es
}

func runSessionsShow(ctx context.Context, g *globalFlags, key, at string, atVersion uint64, out io.Writer) error {
	if at != "" && atVersion != 0 {
		return usageError(errors.New("give --at or --at-version, not both"))
	}
	var atTime time.Time
	if at != "" {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return usageError(fmt.Errorf("--at %q is not an RFC 3339 time", at))
		}
		atTime = t
	}
	store, err := openReadOnly(ctx, g)
	if err != nil {
		return err
	}
	defer store.Close()
	history, err := store.ReadStream(orBackground(ctx), events.LaneStream(key), 1, 1<<30, events.Forwards)
	if errors.Is(err, events.ErrStreamNotFound) {
		return fmt.Errorf("no lane with session key %q", key)
	}
	if err != nil {
		return err
	}
	var lane domain.Lane
	var version uint64
	switch {
	case atVersion != 0:
		if atVersion > uint64(len(history)) {
			return fmt.Errorf("lane %s has versions 1 to %d", key, len(history))
		}
		lane, version = domain.StateAtVersion(history, atVersion), atVersion
	case !atTime.IsZero():
		lane, version = domain.StateAtTime(history, atTime)
		if version == 0 {
			return fmt.Errorf("lane %s did not exist at %s", key, at)
		}
	default:
		version = history[len(history)-1].Version
		lane = domain.StateAtVersion(history, version)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(api.NewEntry(lane, version))
}

func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
