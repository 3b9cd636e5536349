package commands

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"hermes/domain"
	"hermes/events"
)

// ErrConflict: the lane kept changing under the command; it was retried
// maxAttempts times and gave up. Nothing was appended.
var ErrConflict = errors.New("concurrent modification: retries exhausted")

const maxAttempts = 16

// Handler executes lane commands against an event store.
type Handler struct {
	store     EventLog
	now       func() time.Time
	entropy   func() string
	cfg       Config
	aliases   AliasSource
	directory LaneDirectory

	// node names this process among several on one store: its events
	// carry it, and its gateway stream is gateway-<node>.
	node string

	locks     keyedMutex
	cache     laneCache
	snapshots snapshots

	// soleWriter: no other process appends to this store's lane streams
	// (WithSoleWriter), so the cache is the lane as the log has it.
	soleWriter bool
	// sessions remembers the transcript sessions known to exist (sole
	// writer only).
	sessions sessionMemo
}

// Option configures a Handler.
type Option func(*Handler)

// WithClock injects the clock every time rule uses.
func WithClock(now func() time.Time) Option { return func(h *Handler) { h.now = now } }

// WithEntropy injects the source of the 8 hex characters of new session ids
// (and of generated turn ids).
func WithEntropy(f func() string) Option { return func(h *Handler) { h.entropy = f } }

// WithAliases sets where WhatsApp aliases come from.
func WithAliases(a AliasSource) Option { return func(h *Handler) { h.aliases = a } }

// WithNode names this node among several hermes serve processes sharing one
// store: every event it appends carries the name (Metadata.Node) and its
// gateway stream becomes gateway-<node>. Empty (the default) is a single node.
func WithNode(node string) Option { return func(h *Handler) { h.node = node } }

// Node is the node name given with [WithNode].
func (h *Handler) Node() string { return h.node }

// WithCachedLanes bounds how many lanes the handler keeps in memory
// (n >= 1; DefaultCachedLanes otherwise). A lane past the bound is loaded
// from its snapshot and the log again when it is next used.
func WithCachedLanes(n int) Option {
	return func(h *Handler) {
		if n >= 1 {
			h.cache.max = n
		}
	}
}

// WithSoleWriter says that no other process appends to the store while
// the handler runs (hermes serve on the embedded store, under the home's
// gateway lock): a command that decides to append nothing rests on the
// cached lane instead of reading the stream again to see whether another
// writer moved it, and a transcript session seen to exist is not looked up
// again until this handler deletes it (sessionmemo.go). Appends are
// checked against the stream's version either way.
func WithSoleWriter() Option { return func(h *Handler) { h.soleWriter = true } }

// WithDirectory sets the lane directory used by the sweeping commands.
func WithDirectory(d LaneDirectory) Option { return func(h *Handler) { h.directory = d } }

