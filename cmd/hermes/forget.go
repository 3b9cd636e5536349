package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"hermes/commands"
	"hermes/node"
)

type forgetOptions struct {
	platform, userID, userIDAlt, reason, requestedBy string
}

func newForgetCommand(g *globalFlags) *cobra.Command {
	var o forgetOptions
	cmd := &cobra.Command{
		Use:   "forget --platform P --user-id U",
		Short: "Erase a person: their lanes' transcripts, and their names and ids in origins and queued items",
		Long: `Forgets a person on a home no server is running on (it takes the gateway
lock; with a server running, use POST /v1/erasure, which does the same). Every
transcript of every lane keyed on the person is deleted and erased from the log,
and the person's names and ids are erased from the origins and queued items of
those lanes. It prints what was erased once the content is unrecoverable from
every file under the home (docs/ERASURE.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.platform == "" || (o.userID == "" && o.userIDAlt == "") {
				return usageError(errors.New("--platform and --user-id (or --user-id-alt) are required"))
			}
			cfg, h, err := loadConfig(g, nil)
			if err != nil {
				return err
			}
			return runForget(orBackground(cmd.Context()), daemonSettings{cfg: cfg, home: h, logLevel: "warn"}, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&o.platform, "platform", "", "the person's platform (telegram, discord, …)")
	cmd.Flags().StringVar(&o.userID, "user-id", "", "the person's user id on the platform")
	cmd.Flags().StringVar(&o.userIDAlt, "user-id-alt", "", "the person's alternative id (WhatsApp lid, …)")
	cmd.Flags().StringVar(&o.reason, "reason", "", "why (recorded with the erasure; default person)")
	cmd.Flags().StringVar(&o.requestedBy, "requested-by", "", "on whose request (recorded with the erasure)")
	return cmd
}

func runForget(ctx context.Context, s daemonSettings, o forgetOptions, out, stderr io.Writer) error {
	log, err := newLogger(stderr, s.logLevel)
	if err != nil {
		return err
	}
	rep, err := node.Forget(ctx, node.Config{Settings: s.cfg, Home: s.home, Log: log},
		commands.Forget{Platform: o.platform, UserID: o.userID, UserIDAlt: o.userIDAlt, Reason: o.reason, RequestedBy: o.requestedBy})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"erasure_id": rep.ErasureID, "erased": rep})
}
