package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"hermes/adapters/config"
)

func newConfigCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Inspect the configuration"}
	keys := &cobra.Command{
		Use:   "keys",
		Short: "List every configuration key with its default and environment variable",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printKeys(cmd.OutOrStdout())
		},
	}
	check := &cobra.Command{
		Use:   "check",
		Short: "Load the configuration and report every bad value (exit 2)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, h, err := loadConfig(g, nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: home %s, api.addr %s, reset mode %s, timezone %s\n",
				h.Dir, cfg.API.Addr, cfg.SessionReset.Mode, cfg.Location())
			return nil
		},
	}
	cmd.AddCommand(keys, check)
	return cmd
}

func printKeys(out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tTYPE\tDEFAULT\tENVIRONMENT\tDESCRIPTION")
	for _, k := range config.Describe() {
		env := strings.Join(k.Env, ", ")
		if env == "" {
			env = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.Key, k.Type, k.Default, env, k.Description)
	}
	return tw.Flush()
}

func isTerminal(f *os.File) bool { return isatty.IsTerminal(f.Fd()) }
