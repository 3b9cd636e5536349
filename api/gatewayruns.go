package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/samber/lo"

	"hermes/commands"
	"hermes/domain"
	"hermes/projections/sessions"
	"hermes/projections/transcripts"
)

// DefaultStuckLoopThreshold is recovery.stuck_loop_threshold when Deps
// leaves it 0.
const DefaultStuckLoopThreshold = 3

// The routes of a gateway process running on hermes (Hermes' own
// GatewayRunner through the Python client): its runs, the in-place
// changes it saves to an entry, and the SessionDB state it keeps beside
// the transcripts (gatewaystate.go).
func (s *Server) gatewayRoutes(rt routes) {
	rt.post("/gateway-runs", s.startGatewayRun)
	rt.get("/gateway-runs", s.listGatewayRuns)
	rt.post("/gateway-runs/{gateway}/{run_id}/heartbeat", withRun(s.heartbeatGatewayRun))
	rt.post("/gateway-runs/{gateway}/{run_id}/stop", withRun(s.stopGatewayRun))

	rt.get("/sessions/{key}/expiry", withKey(s.laneExpiry))
	rt.control("/sessions/key", s.sessionKeyOf)
	rt.post("/sessions/{key}/compression-split", withKey(s.compressionSplit))
	rt.post("/sessions/{key}/fresh-reset/consume", withKey(s.consumeFreshReset))
	rt.post("/sessions/{key}/expiry-finalized", withKey(s.expiryFinalized))
	s.gatewayStateRoutes(rt)
}

// runIndex lets the gateway-run and state commands read the read models
// of their request.
type runIndex struct{ s *Server }

var (
	_ commands.RunDirectory   = runIndex{}
	_ commands.SessionParents = runIndex{}
	_ commands.StateIndex     = runIndex{}
)

func (x runIndex) OpenTurnKeys(ctx context.Context) ([]string, error) {
	rows, err := x.s.lanes(ctx).OpenTurns(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r.Lane.SessionKey
	}
	return keys, nil
}

func (x runIndex) RunUsed(ctx context.Context, gateway, runID string) (bool, error) {
	return x.s.lanes(ctx).GatewayRunUsed(ctx, gateway, runID)
}

func (x runIndex) ParentSessionID(ctx context.Context, id string) (string, bool, error) {
	row, err := x.s.transcripts(ctx).Session(ctx, id)
	if errors.Is(err, transcripts.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if row.ParentSessionID == nil {
		return "", true, nil
	}
	return *row.ParentSessionID, true, nil
}

func (x runIndex) SessionExists(ctx context.Context, id string) (bool, error) {
	return transcriptIndex(x).SessionExists(ctx, id)
}

func (x runIndex) HandoffState(ctx context.Context, id string) (string, bool, error) {
	state, _, _, err := x.s.transcripts(ctx).HandoffState(ctx, id)
	if errors.Is(err, transcripts.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return lo.FromPtr(state), true, nil
}

func (x runIndex) TopicBindingOfSession(ctx context.Context, id string) (*domain.TopicBinding, error) {
	row, err := x.s.transcripts(ctx).TopicBindingOfSession(ctx, id)
	if err != nil || row == nil {
		return nil, err
	}
	chat, _ := row["chat_id"].(string)
	thread, _ := row["thread_id"].(string)
	return &domain.TopicBinding{ChatID: chat, ThreadID: thread}, nil
}

// gatewayRunRef names a run in a request.
type gatewayRunRef struct {
	Gateway string `json:"gateway"`
	RunID   string `json:"run_id"`
}

func (q gatewayRunRef) validate() error {
	if err := domain.CheckRunName("gateway_run.gateway", q.Gateway); err != nil {
		return err
	}
	return domain.CheckRunName("gateway_run.run_id", q.RunID)
}

// withRun parses the {gateway} and {run_id} path parameters for h.
func withRun(h func(w http.ResponseWriter, r *http.Request, run gatewayRunRef) error) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		gateway, err := pathParam(r, "gateway")
		if err != nil {
			return err
		}
		runID, err := pathParam(r, "run_id")
		if err != nil {
			return err
		}
		ref := gatewayRunRef{Gateway: gateway, RunID: runID}
		if err := ref.validate(); err != nil {
			return err
		}
		return h(w, r, ref)
	}
}

