package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"hermes/adapters/config"
	"hermes/adapters/eventstore/sqlite"
	"hermes/adapters/whatsapp"
	"hermes/api"
	"hermes/commands"
	"hermes/events"
	"hermes/projections"
	"hermes/projections/sessions"
	"hermes/projections/transcripts"
)

// Config is what a node is started with.
type Config struct {
	// Settings is the configuration, validated (config.Load).
	Settings config.Config
	// Home is the home directory the node serves; Open creates it.
	Home Home
	// Log receives the node's log lines.
	Log *slog.Logger
	// ManualClock makes time move only with POST /v1/clock (a test clock;
	// the caller keeps it to a loopback address).
	ManualClock bool
	// DebugAddr, when not empty, is a loopback address to serve Go's pprof
	// profiles on.
	DebugAddr string
	// Version is the build's version, written into the manifests of the
	// periodic backups.
	Version string
	// CatchUpProgress, when not nil, is told how far the read models have
	// caught up with the log while Open waits for them.
	CatchUpProgress func(done, total uint64)
	// HandleSignals makes Run stop gracefully on SIGTERM or SIGINT and
	// restart (ErrRestart) on SIGUSR1.
	HandleSignals bool
	// StopOverdue, when not nil, is called when a stop outlasts
	// agent.shutdown_timeout (hermes serve exits 1 there, unclean).
	StopOverdue func()

	// startCheckMax, when not 0, bounds the files checked whole before
	// serving (startCheckMaxBytes otherwise): a test lowers it.
	startCheckMax int64
}

// ErrRestart is what Run returns after a restart was asked for (SIGUSR1,
// POST /v1/admin/restart, or another node adopted this one's run): the
// caller should start the node again.
var ErrRestart = errors.New("restart requested")

// Node is one running hermes serve: the event store, the read models that
// follow it, the write side, the HTTP API and the background duties.
type Node struct {
	rt         *runtime
	lock       HomeLock
	stopMemory context.CancelFunc
	restart    chan struct{}
}

// aliasDir reads the WhatsApp bridge's alias files on each lookup, so a
// mapping written by the bridge is used at once.
type aliasDir string

func (d aliasDir) WhatsAppAliases() (map[string][]string, error) {
	return whatsapp.LoadAliases(string(d))
}

// daemonSettings are what the node was started with.
type daemonSettings struct {
	cfg           config.Config
	home          Home
	manualClock   bool
	debugAddr     string
	version       string
	handleSignals bool
	stopOverdue   func()
}

// runtime is a running hermes serve.
type runtime struct {
	daemonSettings
	log    *slog.Logger
	clamps *clampLogger
	now    func() time.Time
	// verifyLater: the log is too big to check before serving; Run checks
	// it in the background (logcheck.go).
	verifyLater bool
	// startCheckMax bounds the read models quick-checked before ready
	// (heal.go); a bigger one is checked once serving.
	startCheckMax int64
	store         events.Store
	raw           events.Store
	// What raw can do besides events.Store, found once when it is opened
	// (nil when it cannot): erase in place, keep lane snapshots, and be
	// told that the last stop purged its files.
	eraser    events.Eraser
	snapshots events.SnapshotStore
	purged    purgeMarker
	// models are the read models in use (models.go).
	models   liveModels
	rebuilds *liveRebuild
	// exports are lanes.db's compatibility files (sessions.json, …).
	exports  sessions.Exports
	runner   *projections.Runner
	handler  *commands.Handler
	server   *api.Server
	listener net.Listener
	// servingSince is the runtime clock's time when run began to serve
	// (the gateway runs' lease grace counts from it).
	servingSince time.Time
	// purges runs the purges the erasing requests ask for (purger.go);
	// set by run before it serves.
	purges *purger
	// requestRestart asks run to stop and exit with the restart code.
	requestRestart func()
	// damageFound tells run that the background quick check found a read
	// model damaged: it heals it (healing.go).
	damageFound chan struct{}
}

