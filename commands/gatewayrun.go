package commands

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"hermes/domain"
	"hermes/events"
)

// OpenTurnDirectory lists the lanes with a turn open, for the gateway-run
// commands that close the turns of a run that ended. A read model
// implements it; each lane is read again before anything is decided.
type OpenTurnDirectory interface {
	OpenTurnKeys(ctx context.Context) ([]string, error)
}

// RunDirectory is what a gateway run's start needs besides the open turns:
// whether a run id was already used by the gateway (an older run's id must
// never start again: a late retry of its announcement would end the
// running one). A read model implements it; the caller makes it current.
type RunDirectory interface {
	OpenTurnDirectory
	RunUsed(ctx context.Context, gateway, runID string) (bool, error)
}

// GatewayRunOutcome is what a gateway-run command left.
type GatewayRunOutcome struct {
	// Runs is the gateway's run stream after the command.
	Runs domain.GatewayRuns
	// Position of the last event the command appended, on the run stream
	// or on a lane (0: none): wait for it to read your write.
	Position uint64
	// Appended: the command appended the run's event (false for a repeat).
	Appended bool
	// Ended is the gateway's run this command ended (the previous run,
	// found dead by a new start; or the run stopped or lost), zero when
	// none.
	Ended domain.GatewayRun
	// Interrupted are the lanes whose turn the command closed.
	Interrupted []string
}

// gatewayRuns reads the state of a gateway's run stream from its last
// event (domain.GatewayRunsFrom) and the stream's version.
func (h *Handler) gatewayRuns(ctx context.Context, gateway string) (domain.GatewayRuns, uint64, error) {
	page, err := h.store.ReadStream(ctx, events.GatewayRunStream(gateway), 0, 1, events.Backwards)
	if isNotFound(err) || err == nil && len(page) == 0 {
		return domain.GatewayRuns{}, 0, nil
	}
	if err != nil {
		return domain.GatewayRuns{}, 0, fmt.Errorf("read runs of gateway %s: %w", gateway, err)
	}
	return domain.GatewayRunsFrom(page[0].Event), page[0].Version, nil
}

// GatewayRuns returns the state of a gateway's run stream.
func (h *Handler) GatewayRuns(ctx context.Context, gateway string) (domain.GatewayRuns, error) {
	if err := domain.CheckRunName("gateway", gateway); err != nil {
		return domain.GatewayRuns{}, err
	}
	g, _, err := h.gatewayRuns(ctx, gateway)
	return g, err
}

// appendRun appends decided to the gateway's run stream at version.
func (h *Handler) appendRun(ctx context.Context, gateway string, version uint64, command, commandID string, decided []events.Event) (events.AppendResult, error) {
	stream := events.GatewayRunStream(gateway)
	if commandID == "" {
		commandID = fmt.Sprintf("%s/%s/%d", command, gateway, version)
	}
	cmd := identify(commandID)
	res, err := h.store.Append(ctx, stream, events.ExactVersion(version), h.proposals(command, cmd, stream, decided))
	if err != nil {
		return events.AppendResult{}, fmt.Errorf("%s %s: %w", command, gateway, err)
	}
	return res, nil
}

// runTurns returns the open turns of the runs of gateway (all of them when
// runID is "", else that run's).
func (h *Handler) runTurns(ctx context.Context, dir OpenTurnDirectory, gateway, runID string) ([]OpenTurn, error) {
	keys, err := dir.OpenTurnKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("open turns: %w", err)
	}
	turns, err := h.OpenTurns(ctx, keys)
	if err != nil {
		return nil, err
	}
	var out []OpenTurn
	for _, t := range turns {
		g, r, ok := events.ParseGatewayRunTag(t.GatewayRun)
		if ok && g == gateway && (runID == "" || r == runID) {
			out = append(out, t)
		}
	}
	return out, nil
}