// Run is a gateway run as the API answers it.
type Run struct {
	Gateway      string    `json:"gateway"`
	RunID        string    `json:"run_id"`
	PID          int       `json:"pid"`
	Host         string    `json:"host"`
	StartedAt    Timestamp `json:"started_at"`
	LeaseSeconds int       `json:"lease_seconds"`
	LeaseUntil   Timestamp `json:"lease_until"`
	// State is running, stopped or lost.
	State string `json:"state"`
	// Clean: a stop that cut no turn (null while running).
	Clean   *bool     `json:"clean"`
	Restart bool      `json:"restart"`
	Cause   *string   `json:"cause"`
	EndedAt Timestamp `json:"ended_at"`
	// Cut are the lanes whose turn the run's end cut.
	Cut []string `json:"cut"`
}

// NewRun maps a run of the read model.
func NewRun(r domain.GatewayRun) Run {
	out := Run{Gateway: r.Gateway, RunID: r.RunID, PID: r.PID, Host: r.Host, StartedAt: Timestamp(r.StartedAt),
		LeaseSeconds: r.LeaseSeconds, LeaseUntil: Timestamp(r.LeaseUntil), State: r.State, Restart: r.Restart,
		Cause: nullable(r.Cause), EndedAt: Timestamp(r.EndedAt), Cut: nonNil(r.Cut)}
	switch r.State {
	case domain.RunStopped:
		out.Clean = lo.ToPtr(len(r.Cut) == 0)
	case domain.RunLost:
		out.Clean = lo.ToPtr(false)
	}
	return out
}

// startRunRequest is POST /v1/gateway-runs.
type startRunRequest struct {
	Gateway      string `json:"gateway"`
	RunID        string `json:"run_id"`
	PID          int    `json:"pid"`
	Host         string `json:"host"`
	LeaseSeconds *int   `json:"lease_seconds"`
}

func (q startRunRequest) validate() error {
	if err := domain.CheckRunName("run_id", q.RunID); err != nil {
		return err
	}
	if q.Gateway != "" {
		if err := domain.CheckRunName("gateway", q.Gateway); err != nil {
			return err
		}
	}
	if q.PID < 0 || q.PID > 1<<31 {
		return fmt.Errorf("%w: pid must be from 0 to 2^31", errBadRequest)
	}
	if q.LeaseSeconds != nil && (*q.LeaseSeconds < int(domain.MinRunLease/time.Second) || *q.LeaseSeconds > int(domain.MaxRunLease/time.Second)) {
		return fmt.Errorf("%w: lease_seconds must be from %d to %d", errBadRequest, int(domain.MinRunLease/time.Second), int(domain.MaxRunLease/time.Second))
	}
	return checkText("host", q.Host, maxSourceField)
}

// defaultGateway names the gateway of a request that names none.
const defaultGateway = "default"

func (s *Server) stuckLoopThreshold() int {
	if s.StuckLoopThreshold > 0 {
		return s.StuckLoopThreshold
	}
	return DefaultStuckLoopThreshold
}

// gatewayRunAnswer is the answer of a run's start and stop.
type gatewayRunAnswer struct {
	Run         Run      `json:"run"`
	Previous    *Run     `json:"previous"`
	Interrupted []string `json:"interrupted"`
	Suspended   []string `json:"suspended"`
}