func settingsOf(c Config) daemonSettings {
	return daemonSettings{cfg: c.Settings, home: c.Home, manualClock: c.ManualClock, debugAddr: c.DebugAddr,
		version: c.Version, handleSignals: c.HandleSignals, stopOverdue: c.StopOverdue}
}

// Open takes the home's gateway lock, opens the event store and the read
// models (healing a damaged one), catches them up and builds the write side
// and the HTTP API. It does not listen yet: Run does. Close releases what
// Open took.
func Open(ctx context.Context, c Config) (*Node, error) {
	s, log := settingsOf(c), c.Log
	if err := s.home.Ensure(); err != nil {
		return nil, err
	}
	lock, err := s.home.Lock()
	if err != nil {
		return nil, fmt.Errorf("cannot serve %s: %w", s.home.Dir, err)
	}

	memCtx, stopMemory := context.WithCancel(ctx)
	applyMemorySettings(memCtx, s.cfg.Memory, log)

	rt := newRuntime(s, log)
	if c.startCheckMax > 0 {
		rt.startCheckMax = c.startCheckMax
	}
	var clock *api.ManualClock
	if s.manualClock {
		clock = api.NewManualClock(time.Now())
		rt.now = clock.Now
		log.Warn("manual test clock: time moves only with POST /v1/clock")
	}
	if err := rt.open(ctx, c.CatchUpProgress); err != nil {
		stopMemory()
		lock.Release()
		return nil, err
	}

	metrics := api.NewMetrics()
	rt.store = metrics.InstrumentStore(rt.raw)
	var node string
	if s.cfg.Store.URL != "" {
		// Several nodes may share this store: name this one.
		node = nodeID(s.cfg)
	}
	opts := []commands.Option{
		commands.WithNode(node),
		commands.WithClock(rt.now),
		commands.WithAliases(aliasDir(s.home.WhatsAppDir())),
		commands.WithDirectory(rt.models.lanes()),
		commands.WithCachedLanes(s.cfg.Memory.CachedLanes),
	}
	if s.cfg.Store.URL == "" {
		// The embedded store, under the gateway lock taken above: no
		// other process appends to it.
		opts = append(opts, commands.WithSoleWriter())
	}
	if rt.snapshots != nil {
		// The embedded store keeps lane snapshots in the log's file;
		// on KurrentDB every load folds the lane's whole stream.
		opts = append(opts, commands.WithSnapshots(rt.snapshots, 0))
	}
	rt.handler = commands.NewHandler(rt.store, WriteSideConfig(s.cfg), opts...)
	metrics.Observe(rt.runner, rt.models.lanes())
	rt.rebuilds = newLiveRebuild(rt)
	metrics.ObserveRebuild(rt.rebuilds.tracker.Status)
	metrics.Register(rt.clamps.count)
	restart := make(chan struct{}, 1)
	rt.requestRestart = func() {
		select {
		case restart <- struct{}{}:
		default:
		}
	}
	rt.server = api.New(api.Deps{
		Commands:        rt.handler,
		Store:           rt.store,
		Runner:          rt.runner,
		Models:          rt.models.requests,
		Assigned:        rt.models.state(),
		RoomToAck:       newRoomToAck(rt.home.HermesDir(), rt.home.Dir).Room,
		Rebuild:         rt.rebuilds,
		Clock:           clock,
		Token:           s.cfg.API.Token,
		MaxBodyBytes:    s.cfg.API.MaxBodyBytes,
		BodyReadTimeout: s.cfg.API.BodyReadTimeout,
		Log:             log,
		Metrics:         metrics,
		ResumeFreshness: s.cfg.Agent.GatewayAutoContinueFreshness,
		Context:         contextSettings(s.cfg, s.home),
		Browser: api.BrowserPolicy{Addr: s.cfg.API.Addr,
			AllowedHosts: s.cfg.API.AllowedHosts, AllowedOrigins: s.cfg.API.AllowedOrigins},
		MaxFollowers:        s.cfg.API.MaxFollowers,
		FollowerBufferBytes: s.cfg.API.FollowerBufferBytes,
		Purge:               rt.purgeForRequest,
		PurgeStatus:         rt.purgeStatus,
		LogDamaged:          rt.logDamaged,
		Restart:             rt.requestRestart,
		StuckLoopThreshold:  s.cfg.Recovery.StuckLoopThreshold,
		Vacuum:              transcriptPruner{rt}.Vacuum,
	})
	return &Node{rt: rt, lock: lock, stopMemory: stopMemory, restart: restart}, nil
}

