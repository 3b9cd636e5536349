package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"hermes/node"
	"hermes/projections/transcripts"
)

type searchOptions struct {
	sources []string
	roles   []string
	limit   int
	asJSON  bool
}

func newSearchCommand(g *globalFlags) *cobra.Command {
	var o searchOptions
	cmd := &cobra.Command{
		Use:   "search <query>",
		Short: "Full-text search over every transcript (FTS5; CJK through trigrams)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.limit < 1 || o.limit > 500 {
				return usageError(fmt.Errorf("--limit must be from 1 to 500"))
			}
			return runSearch(orBackground(cmd.Context()), g, strings.Join(args, " "), o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringSliceVar(&o.sources, "source", nil, "only sessions from these sources (platforms)")
	cmd.Flags().StringSliceVar(&o.roles, "role", nil, "only messages with these roles")
	cmd.Flags().IntVar(&o.limit, "limit", 20, "how many results")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	return cmd
}

// freshStateDB brings the read models up to the log when no server is
// running (a running server keeps them current itself).
func freshStateDB(ctx context.Context, spec node.StoreSpec, h node.Home) error {
	lock, err := h.Lock()
	if err != nil {
		return nil
	}
	defer lock.Release()
	store, err := node.OpenStoreReadOnly(ctx, spec, h)
	if err != nil {
		return err
	}
	defer store.Close()
	return node.CatchUpOffline(ctx, h, store)
}

// openFreshReader opens the transcript reader of the home g names, its
// state.db caught up with the store first (freshStateDB).
func openFreshReader(ctx context.Context, g *globalFlags) (*transcripts.Reader, error) {
	h, err := resolveHome(g)
	if err != nil {
		return nil, err
	}
	spec, err := resolveStore(g, h)
	if err != nil {
		return nil, err
	}
	if spec.Embedded() {
		if err := h.RequireStore(); err != nil {
			return nil, err
		}
	} else if err := h.Ensure(); err != nil {
		return nil, err
	}
	if err := freshStateDB(ctx, spec, h); err != nil {
		return nil, err
	}
	return transcripts.OpenReader(h.StateDB())
}

func runSearch(ctx context.Context, g *globalFlags, query string, o searchOptions, out io.Writer) error {
	reader, err := openFreshReader(ctx, g)
	if err != nil {
		return err
	}
	defer reader.Close()
	results, err := reader.Search(ctx, transcripts.SearchQuery{Query: query, Sources: o.sources, Roles: o.roles, Limit: o.limit})
	if err != nil {
		return err
	}
	if o.asJSON {
		if results == nil {
			results = []transcripts.SearchResult{}
		}
		return json.NewEncoder(out).Encode(struct {
			Results []transcripts.SearchResult `json:"results"`
		}{results})
	}
	if len(results) == 0 {
		fmt.Fprintln(out, "no matches")
		return nil
	}
	for _, r := range results {
		ts := time.Unix(0, int64(r.Timestamp*1e9)).UTC().Format(time.RFC3339)
		fmt.Fprintf(out, "%s  %s  %s/%s  %s\n", ts, r.SessionID, r.Source, r.Role, strings.ReplaceAll(r.Snippet, "\n", " "))
	}
	return nil
}
