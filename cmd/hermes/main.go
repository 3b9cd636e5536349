package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	exitRestart = 75
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	root := newRootCommand()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.code != exitRestart {
			fmt.Fprintln(os.Stderr, "hermes:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(os.Stderr, "hermes:", err)
	return exitFailure
}

// globalFlags are the flags every command shares.
type globalFlags struct {
	home       string
	configPath string
	store      string
}

func newRootCommand() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "hermes",
		Short:         "The session layer of an AI-agent messaging gateway, event-sourced",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError(fmt.Errorf("%w\nrun '%s --help' for usage", err, c.CommandPath()))
	})
	root.PersistentFlags().StringVar(&g.home, "home", "", "hermes home directory (default $HERMES_HOME or ~/.hermes)")
	root.PersistentFlags().StringVar(&g.configPath, "config", "", "config file (default <home>/config.yaml)")
	root.PersistentFlags().StringVar(&g.store, "store", "", "event store: a PostgreSQL URL (postgres://host/db) or a KurrentDB URL (esdb://host:2113?tls=false); default store.url, or the embedded store")
	root.AddCommand(
		newServeCommand(g),
		newEventsCommand(g),
		newSessionsCommand(g),
		newSearchCommand(g),
		newProjectionsCommand(g),
		newCheckCommand(g),
		newBackupCommand(g),
		newRestoreCommand(g),
		newConfigCommand(g),
		newImportCommand(g),
		newExportCommand(g),
		newForgetCommand(g),
	)
	return root
}