// Run serves until ctx ends, a signal (HandleSignals) or a restart
// request, then stops gracefully: it drains the open turns, records the
// stop and purges. It returns ErrRestart when a restart was asked for.
func (n *Node) Run(ctx context.Context) error { return n.rt.run(ctx, n.restart) }

// Close closes the read models and the store, and releases the home.
func (n *Node) Close() {
	n.rt.close()
	n.stopMemory()
	n.lock.Release()
}

// newRuntime is a node's state before open, with its defaults.
func newRuntime(s daemonSettings, log *slog.Logger) *runtime {
	return &runtime{daemonSettings: s, log: log, now: time.Now, startCheckMax: startCheckMaxBytes, damageFound: make(chan struct{}, 1)}
}

// open opens the store and the read models and catches them up.
func (rt *runtime) open(ctx context.Context, progress func(done, total uint64)) error {
	var err error
	reserve := newSpaceReserve(rt.home, rt.log)
	err = reserve.retry(func() (err error) {
		rt.raw, err = openStoreForServe(ctx, StoreSpec{URL: rt.cfg.Store.URL}, rt.home, rt.now, rt.log)
		return err
	})
	if sqlite.IsDamaged(err) {
		return damagedLogError(rt.home, err)
	}
	if err != nil {
		return err
	}
	if rt.verifyLater, err = rt.verifyLogAtStart(ctx); err != nil {
		rt.raw.Close()
		return damagedLogError(rt.home, err)
	}
	rt.eraser, _ = rt.raw.(events.Eraser)
	rt.snapshots, _ = rt.raw.(events.SnapshotStore)
	rt.purged, _ = rt.raw.(purgeMarker)
	exports := sessions.Exports{
		RestartFailureCounts: rt.home.RestartCounts(),
		Location:             rt.cfg.Location(),
		MinInterval:          time.Second,
	}
	if rt.cfg.Sessions.WriteSessionsJSON {
		exports.SessionsJSON = rt.home.SessionsJSON()
	}
	rt.exports = exports
	dropRebuildLeftovers(rt.log, rt.home)
	// The read models are disposable: a damaged one is moved aside and
	// rebuilt by the catch-up below (heal.go).
	now := time.Now()
	sweepBroken(rt.log, now, rt.cfg.Storage.BrokenRetention, rt.home.LanesDB(), rt.home.StateDB())
	lanesPath, statePath := rt.home.LanesDB(), rt.home.StateDB()
	var (
		lanes  *sessions.Projection
		state  *transcripts.Projection
		reader *transcripts.Reader
	)
	if err := reserve.retry(func() (err error) {
		lanes, err = healable(rt.log, now, lanesPath, "lanes.db", rt.startCheckMax,
			func() (*sessions.Projection, error) { return sessions.Open(lanesPath, exports) },
			func(error) bool { return true })
		return err
	}); err != nil {
		return err
	}
	if err := reserve.retry(func() (err error) {
		state, err = healable(rt.log, now, statePath, "state.db", rt.startCheckMax,
			func() (*transcripts.Projection, error) { return transcripts.Open(statePath) },
			stateDBIsOurs(statePath))
		return err
	}); err != nil {
		return err
	}
	m := ReadModels{Lanes: lanes, State: state}
	rt.clamps = newClampLogger(rt.log)
	m.reportClampsTo(rt.clamps)
	if err := reserve.retry(func() (err error) {
		reader, err = transcripts.OpenReader(rt.home.StateDB())
		return err
	}); err != nil {
		m.Close()
		return err
	}
	rt.models = newLiveModels(liveSet{ReadModels: m, reader: reader})
	rt.runner = projections.NewRunner(rt.raw, rt.models.feeds()...)
	rt.runner.SetLogger(rt.log)
	rt.runner.SetHold(rt.holdOnDamage) // healing.go
	rt.runner.SetBarrier(api.StaleAfter)
	start := time.Now()
	if err := rt.runner.CatchUp(ctx, progress); err != nil {
		if !errors.Is(err, events.ErrStorageFull) {
			return err
		}
		// A full disk does not stop the start: reads are served from the
		// read models as they are, writes are refused, and the runner
		// catches up by itself once space returns.
		rt.log.Error("read models cannot catch up: storage full; serving reads, refusing writes until space is freed", "err", err)
		return nil
	}
	head, _ := rt.raw.Head(ctx)
	rt.log.Info("read models caught up", "events", head, "took", time.Since(start).Round(time.Millisecond))
	reader.WarmSearch()
	return nil
}