// NewHandler returns a handler over store (any events.Store will do) with
// cfg.
func NewHandler(store EventLog, cfg Config, opts ...Option) *Handler {
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	h := &Handler{store: store, now: time.Now, entropy: randomHex8, cfg: cfg, cache: laneCache{max: DefaultCachedLanes}}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Config returns the handler's configuration.
func (h *Handler) Config() Config { return h.cfg }

// Now is the handler's clock.
func (h *Handler) Now() time.Time { return h.now() }

// LaneResult is a lane as a command left it.
type LaneResult struct {
	Lane domain.Lane
	// Version is the lane stream's version after the command.
	Version uint64
	// Position is the global position of the last event the command
	// appended (0 when it appended nothing): wait for it to read your write.
	Position uint64
	// Events are the events the command appended (empty when it changed
	// nothing, or when it was a retry of a command already applied).
	Events []events.Event
}

// decideFunc decides a command on the current lane state.
type decideFunc func(l domain.Lane, now time.Time) ([]events.Event, error)

// execute is the one write path: lock the key in this process, load the
// lane, decide, append with the expected version, retry on conflict.
func (h *Handler) execute(ctx context.Context, key, command, commandID string, decide decideFunc) (LaneResult, error) {
	return h.executeRun(ctx, key, command, commandID, "", decide)
}

// executeRun is execute for a command of a gateway run: the turn_started
// it appends carries the run (events.Metadata.GatewayRun).
func (h *Handler) executeRun(ctx context.Context, key, command, commandID, gatewayRun string, decide decideFunc) (LaneResult, error) {
	if key == "" {
		return LaneResult{}, fmt.Errorf("%s: %w: empty session key", command, domain.ErrInvalidArgument)
	}
	cmd := identify(commandID)
	unlock := h.locks.lock(key)
	defer unlock()

	stream := events.LaneStream(key)
	for attempt := 0; attempt < maxAttempts; attempt++ {
		st, err := h.load(ctx, stream)
		if err != nil {
			return LaneResult{}, fmt.Errorf("%s %s: %w", command, key, err)
		}
		decided, err := decide(st.lane, h.now())
		if err != nil || len(decided) == 0 {
			// A refusal, or nothing to do. Unless this handler is the
			// store's only writer, that must not rest on a stale cache
			// (another process may have appended): decide again on the
			// fresh lane if it moved.
			if !h.soleWriter {
				fresh, ferr := h.refresh(ctx, stream, st)
				if ferr != nil {
					return LaneResult{}, fmt.Errorf("%s %s: %w", command, key, ferr)
				}
				if fresh.version != st.version {
					continue
				}
			}
			return LaneResult{Lane: st.lane, Version: st.version}, err
		}
		proposed := h.proposals(command, cmd, stream, decided)
		if gatewayRun != "" {
			for i := range proposed {
				if _, ok := proposed[i].Event.(events.TurnStarted); ok {
					proposed[i].Metadata.GatewayRun = gatewayRun
				}
			}
		}
		res, err := h.store.Append(ctx, stream, laneExpected(st.version), proposed)
		if errors.Is(err, events.ErrWrongExpectedVersion) {
			h.cache.drop(stream)
			continue
		}
		if err != nil {
			// The append may have been written all the same (an error
			// after the commit): the next load reads the lane again.
			h.cache.drop(stream)
			return LaneResult{}, fmt.Errorf("%s %s: %w", command, key, err)
		}
		if res.Duplicate {
			// A retry of a command already applied: report the lane as it
			// is now, and what the original append wrote.
			h.cache.drop(stream)
			cur, err := h.load(ctx, stream)
			if err != nil {
				return LaneResult{}, fmt.Errorf("%s %s: %w", command, key, err)
			}
			orig, err := h.readVersions(ctx, stream, res.Versions)
			if err != nil {
				return LaneResult{}, fmt.Errorf("%s %s: %w", command, key, err)
			}
			return LaneResult{Lane: cur.lane, Version: cur.version, Position: res.LastPosition(), Events: orig}, nil
		}
		lane := st.lane
		for _, e := range decided {
			lane = domain.Evolve(lane, e)
		}
		h.cache.put(stream, laneState{lane: lane, version: res.LastVersion()})
		return LaneResult{Lane: lane, Version: res.LastVersion(), Position: res.LastPosition(), Events: decided}, nil
	}
	return LaneResult{}, fmt.Errorf("%s %s: %w", command, key, ErrConflict)
}

// proposals wraps the events a command decided on stream, with ids
// derived from the command (a retry proposes the same ids).
func (h *Handler) proposals(command string, cmd commandIdentity, stream string, decided []events.Event) []events.Proposed {
	proposed := make([]events.Proposed, len(decided))
	for i, e := range decided {
		proposed[i] = events.Proposed{
			ID:    cmd.eventID(stream, i),
			Event: e,
			Metadata: events.Metadata{
				SchemaVersion: events.SchemaVersionOf(e.EventType()),
				Command:       command,
				CommandID:     cmd.id,
				Node:          h.node,
			},
		}
	}
	return proposed
}

// laneState is a lane folded up to a stream version.
type laneState struct {
	lane    domain.Lane
	version uint64
	// eventID is the id of the event at version, set by a fold from the
	// store for the snapshot it may write; the cache keeps none.
	eventID string
}

// load returns the lane from the cache, or from the store (see stored).
func (h *Handler) load(ctx context.Context, stream string) (laneState, error) {
	if st, ok := h.cache.get(stream); ok {
		return st, nil
	}
	st, err := h.stored(ctx, stream)
	if err != nil {
		return laneState{}, err
	}
	h.cache.put(stream, st)
	return st, nil
}

// stored folds the lane from the store: from its snapshot and the events
// after it when it has one that still matches the log, else from its first
// event. A snapshot is never trusted over the log: one of another schema,
// undecodable, or whose event is not the log's at its version is discarded
// and rewritten from the full fold. A fold of more than snapshotAfter
// events writes a new snapshot, off this call (snapshots.go).
func (h *Handler) stored(ctx context.Context, stream string) (laneState, error) {
	base, found := h.snapshots.read(ctx, stream)
	st, folded, err := h.fold(ctx, stream, base, base.version != 0)
	discarded := errors.Is(err, errSnapshotStale)
	if discarded {
		st, folded, err = h.fold(ctx, stream, laneState{}, false)
	}
	if err != nil {
		return laneState{}, err
	}
	if st.version != 0 {
		h.cache.put(stream, st)
		if folded > h.snapshots.after || (found && (discarded || base.version == 0)) {
			h.snapshots.write(stream, st)
		}
	}
	return st, nil
}

// readPage bounds one stream read.
const readPage = 512

// errSnapshotStale: the log does not hold the snapshot's event at its
// version.
var errSnapshotStale = errors.New("snapshot does not match the log")

// refresh folds whatever the stream holds beyond st.
func (h *Handler) refresh(ctx context.Context, stream string, st laneState) (laneState, error) {
	st, _, err := h.fold(ctx, stream, st, false)
	if err != nil {
		return laneState{}, err
	}
	if st.version != 0 {
		h.cache.put(stream, st)
	}
	return st, nil
}

// fold folds the events of stream after st into st, a page at a time, and
// says how many it folded. When st is a snapshot, the first page starts at
// its version, and errSnapshotStale is returned unless the log holds the
// snapshot's event there.
func (h *Handler) fold(ctx context.Context, stream string, st laneState, snapshot bool) (laneState, int, error) {
	from, check := st.version+1, snapshot
	if check {
		from = st.version
	}
	folded := 0
	for {
		page, err := h.store.ReadStream(ctx, stream, from, readPage, events.Forwards)
		if errors.Is(err, events.ErrStreamNotFound) {
			if check {
				return laneState{}, 0, errSnapshotStale
			}
			return st, folded, nil
		}
		if err != nil {
			return laneState{}, 0, fmt.Errorf("read %s: %w", stream, err)
		}
		full := len(page) == readPage
		if check {
			if len(page) == 0 || page[0].Version != st.version || page[0].ID != st.eventID {
				return laneState{}, 0, errSnapshotStale
			}
			page, check = page[1:], false
		}
		for _, env := range page {
			st.lane = domain.Evolve(st.lane, env.Event)
			st.version, st.eventID = env.Version, env.ID
		}
		folded += len(page)
		if !full {
			return st, folded, nil
		}
		from = st.version + 1
	}
}

func (h *Handler) readVersions(ctx context.Context, stream string, versions []uint64) ([]events.Event, error) {
	if len(versions) == 0 {
		return nil, nil
	}
	page, err := h.store.ReadStream(ctx, stream, versions[0], len(versions), events.Forwards)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stream, err)
	}
	out := make([]events.Event, len(page))
	for i, env := range page {
		out[i] = env.Event
	}
	return out, nil
}

// Lane returns a lane's current state straight from the store (the cache
// is brought up to date first), and its version; a lane that never existed
// is the zero Lane at version 0.
func (h *Handler) Lane(ctx context.Context, key string) (domain.Lane, uint64, error) {
	stream := events.LaneStream(key)
	st, ok := h.cache.get(stream)
	var err error
	if ok {
		st, err = h.refresh(ctx, stream, st)
	} else {
		st, err = h.stored(ctx, stream)
	}
	if err != nil {
		return domain.Lane{}, 0, err
	}
	return st.lane, st.version, nil
}

func randomHex8() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// keyedMutex serialises commands on the same lane within this process, so
// concurrent requests for one key queue instead of conflicting and
// retrying; other processes are kept honest by the expected version.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*refMutex
}

type refMutex struct {
	sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = make(map[string]*refMutex)
	}
	m := k.locks[key]
	if m == nil {
		m = &refMutex{}
		k.locks[key] = m
	}
	m.refs++
	k.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		k.mu.Lock()
		m.refs--
		if m.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

func isNotFound(err error) bool { return errors.Is(err, events.ErrStreamNotFound) }
