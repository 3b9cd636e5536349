package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"hermes/api"
	"hermes/domain"
	"hermes/events"
	"hermes/node"
)

type tailOptions struct {
	follow      bool
	asJSON      bool
	transcripts bool
	fromVersion uint64
	until       string
}

func newEventsCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "Read the event log"}
	var o tailOptions
	tail := &cobra.Command{
		Use:   "tail <session-key>",
		Short: "Show a lane's events and what each changed (why did my session reset?)",
		Long: `Prints the lane's events one per line: time, version, type, the fields that
matter, and what changed in the session entry. Works whether or not
hermes serve is running (the log is opened read-only).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTail(cmd.Context(), g, args[0], o, cmd.OutOrStdout())
		},
	}
	tail.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep streaming new events")
	tail.Flags().BoolVar(&o.asJSON, "json", false, "print envelopes as JSON lines")
	tail.Flags().BoolVar(&o.transcripts, "transcripts", false, "also show the transcript streams of the lane's sessions")
	tail.Flags().Uint64Var(&o.fromVersion, "from-version", 1, "first lane version to show")
	tail.Flags().StringVar(&o.until, "until", "", "stop at this lane version or RFC 3339 time")
	cmd.AddCommand(tail)
	return cmd
}

func runTail(ctx context.Context, g *globalFlags, key string, o tailOptions, out io.Writer) error {
	h, err := resolveHome(g)
	if err != nil {
		return err
	}
	spec, err := resolveStore(g, h)
	if err != nil {
		return err
	}
	untilVersion, untilTime, err := parseUntil(o.until)
	if err != nil {
		return usageError(err)
	}
	if o.follow && o.until != "" {
		return usageError(errors.New("--follow and --until cannot be combined"))
	}
	store, err := node.OpenStoreReadOnly(ctx, spec, h)
	if err != nil {
		return err
	}
	defer store.Close()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	p := &tailPrinter{out: out, asJSON: o.asJSON, color: useColor(out), key: key, sessions: map[string]bool{}, ends: map[string]*domain.RunEnds{}}
	lane := events.LaneStream(key)
	var after uint64
	found := false
	for {
		page, err := store.ReadAll(ctx, after, 4096)
		if err != nil {
			return err
		}
		for _, env := range page {
			after = env.Position
			if env.Stream == lane {
				found = true
				if untilVersion > 0 && env.Version > untilVersion || !untilTime.IsZero() && env.Event.OccurredAt().After(untilTime) {
					return nil
				}
				if err := p.lane(env, env.Version >= o.fromVersion); err != nil {
					return err
				}
			} else if countsRestarts(env.Stream) {
				if !untilTime.IsZero() && env.Event.OccurredAt().After(untilTime) {
					return nil
				}
				if err := p.gateway(env); err != nil {
					return err
				}
			} else if o.transcripts && p.ownsTranscript(env.Stream) {
				if err := p.transcript(env); err != nil {
					return err
				}
			}
		}
		if len(page) < 4096 {
			break
		}
	}
	if !found && !o.follow {
		return fmt.Errorf("no events for session key %q (keys look like agent:main:telegram:dm:12345)", key)
	}
	if !o.follow {
		return nil
	}
	sub, err := store.Subscribe(ctx, after)
	if err != nil {
		return err
	}
	defer sub.Close()
	for env := range sub.Events() {
		if env.Stream == lane {
			if err := p.lane(env, env.Version >= o.fromVersion); err != nil {
				return err
			}
		} else if countsRestarts(env.Stream) {
			if err := p.gateway(env); err != nil {
				return err
			}
		} else if o.transcripts && p.ownsTranscript(env.Stream) {
			if err := p.transcript(env); err != nil {
				return err
			}
		}
	}
	if err := sub.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func parseUntil(s string) (uint64, time.Time, error) {
	if s == "" {
		return 0, time.Time{}, nil
	}
	if v, err := strconv.ParseUint(s, 10, 64); err == nil {
		return v, time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("--until %q is neither a version nor an RFC 3339 time", s)
	}
	return 0, t, nil
}

func useColor(out io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := out.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// tailPrinter folds the lane as it prints, so each line can say what the
// event changed.
type tailPrinter struct {
	out      io.Writer
	asJSON   bool
	color    bool
	key      string
	state    domain.Lane
	sessions map[string]bool
	// shown: the last lane event was printed (--from-version).
	shown bool
	// ends (per gateway stream: one per node) and restarts follow the
	// lane's stuck-loop count, so the stops that counted toward a
	// suspension are printed with the lane; countedBy is the gateway stream
	// of the node that recorded the count (only that node's stops drop it).
	ends      map[string]*domain.RunEnds
	restarts  int
	countedBy string
}

func (p *tailPrinter) ownsTranscript(stream string) bool {
	id, ok := strings.CutPrefix(stream, events.TranscriptPrefix)
	return ok && p.sessions[id]
}

func (p *tailPrinter) lane(env events.Envelope, show bool) error {
	before := p.state
	p.state = domain.Evolve(p.state, env.Event)
	p.shown = show
	if domain.ClearsRestartCount(env.Event) {
		p.restarts, p.countedBy = 0, ""
	}
	if e, ok := env.Event.(events.LaneImported); ok && e.RestartFailureCount > 0 {
		// Hermes' count carries over, recorded by the importing node (as
		// the sessions projection keeps it).
		p.restarts, p.countedBy = e.RestartFailureCount, events.GatewayStreamOf(env.Metadata.Node)
	}
	if p.state.SessionID != "" {
		p.sessions[p.state.SessionID] = true
	}
	if !show {
		return nil
	}
	if p.asJSON {
		return p.json(env)
	}
	changes := entryChanges(before, p.state)
	_, err := fmt.Fprintf(p.out, "%s  v%-4d %s  %s%s\n",
		env.Event.OccurredAt().UTC().Format("2006-01-02T15:04:05.000000Z"), env.Version,
		p.paint(env.Type, typeColor(env.Event)), describe(env), changes)
	return err
}

// gateway prints a run's end that cut the lane or dropped its count: the
// stops that explain a stuck-loop suspension (domain.RunEnds).
func (p *tailPrinter) gateway(env events.Envelope) error {
	ends, ok := p.ends[env.Stream]
	if !ok {
		ends = &domain.RunEnds{}
		p.ends[env.Stream] = ends
	}
	cut, end := ends.Observe(env.Event)
	if !end {
		return nil
	}
	before := p.restarts
	wasCut := slices.Contains(cut, p.key)
	switch {
	case wasCut:
		p.restarts++
		p.countedBy = env.Stream
	case p.countedBy == env.Stream || p.countedBy == "":
		p.restarts, p.countedBy = 0, ""
	default:
		return nil // another node's stop: the count is not its to drop
	}
	if !p.shown || p.restarts == before {
		return nil
	}
	if p.asJSON {
		return p.json(env)
	}
	stop := "crash"
	switch e := env.Event.(type) {
	case events.DrainFinished:
		stop = "drain completed"
		if e.TimedOut {
			stop = "drain timed out"
		}
	case events.RunAdopted:
		stop = "crash, adopted by node " + e.By
	case events.GatewayRunStopped:
		stop = "gateway run " + e.RunID + " stopped"
	case events.GatewayRunLost:
		stop = "gateway run " + e.RunID + " lost (" + e.Cause + ")"
	}
	if node, ok := strings.CutPrefix(env.Stream, events.GatewayStream+"-"); ok {
		stop = "node " + node + " " + stop
	}
	what := "cut this lane's turn"
	if !wasCut {
		what = "did not cut this lane"
	}
	_, err := fmt.Fprintf(p.out, "%s  %-5s %s  %s: %s  {interrupted_restarts: %d → %d}\n",
		env.Event.OccurredAt().UTC().Format("2006-01-02T15:04:05.000000Z"), "gw",
		p.paint(env.Type, "1;33"), stop, what, before, p.restarts)
	return err
}

// countsRestarts reports whether stream holds run ends that count toward
// the stuck-loop escalation: a hermes node's gateway stream, or a gateway
// process's run stream.
func countsRestarts(stream string) bool {
	_, run := events.GatewayOfRunStream(stream)
	return run || events.IsGatewayStream(stream)
}

func (p *tailPrinter) transcript(env events.Envelope) error {
	if p.asJSON {
		return p.json(env)
	}
	_, err := fmt.Fprintf(p.out, "%s  %s  %s  %s\n",
		env.Event.OccurredAt().UTC().Format("2006-01-02T15:04:05.000000Z"),
		strings.TrimPrefix(env.Stream, events.TranscriptPrefix), p.paint(env.Type, "2"), describe(env))
	return err
}

func (p *tailPrinter) json(env events.Envelope) error {
	data, err := json.Marshal(api.NewEnvelope(env))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.out, "%s\n", data)
	return err
}

func (p *tailPrinter) paint(s, code string) string {
	if !p.color {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func typeColor(e events.Event) string {
	switch e.(type) {
	case events.SessionAutoReset, events.Suspended, events.EntryPruned:
		return "1;31"
	case events.SessionCreated, events.SessionReset, events.SessionSwitched:
		return "1;32"
	case events.ResumeMarked, events.ResumeCleared:
		return "1;33"
	default:
		return "36"
	}
}

// describe is domain.Summary, marked [erased] when an erasure rewrote the
// event (its content is gone; what is shown is what is left).
func describe(env events.Envelope) string {
	s := domain.Summary(env.Event)
	if env.Metadata.Redacted != "" {
		s += " [erased]"
	}
	return s
}

// entryChanges lists the entry fields an event changed, "  {a: x → y}"
// (api.EntryChanges; the long values are named only).
func entryChanges(before, after domain.Lane) string {
	changes := api.EntryChanges(before, after)
	if len(changes) == 0 {
		return ""
	}
	parts := make([]string, 0, len(changes))
	for _, c := range changes {
		if slices.Contains([]string{"origin", "created_at", "turn_started_at"}, c.Field) {
			parts = append(parts, c.Field)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %s → %s", c.Field, showJSON(c.Before), showJSON(c.After)))
	}
	return "  {" + strings.Join(parts, ", ") + "}"
}

// showJSON prints a JSON value: strings bare ("" when empty), null, numbers
// and booleans as they are.
func showJSON(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return show(v)
}

func show(v any) string {
	if v == nil {
		return "null"
	}
	if s, ok := v.(string); ok {
		if s == "" {
			return `""`
		}
		return s
	}
	return fmt.Sprint(v)
}