func turnKeys(turns []OpenTurn) []string {
	keys := make([]string, 0, len(turns))
	for _, t := range turns {
		keys = append(keys, t.Key)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// closeRunTurns closes each turn, which the end of its run cut, with
// reason: crash recovery's close (the turn and a resume mark), once per
// turn (its id and the lane's version).
// It returns the lanes it closed and the position of its last append.
func (h *Handler) closeRunTurns(ctx context.Context, turns []OpenTurn, reason string) ([]string, uint64, error) {
	var closed []string
	var last uint64
	var errs []error
	for _, t := range turns {
		res, err := h.InterruptTurn(ctx, InterruptTurn{Key: t.Key, TurnID: t.TurnID, Reason: reason,
			CommandID: "gateway_run_end/" + t.GatewayRun + "/" + t.TurnID})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		last = max(last, res.Position)
		if hasEvent[events.TurnInterrupted](res.Events) {
			closed = append(closed, t.Key)
		}
	}
	slices.Sort(closed)
	return closed, last, errors.Join(errs...)
}

// closeTurnsInto closes turns (closeRunTurns) for out, keeping its
// position the last of everything the command appended.
func (h *Handler) closeTurnsInto(ctx context.Context, out *GatewayRunOutcome, turns []OpenTurn, reason string) error {
	closed, last, err := h.closeRunTurns(ctx, turns, reason)
	out.Interrupted = append(out.Interrupted, closed...)
	slices.Sort(out.Interrupted)
	out.Position = max(out.Position, last)
	return err
}

// StartGatewayRun is a gateway process announcing a run.
type StartGatewayRun struct {
	Start     domain.RunStart
	CommandID string
}

// StartGatewayRun records the run's start. The gateway's last run, if it
// is still open, died without a word: it is recorded lost (cause
// restarted) and the turns it had open get crash recovery (closed,
// resume pending, restart_interrupted), counting toward the stuck-loop
// escalation. Announcing the running run again changes nothing.
func (h *Handler) StartGatewayRun(ctx context.Context, dir RunDirectory, c StartGatewayRun) (GatewayRunOutcome, error) {
	s := c.Start
	if err := domain.CheckRunName("gateway", s.Gateway); err != nil {
		return GatewayRunOutcome{}, err
	}
	if err := domain.CheckRunName("run_id", s.RunID); err != nil {
		return GatewayRunOutcome{}, err
	}
	for range maxAttempts {
		g, version, err := h.gatewayRuns(ctx, s.Gateway)
		if err != nil {
			return GatewayRunOutcome{}, err
		}
		if g.Last.RunID != s.RunID {
			used, err := dir.RunUsed(ctx, s.Gateway, s.RunID)
			if err != nil {
				return GatewayRunOutcome{}, fmt.Errorf("start run of gateway %s: %w", s.Gateway, err)
			}
			if used {
				return GatewayRunOutcome{Runs: g}, fmt.Errorf("%w: run %s of gateway %s ended before its last run", domain.ErrRunEnded, s.RunID, s.Gateway)
			}
		}
		var prevTurns []OpenTurn
		if g.Last.Running() && g.Last.RunID != s.RunID {
			if prevTurns, err = h.runTurns(ctx, dir, s.Gateway, g.Last.RunID); err != nil {
				return GatewayRunOutcome{}, err
			}
			s.PreviousOpenLanes = turnKeys(prevTurns)
		}
		decided, err := g.StartRun(s, h.now())
		if err != nil || len(decided) == 0 {
			return GatewayRunOutcome{Runs: g}, err
		}
		res, err := h.appendRun(ctx, s.Gateway, version, "start_gateway_run", c.CommandID, decided)
		if errors.Is(err, events.ErrWrongExpectedVersion) {
			continue
		}
		if err != nil {
			return GatewayRunOutcome{}, err
		}
		out := GatewayRunOutcome{Runs: g, Position: res.LastPosition(), Appended: !res.Duplicate}
		for _, e := range decided {
			out.Runs = out.Runs.Evolve(e)
			if lost, ok := e.(events.GatewayRunLost); ok {
				out.Ended = g.Evolve(lost).Last
			}
		}
		return out, h.closeTurnsInto(ctx, &out, prevTurns, events.ResumeRestartInterrupted)
	}
	return GatewayRunOutcome{}, fmt.Errorf("start run of gateway %s: %w", s.Gateway, ErrConflict)
}

// HeartbeatGatewayRun is a running gateway's proof of life.
type HeartbeatGatewayRun struct {
	Gateway, RunID string
}

// HeartbeatGatewayRun extends the run's lease (an event only when less
// than two thirds of it is left). A run that ended is refused with
// domain.ErrRunEnded: the process must announce a new run.
func (h *Handler) HeartbeatGatewayRun(ctx context.Context, c HeartbeatGatewayRun) (GatewayRunOutcome, error) {
	if err := domain.CheckRunName("gateway", c.Gateway); err != nil {
		return GatewayRunOutcome{}, err
	}
	for range maxAttempts {
		g, version, err := h.gatewayRuns(ctx, c.Gateway)
		if err != nil {
			return GatewayRunOutcome{}, err
		}
		decided, err := g.Heartbeat(c.RunID, h.now())
		if err != nil || len(decided) == 0 {
			return GatewayRunOutcome{Runs: g}, err
		}
		res, err := h.appendRun(ctx, c.Gateway, version, "heartbeat_gateway_run", "", decided)
		if errors.Is(err, events.ErrWrongExpectedVersion) {
			continue
		}
		if err != nil {
			return GatewayRunOutcome{}, err
		}
		return GatewayRunOutcome{Runs: g.Evolve(decided[0]), Position: res.LastPosition(), Appended: !res.Duplicate}, nil
	}
	return GatewayRunOutcome{}, fmt.Errorf("heartbeat of gateway %s: %w", c.Gateway, ErrConflict)
}

// StopGatewayRun is a gateway's announced stop, after its own drain.
type StopGatewayRun struct {
	Gateway, RunID string
	// Restart: the gateway stops to start again.
	Restart   bool
	CommandID string
}

// StopGatewayRun records the stop. The run's turns still open are cut:
// closed and marked to resume (restart_timeout or shutdown_timeout), each
// counting one interrupted restart; none cut, the gateway's counts drop.
func (h *Handler) StopGatewayRun(ctx context.Context, dir OpenTurnDirectory, c StopGatewayRun) (GatewayRunOutcome, error) {
	if err := domain.CheckRunName("gateway", c.Gateway); err != nil {
		return GatewayRunOutcome{}, err
	}
	reason := events.ResumeShutdownTimeout
	if c.Restart {
		reason = events.ResumeRestartTimeout
	}
	for range maxAttempts {
		g, version, err := h.gatewayRuns(ctx, c.Gateway)
		if err != nil {
			return GatewayRunOutcome{}, err
		}
		var turns []OpenTurn
		if g.Last.RunID == c.RunID && g.Last.Running() {
			if turns, err = h.runTurns(ctx, dir, c.Gateway, c.RunID); err != nil {
				return GatewayRunOutcome{}, err
			}
		}
		decided, err := g.StopRun(c.RunID, c.Restart, turnKeys(turns), h.now())
		if err != nil || len(decided) == 0 {
			return GatewayRunOutcome{Runs: g}, err
		}
		res, err := h.appendRun(ctx, c.Gateway, version, "stop_gateway_run", c.CommandID, decided)
		if errors.Is(err, events.ErrWrongExpectedVersion) {
			continue
		}
		if err != nil {
			return GatewayRunOutcome{}, err
		}
		after := g.Evolve(decided[0])
		out := GatewayRunOutcome{Runs: after, Position: res.LastPosition(), Appended: !res.Duplicate, Ended: after.Last}
		return out, h.closeTurnsInto(ctx, &out, turns, reason)
	}
	return GatewayRunOutcome{}, fmt.Errorf("stop run of gateway %s: %w", c.Gateway, ErrConflict)
}

// RecoverGatewayRuns is one round of the lease duty.
type RecoverGatewayRuns struct {
	// Gateways are the gateways whose last run the read model shows
	// running; the gateways of open turns are looked at too.
	Gateways []string
	// NotBefore is the grace of a hermes start: no run is lost before it
	// (hermes' start plus a lease: a gateway cannot beat while hermes is
	// down). Zero: no grace.
	NotBefore func(lease time.Duration) time.Time
}

// RecoverGatewayRuns finds the runs that died without a word: a running
// run whose lease expired by this handler's clock (and past the grace of
// a hermes start) is recorded lost (cause lease_expired), appended at the
// version read so it cannot land after a heartbeat it did not see; and
// the open turns of every run that is no longer its gateway's running one
// (this round's losses, and closes an earlier round could not finish) get
// crash recovery. It returns what it did per gateway that changed.
func (h *Handler) RecoverGatewayRuns(ctx context.Context, dir OpenTurnDirectory, c RecoverGatewayRuns) ([]GatewayRunOutcome, error) {
	keys, err := dir.OpenTurnKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("open turns: %w", err)
	}
	all, err := h.OpenTurns(ctx, keys)
	if err != nil {
		return nil, err
	}
	byGateway := map[string][]OpenTurn{}
	for _, t := range all {
		if g, _, ok := events.ParseGatewayRunTag(t.GatewayRun); ok {
			byGateway[g] = append(byGateway[g], t)
		}
	}
	for _, g := range c.Gateways {
		if _, ok := byGateway[g]; !ok {
			byGateway[g] = nil
		}
	}
	var out []GatewayRunOutcome
	var errs []error
	for _, gateway := range slices.Sorted(maps.Keys(byGateway)) {
		if domain.CheckRunName("gateway", gateway) != nil {
			continue
		}
		o, err := h.recoverGateway(ctx, gateway, byGateway[gateway], c.NotBefore)
		if err != nil {
			errs = append(errs, err)
		}
		if o.Appended || len(o.Interrupted) > 0 {
			out = append(out, o)
		}
	}
	return out, errors.Join(errs...)
}

func (h *Handler) recoverGateway(ctx context.Context, gateway string, turns []OpenTurn, notBefore func(time.Duration) time.Time) (GatewayRunOutcome, error) {
	g, version, err := h.gatewayRuns(ctx, gateway)
	if err != nil {
		return GatewayRunOutcome{}, err
	}
	out := GatewayRunOutcome{Runs: g}
	grace := time.Time{}
	if notBefore != nil {
		grace = notBefore(g.Last.Lease())
	}
	now := h.now()
	if g.Last.Expired(grace, now) {
		var cut []OpenTurn
		for _, t := range turns {
			if _, r, _ := events.ParseGatewayRunTag(t.GatewayRun); r == g.Last.RunID {
				cut = append(cut, t)
			}
		}
		decided := g.LoseExpired(g.Last.RunID, grace, turnKeys(cut), now)
		res, err := h.appendRun(ctx, gateway, version, "lose_gateway_run", "", decided)
		if errors.Is(err, events.ErrWrongExpectedVersion) {
			return out, nil // it beat, stopped or started again: look next round
		}
		if err != nil {
			return out, err
		}
		out.Runs = g.Evolve(decided[0])
		out.Ended, out.Position, out.Appended = out.Runs.Last, res.LastPosition(), !res.Duplicate
	}
	// Every turn of a run that is not the gateway's running one was cut by
	// that run's end.
	var cut []OpenTurn
	for _, t := range turns {
		if _, r, _ := events.ParseGatewayRunTag(t.GatewayRun); !(out.Runs.Last.Running() && r == out.Runs.Last.RunID) {
			cut = append(cut, t)
		}
	}
	// A turn of the last run, stopped, was cut by its drain's end; any
	// other by a crash.
	byReason := map[string][]OpenTurn{}
	for _, t := range cut {
		reason := events.ResumeRestartInterrupted
		if last := out.Runs.Last; last.State == domain.RunStopped {
			if _, r, _ := events.ParseGatewayRunTag(t.GatewayRun); r == last.RunID {
				reason = events.ResumeShutdownTimeout
				if last.Restart {
					reason = events.ResumeRestartTimeout
				}
			}
		}
		byReason[reason] = append(byReason[reason], t)
	}
	var errs []error
	for _, reason := range slices.Sorted(maps.Keys(byReason)) {
		errs = append(errs, h.closeTurnsInto(ctx, &out, byReason[reason], reason))
	}
	return out, errors.Join(errs...)
}

// RunningGatewayRun checks that run runID of gateway is running, for a turn
// it starts: domain.ErrRunEnded when it ended, domain.ErrRunNotFound when
// it is not the gateway's last run.
func (h *Handler) RunningGatewayRun(ctx context.Context, gateway, runID string) error {
	if err := domain.CheckRunName("gateway", gateway); err != nil {
		return err
	}
	if err := domain.CheckRunName("run_id", runID); err != nil {
		return err
	}
	g, _, err := h.gatewayRuns(ctx, gateway)
	if err != nil {
		return err
	}
	if g.Last.RunID != runID {
		return fmt.Errorf("%w: %s is not the last run of gateway %s", domain.ErrRunNotFound, runID, gateway)
	}
	if !g.Last.Running() {
		return fmt.Errorf("%w: run %s of gateway %s is %s; announce a new run", domain.ErrRunEnded, runID, gateway, g.Last.State)
	}
	return nil
}
