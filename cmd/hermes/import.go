package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"hermes/adapters/config"
	"hermes/adapters/eventstore/sqlite"
	"hermes/adapters/hermeshome"
	"hermes/commands"
	"hermes/events"
	"hermes/node"
)

type importOptions struct {
	dryRun    bool
	showNotes int
	jsonl     string
}

func newImportCommand(g *globalFlags) *cobra.Command {
	var o importOptions
	cmd := &cobra.Command{
		Use:   "import <hermes-home> | --jsonl FILE",
		Short: "Move a Python Hermes home (sessions.json, state.db) or a JSONL session export into the event log",
		Long: `Reads a Python Hermes home — sessions/sessions.json, state.db (schema v11 or
later), .restart_failure_counts and .clean_shutdown — and appends one lane
history per routing entry and one transcript history per state.db session,
with their original ids and times, into the configured home's event log.

The source is only read. A home that a running Hermes gateway holds is
refused. Event ids derive from the source, so a second run appends nothing
and a run killed half way is completed by the next one. When the source is
the hermes home itself, the Python state.db, sessions.json and
.restart_failure_counts are moved aside (renamed *.hermes-python-<time>)
once everything is in the log; 'hermes serve' then builds its own in their
place.

With --jsonl FILE it reads a JSONL session export instead (Hermes' 'hermes
sessions export FILE', or 'hermes export --jsonl'): one session with its
messages per line, imported as transcripts with their ids and times; a
JSONL file has no routing, so no lanes. The same promises hold: the file is
only read, a second run appends nothing, a killed run is completed.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := orBackground(cmd.Context())
			switch {
			case o.jsonl != "" && len(args) == 0:
				return runImportJSONL(ctx, g, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
			case o.jsonl == "" && len(args) == 1:
				return runImport(ctx, g, args[0], o, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return usageError(fmt.Errorf("give a Hermes home or --jsonl FILE (one of them)"))
		},
	}
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "read and report, append nothing")
	cmd.Flags().IntVar(&o.showNotes, "notes", 50, "how many notes (clamped, skipped, kept values) to list; -1 for all")
	cmd.Flags().StringVar(&o.jsonl, "jsonl", "", "import a JSONL session export (one session with its messages per line) instead of a home")
	return cmd
}

// importSummary counts what an import did.
type importSummary struct {
	lanes, sessions                     map[commands.ImportOutcome]int
	lanesSkipped, sessionsSkipped       int
	messagesAppended, messagesInSource  int64
	messagesOversized                   int
	routingByHermes, stateDBByHermes    bool
	restartCounts                       int
	cleanShutdown, hasStateDB, sameHome bool
	schemaVersion                       int
	routingRows, routingFile            int
	interrupted, hygieneStreaks         int
	hermesPolicy                        hermeshome.ResetPolicy
	ourPolicy                           config.ResetPolicy
	ourOverrides                        int
}

func runImport(ctx context.Context, g *globalFlags, src string, o importOptions, stdout, stderr io.Writer) error {
	cfg, h, err := loadConfig(g, nil)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return usageError(fmt.Errorf("source %s: %w", src, err))
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return usageError(fmt.Errorf("source %s is not a directory", abs))
	}
	source := hermeshome.Home{Dir: abs}
	sum := importSummary{lanes: map[commands.ImportOutcome]int{}, sessions: map[commands.ImportOutcome]int{}}
	sum.sameHome = sameDir(abs, h.Dir)
	rep := &hermeshome.Report{}

	if err := source.CheckFiles(); err != nil {
		return fmt.Errorf("import %s: %w", abs, err)
	}
	if err := source.CheckNotRunning(rep); err != nil {
		return fmt.Errorf("import %s: %w", abs, err)
	}
	loc := cfg.Location()
	routing, err := hermeshome.ReadRouting(source.SessionsJSON(), loc, rep)
	if err != nil {
		return fmt.Errorf("import %s: %w", abs, err)
	}
	sum.routingByHermes = routing.WrittenByHermes
	var counts map[string]int
	if !routing.WrittenByHermes {
		// Beside hermes' own sessions.json the counts file is hermes' too.
		counts = source.ReadRestartCounts(rep)
	}
	sum.cleanShutdown = source.HasCleanShutdown()

	var db *hermeshome.StateDB
	var sessionsRead []hermeshome.Session
	if _, err := os.Stat(source.StateDB()); err == nil {
		db, err = hermeshome.OpenStateDB(ctx, source.StateDB(), rep)
		switch {
		case errors.Is(err, hermeshome.ErrHermesReadModel):
			sum.stateDBByHermes = true
			db = nil
		case err != nil:
			return fmt.Errorf("import %s: %w", abs, err)
		default:
			defer db.Close()
			sum.hasStateDB = true
			sum.schemaVersion = db.Version
			sessionsRead, err = db.Sessions(ctx, rep)
			if err != nil {
				return fmt.Errorf("import %s: %w", abs, err)
			}
		}
	} else {
		rep.Add(hermeshome.Info, "state.db", "not found: no transcripts to import")
	}
	var leases []hermeshome.TurnLease
	var streaks map[string]int
	sum.routingFile = len(routing.Lanes)
	if db != nil {
		// Schema v25+: the routing index lives in state.db; sessions.json
		// (when the gateway still writes it) only fills keys it lacks.
		rows, err := db.GatewayRouting(ctx, filepath.Join(abs, "sessions"), rep)
		if err != nil {
			return fmt.Errorf("import %s: %w", abs, err)
		}
		if len(rows) > 0 {
			sum.routingRows = len(rows)
			routing = hermeshome.MergeRouting(hermeshome.ReadRoutingRows(rows, loc, rep), routing, rep)
		}
		if leases, err = db.TurnLeases(ctx); err != nil {
			return fmt.Errorf("import %s: %w", abs, err)
		}
		if streaks, err = db.HygieneStreaks(ctx, rep); err != nil {
			return fmt.Errorf("import %s: %w", abs, err)
		}
	}
	sum.hermesPolicy = source.ReadResetPolicy(sum.schemaVersion, rep)
	sum.ourPolicy = cfg.SessionReset
	sum.ourOverrides = len(cfg.Platforms) + len(cfg.ResetByType)
	msgsBySession := map[string]int64{}
	for _, s := range sessionsRead {
		msgsBySession[s.Event.SessionID] = s.Messages
		sum.messagesInSource += s.Messages
	}
	lanes := routing.Lanes
	for i := range lanes {
		l := &lanes[i]
		l.HadActivity = l.TotalTokens > 0 || l.InputTokens+l.OutputTokens > 0 || msgsBySession[l.SessionID] > 0
		l.RestartFailureCount = counts[l.SessionKey]
		sum.restartCounts += min(l.RestartFailureCount, 1)
	}
	for key := range counts {
		if !hasLane(lanes, key) {
			rep.Add(hermeshome.Skipped, ".restart_failure_counts "+key, "no routing entry for this key: count not imported")
		}
	}
	sum.interrupted = hermeshome.MarkInterruptedTurns(lanes, routing.ActiveTurns, leases, sessionsRead, sum.cleanShutdown, rep)
	sum.hygieneStreaks = hermeshome.CarryHygieneStreaks(lanes, streaks, rep)

	if o.dryRun {
		for range lanes {
			sum.lanes[commands.Imported]++
		}
		for range sessionsRead {
			sum.sessions[commands.Imported]++
		}
		sum.messagesAppended = sum.messagesInSource
		printImportSummary(stdout, sum, rep, o, true)
		return nil
	}

	// The source is read and checked before the target is touched: a
	// refused source leaves no trace there.
	if err := h.Ensure(); err != nil {
		return err
	}
	// The lock keeps hermes serve (and, on the same home, a Hermes
	// gateway, which takes the same flock) off the home meanwhile.
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
	handler := commands.NewHandler(store, node.WriteSideConfig(cfg))
	bar := importProgress(stderr, sum.messagesInSource+int64(len(lanes)))
	for _, s := range sessionsRead {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := handler.ImportTranscript(ctx, commands.ImportTranscript{
			Session:       s.Event,
			Messages:      db.Messages(ctx, s.Event.SessionID, rep),
			MaxEventBytes: sqlite.MaxEventSize - 64<<10,
			Progress:      func(n int) { bar(int64(n)) },
		})
		if err != nil {
			return err
		}
		sum.sessions[res.Outcome]++
		sum.messagesAppended += int64(res.Appended)
		for _, id := range res.Oversized {
			sum.messagesOversized++
			rep.Add(hermeshome.Skipped, fmt.Sprintf("state.db message %d", id), "larger than one event can hold: not imported")
		}
		switch res.Outcome {
		case commands.ExistsNatively:
			rep.Add(hermeshome.Info, "state.db session "+s.Event.SessionID, "hermes already has a transcript with this id: left as it is")
		case commands.Diverged:
			rep.Add(hermeshome.Info, "state.db session "+s.Event.SessionID, "partly imported before, and changed in hermes since: not completed")
		}
	}
	for _, l := range lanes {
		out, _, err := handler.ImportLane(ctx, commands.ImportLane{Lane: l})
		if err != nil {
			rep.Add(hermeshome.Skipped, "sessions.json "+l.SessionKey, "%v", err)
			bar(1)
			continue
		}
		sum.lanes[out]++
		if out == commands.ExistsNatively {
			rep.Add(hermeshome.Info, "sessions.json "+l.SessionKey, "hermes already has this lane: left as it is")
		}
		bar(1)
	}
	bar(-1)
	if db != nil && db.Changed() {
		return fmt.Errorf("import %s: state.db changed while it was read (is a Hermes CLI running?): what was read is in the log; run the import again when it is quiet", abs)
	}
	sum.lanesSkipped = rep.CountWhere(hermeshome.Skipped, "sessions.json ") + rep.CountWhere(hermeshome.Skipped, "gateway_routing ")
	sum.sessionsSkipped = rep.CountWhere(hermeshome.Skipped, "state.db session ")

	var aside []string
	if sum.sameHome && sum.hasStateDB {
		aside = append(aside, source.StateDB())
	}
	if sum.sameHome && !sum.routingByHermes {
		aside = append(aside, source.SessionsJSON(), source.RestartCounts())
	}
	if len(aside) > 0 {
		moved, err := moveAside(h.Dir, aside)
		if err != nil {
			return fmt.Errorf("import committed, but moving the Python files aside failed (move state.db away before starting hermes serve): %w", err)
		}
		for _, m := range moved {
			rep.Add(hermeshome.Info, "moved aside", "%s", m)
		}
	}
	printImportSummary(stdout, sum, rep, o, false)
	return nil
}

// printResetPolicies says which reset policy the Hermes home applied and
// which hermes will apply, and warns when they differ: an imported lane
// then resets (or lives on) where it did not under Hermes.
func printResetPolicies(w io.Writer, s importSummary) {
	h := s.hermesPolicy
	ours := hermeshome.ResetPolicy{Mode: s.ourPolicy.Mode, AtHour: s.ourPolicy.AtHour, IdleMinutes: s.ourPolicy.IdleMinutes}
	fmt.Fprintf(w, "reset policy: Hermes applied %s (%s); hermes will apply %s\n", h, h.Source, ours)
	if len(h.Overrides) > 0 {
		fmt.Fprintf(w, "  Hermes' config.yaml also sets %s: compare them with hermes' own (hermes config keys)\n", strings.Join(h.Overrides, ", "))
	}
	if s.ourOverrides > 0 {
		fmt.Fprintf(w, "  hermes' configuration also has %d per-platform or per-chat-type policies\n", s.ourOverrides)
	}
	if !samePolicy(h, ours) {
		fmt.Fprintf(w, "warning: the reset policies differ: set session_reset in hermes' config.yaml to keep Hermes' behaviour (session_reset.mode: %s)\n", h.Mode)
	}
}

func samePolicy(a, b hermeshome.ResetPolicy) bool {
	if a.Mode != b.Mode {
		return false
	}
	switch a.Mode {
	case "idle":
		return a.IdleMinutes == b.IdleMinutes
	case "daily":
		return a.AtHour == b.AtHour
	case "both":
		return a.IdleMinutes == b.IdleMinutes && a.AtHour == b.AtHour
	}
	return true
}

func hasLane(lanes []events.LaneImported, key string) bool {
	for _, l := range lanes {
		if l.SessionKey == key {
			return true
		}
	}
	return false
}

// sameDir reports whether a and b are the same directory.
func sameDir(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// moveAside renames the Python Hermes files of a home that hermes now
// serves to <name>.hermes-python-<time> (state.db with its -wal and -shm,
// which SQLite finds by name, so the moved database stays whole). Nothing
// is deleted. It returns what was moved where.
func moveAside(home string, paths []string) ([]string, error) {
	stamp := time.Now().Format("20060102-150405")
	var moved []string
	for _, p := range paths {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if suffix != "" && filepath.Base(p) != "state.db" {
				continue
			}
			from := p + suffix
			if _, err := os.Stat(from); err != nil {
				continue
			}
			to := p + ".hermes-python-" + stamp + suffix
			if err := os.Rename(from, to); err != nil {
				return moved, fmt.Errorf("move %s aside: %w", from, err)
			}
			rel, _ := filepath.Rel(home, to)
			moved = append(moved, rel)
		}
	}
	if d, err := os.Open(home); err == nil {
		d.Sync()
		d.Close()
	}
	return moved, nil
}

// importProgress returns a function adding n to the progress (n < 0
// finishes it): a bar on a terminal, nothing otherwise.
func importProgress(w io.Writer, total int64) func(n int64) {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f) || total == 0 {
		return func(int64) {}
	}
	bar := progressbar.NewOptions64(total, progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("import"), progressbar.OptionShowCount(),
		progressbar.OptionShowIts(), progressbar.OptionSetItsString("msg"),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	return func(n int64) {
		if n < 0 {
			bar.Finish()
			return
		}
		bar.Add64(n)
	}
}

func printImportSummary(w io.Writer, s importSummary, rep *hermeshome.Report, o importOptions, dry bool) {
	verb := "imported"
	if dry {
		verb = "would import"
		fmt.Fprintln(w, "dry run: nothing was appended")
	}
	if s.sameHome {
		fmt.Fprintln(w, "source is this hermes home")
	}
	if s.routingByHermes {
		fmt.Fprintln(w, "sessions.json is hermes' own export (the Python one was moved aside by an earlier import): no lanes read")
	}
	if s.stateDBByHermes {
		fmt.Fprintln(w, "state.db is hermes' own read model (the Python one was moved aside by an earlier import): no transcripts read")
	}
	if s.hasStateDB {
		fmt.Fprintf(w, "state.db schema version %d\n", s.schemaVersion)
	}
	clean := "absent (the last Hermes run did not stop cleanly; recorded here, nothing is replayed)"
	if s.cleanShutdown {
		clean = "present (the last Hermes run stopped cleanly)"
	}
	fmt.Fprintf(w, ".clean_shutdown: %s\n", clean)
	fmt.Fprintf(w, "lanes:    %d %s, %d already imported, %d left (exist in hermes), %d skipped\n",
		s.lanes[commands.Imported], verb, s.lanes[commands.AlreadyImported], s.lanes[commands.ExistsNatively], s.lanesSkipped)
	fmt.Fprintf(w, "sessions: %d %s, %d already imported, %d left (exist in hermes), %d skipped\n",
		s.sessions[commands.Imported], verb, s.sessions[commands.AlreadyImported],
		s.sessions[commands.ExistsNatively]+s.sessions[commands.Diverged], s.sessionsSkipped)
	fmt.Fprintf(w, "messages: %d %s of %d in state.db, %d too large\n", s.messagesAppended, verb, s.messagesInSource, s.messagesOversized)
	fmt.Fprintf(w, "restart failure counts: %d lanes\n", s.restartCounts)
	if s.routingRows > 0 {
		fmt.Fprintf(w, "routing: %d entries in state.db gateway_routing, %d in sessions.json (gateway_routing wins for a key in both, as in Hermes)\n", s.routingRows, s.routingFile)
	}
	if s.interrupted > 0 {
		fmt.Fprintf(w, "interrupted turns: %d lanes resume pending (restart_interrupted)\n", s.interrupted)
	}
	if s.hygieneStreaks > 0 {
		fmt.Fprintf(w, "hygiene failure streaks: %d lanes (kept in the lane's extra)\n", s.hygieneStreaks)
	}
	printResetPolicies(w, s)
	if !dry && s.lanes[commands.Imported] == 0 && s.sessions[commands.Imported] == 0 {
		fmt.Fprintln(w, "nothing new to import: the log already holds everything this source has")
	}
	printNotes(w, rep, o)
}

// printNotes lists the report's notes, by kind first.
func printNotes(w io.Writer, rep *hermeshome.Report, o importOptions) {
	notes := rep.Notes()
	kinds := map[string]int{}
	for _, n := range notes {
		kinds[n.Kind]++
	}
	var names []string
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(notes) > 0 {
		fmt.Fprint(w, "notes:")
		for _, k := range names {
			fmt.Fprintf(w, " %d %s", kinds[k], k)
		}
		fmt.Fprintln(w)
	}
	for i, n := range notes {
		if o.showNotes >= 0 && i >= o.showNotes {
			fmt.Fprintf(w, "  … and %d more (--notes -1 lists them all)\n", len(notes)-i)
			break
		}
		fmt.Fprintf(w, "  %s\n", n)
	}
}
