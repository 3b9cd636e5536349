package main

import (
	"context"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"hermes/adapters/eventstore/sqlite"
	"hermes/adapters/hermeshome"
	"hermes/commands"
	"hermes/events"
	"hermes/node"
)

// runImportJSONL imports a JSONL session export into the log, one
// transcript per line.
func runImportJSONL(ctx context.Context, g *globalFlags, o importOptions, stdout, stderr io.Writer) error {
	cfg, h, err := loadConfig(g, nil)
	if err != nil {
		return err
	}
	f, err := openRegular(o.jsonl)
	if err != nil {
		return usageError(fmt.Errorf("import --jsonl: %w", err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("import --jsonl: %w", err)
	}
	rep := &hermeshome.Report{}
	sum := map[commands.ImportOutcome]int{}
	var sessions, messages, appended int64
	var oversized int

	var handler *commands.Handler
	if !o.dryRun {
		if err := h.Ensure(); err != nil {
			return err
		}
		lock, err := h.Lock()
		if err != nil {
			return fmt.Errorf("import needs hermes serve stopped: %w", err)
		}
		defer lock.Release()
		store, err := sqlite.Open(h.EventsDB())
		if err != nil {
			return err
		}
		defer store.Close()
		handler = commands.NewHandler(store, node.WriteSideConfig(cfg))
	}
	err = hermeshome.ReadJSONL(f, st.Size(), rep, func(s hermeshome.JSONLSession) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		sessions++
		messages += int64(len(s.Messages))
		if handler == nil {
			sum[commands.Imported]++
			appended += int64(len(s.Messages))
			return nil
		}
		res, err := handler.ImportTranscript(ctx, commands.ImportTranscript{
			Session:       s.Session,
			Messages:      messagesOf(s.Messages),
			MaxEventBytes: sqlite.MaxEventSize - 64<<10,
		})
		if err != nil {
			return err
		}
		sum[res.Outcome]++
		appended += int64(res.Appended)
		for _, id := range res.Oversized {
			oversized++
			rep.Add(hermeshome.Skipped, fmt.Sprintf("jsonl message %d", id), "larger than one event can hold: not imported")
		}
		switch res.Outcome {
		case commands.ExistsNatively:
			rep.Add(hermeshome.Info, "jsonl session "+s.Session.SessionID, "hermes already has a transcript with this id: left as it is")
		case commands.Diverged:
			rep.Add(hermeshome.Info, "jsonl session "+s.Session.SessionID, "partly imported before, and changed in hermes since: not completed")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("import %s: %w", o.jsonl, err)
	}
	verb := "imported"
	if o.dryRun {
		verb = "would import"
		fmt.Fprintln(stdout, "dry run: nothing was appended")
	}
	fmt.Fprintf(stdout, "sessions: %d %s, %d already imported, %d left (exist in hermes), %d skipped\n",
		sum[commands.Imported], verb, sum[commands.AlreadyImported], sum[commands.ExistsNatively]+sum[commands.Diverged],
		rep.CountWhere(hermeshome.Skipped, "jsonl line ")+rep.CountWhere(hermeshome.Skipped, "jsonl session "))
	fmt.Fprintf(stdout, "messages: %d %s of %d in the file, %d too large\n", appended, verb, messages, oversized)
	if !o.dryRun && sum[commands.Imported] == 0 {
		fmt.Fprintln(stdout, "nothing new to import: the log already holds everything this file has")
	}
	printNotes(stdout, rep, o)
	return nil
}

func messagesOf(msgs []events.ImportedMessage) iter.Seq2[events.ImportedMessage, error] {
	return func(yield func(events.ImportedMessage, error) bool) {
		for _, m := range msgs {
			if !yield(m, nil) {
				return
			}
		}
	}
}

// openRegular opens a regular file for reading, never blocking on a FIFO
// or reading a device.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, nil
}

func newExportCommand(g *globalFlags) *cobra.Command {
	var jsonl string
	cmd := &cobra.Command{
		Use:   "export --jsonl FILE",
		Short: "Write every transcript as Hermes' JSONL session export",
		Long: `Writes one line per session — its sessions row (with the columns of newer
Hermes schemas an imported session kept) and its active messages — in the
format of Hermes' 'hermes sessions export FILE', so the history can move to
Hermes, or back into hermes with 'hermes import --jsonl FILE'. FILE "-" is
standard output; a file is written whole (0600) or not at all.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if jsonl == "" {
				return usageError(fmt.Errorf("--jsonl FILE is required"))
			}
			return runExportJSONL(orBackground(cmd.Context()), g, jsonl, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&jsonl, "jsonl", "", `the file to write ("-" for standard output)`)
	return cmd
}

func runExportJSONL(ctx context.Context, g *globalFlags, path string, stdout io.Writer) error {
	reader, err := openFreshReader(ctx, g)
	if err != nil {
		return err
	}
	defer reader.Close()
	sessions, err := reader.ExportAll(ctx, "")
	if err != nil {
		return err
	}
	if path == "-" {
		return hermeshome.WriteJSONL(stdout, sessions)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := hermeshome.WriteJSONL(tmp, sessions); err != nil {
		tmp.Close()
		return fmt.Errorf("export: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("export: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	fmt.Fprintf(stdout, "exported %d sessions to %s\n", len(sessions), path)
	return nil
}
