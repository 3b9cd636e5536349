package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/spf13/cobra"

	"hermes/adapters/config"
	"hermes/node"
)

type serveOptions struct {
	addr      string
	clock     string
	logLevel  string
	debugAddr string
}

// daemonSettings are what `hermes serve` was started with.
type daemonSettings struct {
	cfg         config.Config
	home        node.Home
	manualClock bool
	logLevel    string
	debugAddr   string
}

func newServeCommand(g *globalFlags) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API on the embedded event store",
		Long: `Opens (or creates) the event log under the home directory, catches the read
models up, runs crash recovery, and serves the HTTP API. SIGTERM or SIGINT
stop gracefully; SIGUSR1 or POST /v1/admin/restart restart (exit code 75).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			flags := map[string]string{}
			if cmd.Flags().Changed("addr") {
				flags["api.addr"] = o.addr
			}
			cfg, h, err := loadConfig(g, flags)
			if err != nil {
				return err
			}
			if o.clock != "system" && o.clock != "manual" {
				return usageError(fmt.Errorf("--clock %q is not system or manual", o.clock))
			}
			if o.debugAddr != "" && !loopbackAddr(o.debugAddr) {
				return usageError(fmt.Errorf("--debug-addr %q must be a loopback address", o.debugAddr))
			}
			return serve(orBackground(cmd.Context()), daemonSettings{cfg: cfg, home: h, manualClock: o.clock == "manual", logLevel: o.logLevel, debugAddr: o.debugAddr}, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&o.addr, "addr", "", "listen address host:port (default api.addr, 127.0.0.1:8642)")
	cmd.Flags().StringVar(&o.clock, "clock", "system", "system, or manual: a test clock moved with POST /v1/clock (loopback only)")
	cmd.Flags().StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&o.debugAddr, "debug-addr", "", "serve Go's pprof profiles on this loopback address (off by default)")
	return cmd
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError(fmt.Errorf("--log-level %q: %w", level, err))
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// serve runs a node on the home until it stops; a restart it was asked for
// is exit code 75.
func serve(ctx context.Context, s daemonSettings, stderr io.Writer) error {
	log, err := newLogger(stderr, s.logLevel)
	if err != nil {
		return err
	}
	if s.manualClock && !loopbackAddr(s.cfg.API.Addr) {
		return usageError(fmt.Errorf("--clock=manual is refused on the non-loopback address %s", s.cfg.API.Addr))
	}
	n, err := node.Open(ctx, node.Config{
		Settings:        s.cfg,
		Home:            s.home,
		Log:             log,
		ManualClock:     s.manualClock,
		DebugAddr:       s.debugAddr,
		Version:         version,
		CatchUpProgress: progressReporter(stderr, "catching up"),
		HandleSignals:   true,
		StopOverdue:     func() { os.Exit(exitFailure) },
	})
	if err != nil {
		return err
	}
	defer n.Close()
	err = n.Run(ctx)
	if errors.Is(err, node.ErrRestart) {
		return &exitError{code: exitRestart, err: err}
	}
	return err
}

func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
