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
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"hermes/api"
	"hermes/domain"
	"hermes/events"
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
	store, err := openStoreReadOnly(ctx, spec, h)
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
			} else if events.IsGatewayStream(env.Stream) {
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
		} else if events.IsGatewayStream(env.Stream) {
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
		p.paint(env.Type, typeColor(env.Event)), summarize(env.Event), changes)
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

func (p *tailPrinter) transcript(env events.Envelope) error {
	if p.asJSON {
		return p.json(env)
	}
	_, err := fmt.Fprintf(p.out, "%s  %s  %s  %s\n",
		env.Event.OccurredAt().UTC().Format("2006-01-02T15:04:05.000000Z"),
		strings.TrimPrefix(env.Stream, events.TranscriptPrefix), p.paint(env.Type, "2"), summarize(env.Event))
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

// summarize says what an event is about, in a few words.
func summarize(e events.Event) string {
	switch e := e.(type) {
	case events.SessionCreated:
		s := "new session " + e.SessionID
		if e.ForceNew {
			s += " (force_new, replacing " + e.PreviousSessionID + ")"
		} else if e.PreviousSessionID != "" {
			s += " (after the entry was pruned; previous " + e.PreviousSessionID + ")"
		}
		return s
	case events.SessionAutoReset:
		return fmt.Sprintf("auto-reset: %s — %s replaced %s (had activity: %t)", e.Reason, e.SessionID, e.PreviousSessionID, e.HadActivity)
	case events.SessionReset:
		return fmt.Sprintf("/new: %s replaced %s", e.SessionID, e.PreviousSessionID)
	case events.SessionSwitched:
		return fmt.Sprintf("/resume: now on %s (was %s)", e.SessionID, e.PreviousSessionID)
	case events.Suspended:
		return "suspended: " + e.Reason
	case events.ResumeMarked:
		return "resume pending: " + e.Reason
	case events.ResumeCleared:
		return "resume cleared: " + e.Cause
	case events.Touched:
		if e.LastPromptTokens != nil {
			return fmt.Sprintf("touched (last prompt %d tokens)", *e.LastPromptTokens)
		}
		return "touched"
	case events.TurnStarted:
		return "turn started " + e.TurnID
	case events.TurnCompleted:
		s := fmt.Sprintf("turn completed %s: +%d in, +%d out, $%.4f", e.TurnID, e.InputTokens, e.OutputTokens, e.EstimatedCostUSD)
		if e.Failed {
			s += " (failed)"
		}
		return s
	case events.ActiveProcessesChanged:
		return fmt.Sprintf("%d background processes", e.Count)
	case events.ActivityRecorded:
		return "first message of " + e.SessionID
	case events.ExpiryFinalized:
		if e.Forced {
			return "expiry finalized (forced after failed hooks)"
		}
		return "expiry finalized"
	case events.EntryPruned:
		return "entry pruned for age"
	case events.TurnInterrupted:
		return fmt.Sprintf("turn %s interrupted: %s", e.TurnID, e.Reason)
	case events.NoticeDelivered:
		return "reset notice delivered (" + e.Reason + ")"
	case events.QueueItemAdded:
		return fmt.Sprintf("queued %s %s → %s (%d bytes)", e.Kind, e.ItemID, e.Placement, len(e.Text))
	case events.QueueItemTaken:
		s := fmt.Sprintf("took %s %s from the %s", e.Kind, e.ItemID, e.From)
		if e.StagedItemID != "" {
			s += "; staged " + e.StagedItemID
		}
		return s
	case events.QueueCleared:
		return fmt.Sprintf("queue cleared: %d items (%s)", len(e.ItemIDs), e.Reason)
	case events.QueueItemsExpired:
		return fmt.Sprintf("%d queued items expired", len(e.ItemIDs))
	case events.MessageAppended:
		return fmt.Sprintf("%s message (%d bytes)", e.Message.Role, len(e.Message.Content))
	case events.TranscriptRewritten:
		return fmt.Sprintf("transcript rewritten (%d messages)", len(e.Messages))
	case events.TurnsRewound:
		return fmt.Sprintf("rewound %d turns to message %d", e.TurnsUndone, e.TargetMessageID)
	case events.TitleSet:
		return fmt.Sprintf("title %q", e.Title)
	case events.TranscriptEnded:
		return "ended: " + e.Reason
	case events.TranscriptDeleted:
		return "deleted: " + e.Reason
	case events.LaneImported:
		s := "imported from Hermes: session " + e.SessionID
		if e.Suspended {
			s += ", suspended"
		}
		if e.ResumePending {
			s += ", resume pending (" + e.ResumeReason + ")"
		}
		if e.RestartFailureCount > 0 {
			s += fmt.Sprintf(", %d interrupted restarts", e.RestartFailureCount)
		}
		return s
	case events.SessionImported:
		s := "imported from Hermes: session " + e.SessionID + " (" + e.Source
		if e.Title != nil {
			s += fmt.Sprintf(", title %q", *e.Title)
		}
		return s + ")"
	case events.MessagesImported:
		if len(e.Messages) == 0 {
			return "imported from Hermes: no messages"
		}
		return fmt.Sprintf("imported from Hermes: %d messages (ids %d–%d)", len(e.Messages), e.Messages[0].ID, e.Messages[len(e.Messages)-1].ID)
	default:
		return ""
	}
}

// entryChanges lists the entry fields an event changed, "  {a: x → y}".
func entryChanges(before, after domain.Lane) string {
	b, a := entryMap(api.NewEntry(before, 0)), entryMap(api.NewEntry(after, 0))
	var keys []string
	for k := range a {
		if k == "version" || k == "updated_at" && len(a) > 0 {
			continue
		}
		if fmt.Sprint(a[k]) != fmt.Sprint(b[k]) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if slices.Contains([]string{"origin", "created_at", "turn_started_at"}, k) {
			parts = append(parts, k)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %s → %s", k, show(b[k]), show(a[k])))
	}
	return "  {" + strings.Join(parts, ", ") + "}"
}

func entryMap(e api.Entry) map[string]any {
	data, _ := json.Marshal(e)
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	return m
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