func (rt *runtime) close() {
	if rt.models.requests != nil {
		rt.models.close()
	}
	if rt.handler != nil {
		rt.handler.WaitSnapshots()
	}
	if rt.raw != nil {
		rt.raw.Close()
	}
}

// run serves until a signal or a restart request, then stops gracefully.
func (rt *runtime) run(ctx context.Context, restart <-chan struct{}) error {
	// Signals are caught before the listener opens, so anyone who saw an
	// answer (even /readyz not ready) may signal: the signal waits for the
	// loop below instead of killing the process with the default action.
	var sigs chan os.Signal
	if rt.handleSignals {
		sigs = make(chan os.Signal, 2)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
		defer signal.Stop(sigs)
	}
	ln, err := net.Listen("tcp", rt.cfg.API.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", rt.cfg.API.Addr, err)
	}
	// Where the CLI finds this server (hermes projections rebuild).
	if err := os.WriteFile(rt.home.ServeAddr(), []byte(ln.Addr().String()+"\n"), 0o600); err != nil {
		rt.log.Warn("record the listen address", "err", err)
	}
	defer os.Remove(rt.home.ServeAddr())
	// The duties that serve as long as Run does.
	serving := newDuties(context.WithoutCancel(ctx), rt.log)
	defer serving.stop()
	if rt.debugAddr != "" {
		serving.start("debug", func(ctx context.Context, log *slog.Logger) { serveDebug(ctx, rt.debugAddr, log) })
	}
	if rt.verifyLater {
		serving.start("logcheck", rt.verifyLogLater) // logcheck.go
	}
	// The runner outlives a cancelled ctx: the drain still needs the read
	// models; it is stopped explicitly after the stop is recorded.
	runCtx, stopRunner := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRunner()
	runnerDone := make(chan error, 1)
	go func() { runnerDone <- rt.runner.Run(runCtx) }()
	// The erasing requests' purges run on the runner's context: they
	// outlive a request that ends first (purger.go).
	rt.purges = newPurger(runCtx, rt.purge, rt.raw.Head)
	rt.servingSince = rt.now()
	defer rt.rebuilds.close()

	srv := &http.Server{
		Handler:           rt.server.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(rt.log.Handler(), slog.LevelWarn),
	}
	ln = api.LimitConnections(srv, ln, rt.cfg.API.MaxConnections)
	rt.listener = ln
	srv.RegisterOnShutdown(rt.server.CloseStreams) // clients resume with Last-Event-ID
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()

	// The background duties, from ready until the stop begins.
	bg := newDuties(runCtx, rt.log)
	defer bg.stop()
	late := make(chan error, 1) // a recovery deferred by a full disk that failed otherwise
	err = errStorageNotReady
	if rt.runner.StorageError() == nil {
		err = rt.recover(ctx)
	}
	switch {
	case err == nil:
		if err := rt.becomeReady(bg); err != nil {
			srv.Close()
			stopRunner()
			<-runnerDone
			return err
		}
	case retryableStorage(err, rt.runner):
		rt.log.Error("storage full at start: serving reads, refusing writes; recovery and readiness follow once space is freed", "err", err)
		go func() { late <- rt.recoverLater(runCtx, bg) }()
	default:
		srv.Close()
		stopRunner()
		<-runnerDone
		return err
	}
	rt.log.Info("hermes serving", "addr", ln.Addr().String(), "home", rt.home.Dir, "pid", os.Getpid(), "ready", err == nil,
		"store", StoreSpec{URL: rt.cfg.Store.URL}.String(), "node", rt.handler.Node())

	restarting := false
	// held is set while the runner stopped on damage and the read models
	// are healed (healing.go); heal runs the heals.
	held := false
	heal := &healer{rt: rt}
wait:
	for {
		select {
		case sig := <-sigs:
			restarting = sig == syscall.SIGUSR1
			rt.log.Info("stopping", "signal", sig.String(), "restart", restarting)
		case <-restart:
			restarting = true
			rt.log.Info("restart requested over HTTP")
		case err := <-serveDone:
			stopRunner()
			if !held {
				<-runnerDone
			}
			return fmt.Errorf("http server: %w", err)
		case err := <-runnerDone:
			if !errors.Is(err, projections.ErrHeld) {
				srv.Close()
				return fmt.Errorf("projections stopped: %w", err)
			}
			held = true // a read model met damage: heal it (healing.go)
			heal.start()
			continue
		case err := <-heal.done:
			if err != nil {
				heal.failed(err)
				continue
			}
			heal.healed()
			if held {
				held = false
				go func() { runnerDone <- rt.runner.Run(runCtx) }()
			}
			continue
		case <-heal.retry:
			heal.retried()
			continue
		case <-rt.damageFound: // the background quick check (heal.go)
			heal.start()
			continue
		case err := <-late:
			if err != nil {
				srv.Close()
				stopRunner()
				if !held {
					<-runnerDone
				}
				return err
			}
			late = nil // recovered after a full disk: ready, serve on
			continue
		case <-ctx.Done():
		}
		break wait
	}

	// The whole stop fits in agent.shutdown_timeout; the watchdog is the
	// last resort should a step hang.
	stopBy := time.Now().Add(rt.cfg.Agent.ShutdownTimeout)
	watchdog := time.AfterFunc(rt.cfg.Agent.ShutdownTimeout, func() {
		rt.log.Error("stop took longer than agent.shutdown_timeout: exiting unclean", "shutdown_timeout", rt.cfg.Agent.ShutdownTimeout)
		if rt.stopOverdue != nil {
			rt.stopOverdue()
		}
	})
	defer watchdog.Stop()
	bg.stop()           // no expiry pass or webhook delivery during the drain
	rt.rebuilds.close() // nor a swap of the read models
	clean := rt.drain(ctx, restarting, drainTimeout(rt.cfg.Agent))
	shutdownCtx, cancel := context.WithTimeout(context.Background(), min(5*time.Second, time.Until(stopBy)/2))
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		srv.Close()
	}
	rt.finish(ctx, clean, restarting, stopBy)
	stopRunner()
	if !held {
		<-runnerDone
	}
	if err := rt.models.lanes().Flush(context.Background()); err != nil {
		rt.log.Warn("final sessions.json export", "err", err)
	}
	if restarting {
		return ErrRestart
	}
	return nil
}