func (s *Server) startGatewayRun(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[startRunRequest](r, false)
	if err != nil {
		return err
	}
	ctx := r.Context()
	gateway := req.Gateway
	if gateway == "" {
		gateway = defaultGateway
	}
	lease := domain.DefaultRunLease
	if req.LeaseSeconds != nil {
		lease = time.Duration(*req.LeaseSeconds) * time.Second
	}
	// The open turns of the last run and the run ids used are read models.
	if err := s.syncReadModel(ctx); err != nil {
		return err
	}
	out, err := s.Commands.StartGatewayRun(ctx, runIndex{s}, commands.StartGatewayRun{Start: domain.RunStart{
		Gateway: gateway, RunID: req.RunID, PID: req.PID, Host: req.Host, Lease: lease}, CommandID: commandID(r)})
	if err != nil {
		return err
	}
	if err := s.readAfter(ctx, out.Position); err != nil {
		return err
	}
	// Hermes suspends the lanes stuck across consecutive restarts at the
	// gateway's start (its _suspend_stuck_loop_sessions): hermes does it
	// here from its own counts, so the gateway's pass finds them suspended.
	suspended, err := s.suspendStuck(ctx)
	if err != nil {
		return err
	}
	runs, err := s.lanes(ctx).GatewayRuns(ctx, gateway, 2)
	if err != nil {
		return err
	}
	if len(runs) == 0 || runs[0].RunID != req.RunID {
		return fmt.Errorf("gateway run %s of %s: not in the read model after its start", req.RunID, gateway)
	}
	ans := gatewayRunAnswer{Run: NewRun(runs[0]), Interrupted: nonNil(out.Interrupted), Suspended: nonNil(suspended)}
	if len(runs) > 1 {
		prev := NewRun(runs[1])
		ans.Previous = &prev
	}
	status := http.StatusOK
	if out.Appended {
		status = http.StatusCreated
	}
	writeJSON(w, status, ans)
	return nil
}

// suspendStuck suspends the lanes whose stuck-loop count reached the
// threshold (stuck_loop) and returns their keys.
func (s *Server) suspendStuck(ctx context.Context) ([]string, error) {
	threshold := s.stuckLoopThreshold()
	stuck, err := s.lanes(ctx).StuckLanes(ctx, threshold)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, key := range stuck {
		n, err := s.lanes(ctx).RestartFailureCount(ctx, key)
		if err != nil {
			return nil, err
		}
		res, err := s.Commands.SuspendStuckLoop(ctx, commands.SuspendStuckLoop{Key: key, Count: n, Threshold: threshold})
		if errors.Is(err, domain.ErrLaneNotFound) || errors.Is(err, domain.ErrNotStuck) {
			continue
		}
		if err != nil {
			return nil, err
		}
		s.wrote(res.Position)
		if len(res.Events) > 0 {
			out = append(out, key)
		}
	}
	return out, nil
}

func (s *Server) heartbeatGatewayRun(w http.ResponseWriter, r *http.Request, run gatewayRunRef) error {
	if _, err := decode[emptyRequest](r, true); err != nil {
		return err
	}
	out, err := s.Commands.HeartbeatGatewayRun(r.Context(), commands.HeartbeatGatewayRun{Gateway: run.Gateway, RunID: run.RunID})
	if err != nil {
		return s.runEnded(r.Context(), err, run)
	}
	return s.answerRun(w, r, run, out, nil)
}

// answerRun answers the run as the read model has it once it shows out.
func (s *Server) answerRun(w http.ResponseWriter, r *http.Request, run gatewayRunRef, out commands.GatewayRunOutcome, interrupted []string) error {
	ctx := r.Context()
	if err := s.readAfter(ctx, out.Position); err != nil {
		return err
	}
	runs, err := s.lanes(ctx).GatewayRuns(ctx, run.Gateway, 100)
	if err != nil {
		return err
	}
	for _, got := range runs {
		if got.RunID == run.RunID {
			if interrupted == nil {
				return respond(w, map[string]Run{"run": NewRun(got)})
			}
			return respond(w, struct {
				Run         Run      `json:"run"`
				Interrupted []string `json:"interrupted"`
			}{NewRun(got), interrupted})
		}
	}
	return fmt.Errorf("%w: run %s of gateway %s", domain.ErrRunNotFound, run.RunID, run.Gateway)
}

// stopRunRequest is POST /v1/gateway-runs/{gateway}/{run_id}/stop.
type stopRunRequest struct {
	Restart bool `json:"restart"`
}

func (stopRunRequest) validate() error { return nil }

func (s *Server) stopGatewayRun(w http.ResponseWriter, r *http.Request, run gatewayRunRef) error {
	req, err := decode[stopRunRequest](r, true)
	if err != nil {
		return err
	}
	if err := s.syncReadModel(r.Context()); err != nil {
		return err
	}
	out, err := s.Commands.StopGatewayRun(r.Context(), runIndex{s}, commands.StopGatewayRun{Gateway: run.Gateway, RunID: run.RunID,
		Restart: req.Restart, CommandID: commandID(r)})
	if err != nil {
		return err
	}
	return s.answerRun(w, r, run, out, nonNil(out.Interrupted))
}

func (s *Server) listGatewayRuns(w http.ResponseWriter, r *http.Request) error {
	gateway, err := textQuery(r, "gateway", 64)
	if err != nil {
		return err
	}
	if gateway != "" {
		if err := domain.CheckRunName("gateway", gateway); err != nil {
			return err
		}
	}
	limit, err := intQuery(r, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	runs, err := s.lanes(r.Context()).GatewayRuns(r.Context(), gateway, limit)
	if err != nil {
		return err
	}
	return respond(w, map[string][]Run{"runs": lo.Map(runs, func(g domain.GatewayRun, _ int) Run { return NewRun(g) })})
}

// compressionSplitRequest is POST /v1/sessions/{key}/compression-split.
type compressionSplitRequest struct {
	SessionID         string `json:"session_id"`
	PreviousSessionID string `json:"previous_session_id"`
}

func (q compressionSplitRequest) validate() error {
	if err := domain.ValidateSessionID(q.SessionID); err != nil {
		return err
	}
	if err := domain.ValidateSessionID(q.PreviousSessionID); err != nil {
		return fmt.Errorf("previous_session_id: %w", err)
	}
	return nil
}

func (s *Server) compressionSplit(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	req, err := decode[compressionSplitRequest](r, false)
	if err != nil {
		return err
	}
	if err := s.fresh(r.Context()); err != nil { // the continuation was opened through this server
		return err
	}
	res, err := s.Commands.CompressSession(r.Context(), runIndex{s}, commands.CompressSession{Key: string(key),
		SessionID: req.SessionID, PreviousSessionID: req.PreviousSessionID, CommandID: commandID(r)})
	return s.laneDone(w, res, err)
}

// consumeRequest is POST /v1/sessions/{key}/fresh-reset/consume.
type consumeRequest struct {
	SessionID string `json:"session_id"`
}

func (q consumeRequest) validate() error {
	if q.SessionID == "" {
		return nil
	}
	return domain.ValidateSessionID(q.SessionID)
}

func (s *Server) consumeFreshReset(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	req, err := decode[consumeRequest](r, true)
	if err != nil {
		return err
	}
	res, err := s.Commands.ConsumeFreshReset(r.Context(), commands.ConsumeFreshReset{Key: string(key), SessionID: req.SessionID, CommandID: commandID(r)})
	return s.laneDone(w, res, err)
}

// expiryFinalizedRequest is POST /v1/sessions/{key}/expiry-finalized.
type expiryFinalizedRequest struct {
	SessionID string `json:"session_id"`
	Forced    bool   `json:"forced"`
}

func (q expiryFinalizedRequest) validate() error { return domain.ValidateSessionID(q.SessionID) }

func (s *Server) expiryFinalized(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	req, err := decode[expiryFinalizedRequest](r, false)
	if err != nil {
		return err
	}
	res, err := s.Commands.FinalizeExpiryOf(r.Context(), commands.FinalizeExpiryOf{Key: string(key), SessionID: req.SessionID,
		Forced: req.Forced, CommandID: commandID(r)})
	return s.laneDone(w, res, err)
}

// suspendRequest is POST /v1/sessions/{key}/suspend: /stop by default, or
// the stuck-loop escalation Hermes' gateway asks at its start.
type suspendRequest struct {
	Reason string `json:"reason"`
}

func (q suspendRequest) validate() error {
	switch q.Reason {
	case "", "stop_command", "stuck_loop":
		return nil
	}
	return fmt.Errorf("%w: reason must be stop_command or stuck_loop", errBadRequest)
}

// suspendStuckLoop carries out a stuck-loop suspension only when hermes'
// own count of the lane's consecutive interrupted restarts reached the
// threshold (409 otherwise): the gateway's .restart_failure_counts may be
// its own stale file.
func (s *Server) suspendStuckLoop(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	if err := s.fresh(r.Context()); err != nil {
		return err
	}
	n, err := s.lanes(r.Context()).RestartFailureCount(r.Context(), string(key))
	if err != nil {
		return err
	}
	res, err := s.Commands.SuspendStuckLoop(r.Context(), commands.SuspendStuckLoop{Key: string(key), Count: n,
		Threshold: s.stuckLoopThreshold(), CommandID: commandID(r)})
	return s.laneDone(w, res, err)
}

// runEnded turns the refusal of a run that is not its gateway's last into
// domain.ErrRunEnded when the gateway did run it once (the client must
// announce a new run either way; 404 stays for a run never announced).
func (s *Server) runEnded(ctx context.Context, err error, run gatewayRunRef) error {
	if !errors.Is(err, domain.ErrRunNotFound) {
		return err
	}
	used, uerr := s.lanes(ctx).GatewayRunUsed(ctx, run.Gateway, run.RunID)
	if uerr != nil || !used {
		return err
	}
	return fmt.Errorf("%w: run %s of gateway %s was followed by another run", domain.ErrRunEnded, run.RunID, run.Gateway)
}

// expiryAnswer is GET /v1/sessions/{key}/expiry: Hermes' _should_reset and
// _is_session_expired for the lane, judged on the entry alone.
type expiryAnswer struct {
	SessionID       string  `json:"session_id"`
	Expired         bool    `json:"expired"`
	Reason          *string `json:"reason"`
	ExpiryFinalized bool    `json:"expiry_finalized"`
	// Finalizable: the lane's reset policy ever expires a session (its
	// mode is not none), Hermes' is_session_finalizable.
	Finalizable bool `json:"finalizable"`
}

func (s *Server) laneExpiry(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	row, err := s.lanes(r.Context()).Lane(r.Context(), string(key))
	if err != nil {
		return err
	}
	reason := s.Commands.ExpiryReason(row.Lane)
	policy := s.Commands.Config().Policies.For(row.Lane.Platform, row.Lane.ChatType)
	return respond(w, expiryAnswer{SessionID: row.Lane.SessionID, Expired: reason != "", Reason: nullable(reason),
		ExpiryFinalized: row.Lane.ExpiryFinalized, Finalizable: policy.Mode != domain.ResetNone})
}

// expiredOnly keeps, with expired=true, the lanes whose session expired and
// was not finalized (the expiry watcher's walk); expired=false the others.
func (s *Server) expiredOnly(r *http.Request, rows []sessions.Row) ([]sessions.Row, error) {
	want, err := boolQuery(r, "expired")
	if err != nil {
		return nil, err
	}
	return lo.Filter(rows, func(row sessions.Row, _ int) bool {
		expired := !row.Lane.ExpiryFinalized && s.Commands.ExpiryReason(row.Lane) != ""
		return expired == want
	}), nil
}

// sessionKeyRequest is POST /v1/sessions/key.
type sessionKeyRequest struct {
	Source *sourceRequest `json:"source"`
}

func (q sessionKeyRequest) validate() error {
	if q.Source == nil {
		return fmt.Errorf("%w: source is required", errBadRequest)
	}
	return q.Source.validate()
}

// sessionKeyOf is Hermes' _generate_session_key: the lane key hermes builds
// for a source (WhatsApp identities canonicalised), appending nothing.
func (s *Server) sessionKeyOf(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[sessionKeyRequest](r, false)
	if err != nil {
		return err
	}
	src := req.Source.domainSource().Normalized()
	if src.Platform == "" {
		return fmt.Errorf("%w: source.platform is required", errBadRequest)
	}
	key, err := s.Commands.SessionKey(src)
	if err != nil {
		return err
	}
	return respond(w, map[string]string{"session_key": key})
}
