package node

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"hermes/api"
	"hermes/events"
	"hermes/projections"
	"hermes/projections/sessions"
	"hermes/projections/transcripts"
)

// ReadModels is one set of a home's read models as a runner writes them:
// the lanes (lanes.db) and the transcripts (state.db). They are opened,
// fed, purged, swapped and closed together.
type ReadModels struct {
	Lanes *sessions.Projection
	State *transcripts.Projection
}

// Projections lists them for a projections.Runner, lanes first.
func (m ReadModels) Projections() []projections.Projection {
	return []projections.Projection{m.Lanes, m.State}
}

// Close closes both.
func (m ReadModels) Close() error { return errors.Join(m.Lanes.Close(), m.State.Close()) }

// purge checkpoints and truncates both files' WAL (and scrubs their free
// pages), so that no frame keeps a page an erasure rewrote.
func (m ReadModels) purge(ctx context.Context) error {
	return errors.Join(m.State.Purge(ctx), m.Lanes.Purge(ctx))
}

func (m ReadModels) reportClampsTo(c projections.ClampReporter) {
	m.Lanes.ReportClampsTo(c)
	m.State.ReportClampsTo(c)
}

// liveSet is one generation of the read models of a node: what the runner
// writes, and the reader of state.db the requests read.
type liveSet struct {
	ReadModels
	reader api.TranscriptService
}

// requests is the generation as the requests read it.
func (s liveSet) requests() api.ReadModels {
	return api.ReadModels{Lanes: s.Lanes, Transcripts: s.reader}
}

func (s liveSet) close() error {
	return errors.Join(s.reader.Close(), s.State.Close(), s.Lanes.Close())
}

// liveModels are the read models a node uses, swapped as a whole by a
// rebuild on a live home (rebuild.go): requests is the generation the
// requests read, the feeds are the one the runner writes (the same files;
// a swap replaces both at once).
type liveModels struct {
	requests  *projections.Holder[api.ReadModels]
	lanesFeed *projections.Swappable[*sessions.Projection]
	stateFeed *projections.Swappable[*transcripts.Projection]
}

func newLiveModels(s liveSet) liveModels {
	return liveModels{
		requests:  projections.NewHolder(s.requests()),
		lanesFeed: projections.NewSwappable(s.Lanes),
		stateFeed: projections.NewSwappable(s.State),
	}
}

// feeds are what the runner writes.
func (m liveModels) feeds() []projections.Projection {
	return []projections.Projection{m.lanesFeed, m.stateFeed}
}

// lanes is the lane read model in use.
func (m liveModels) lanes() liveLanes { return liveLanes{feed: m.lanesFeed, models: m.requests} }

// state is the transcript read model the runner feeds.
func (m liveModels) state() liveState { return liveState{feed: m.stateFeed} }

// reader is the transcript reader the requests read.
func (m liveModels) reader() liveReader { return liveReader{models: m.requests} }

// exclusive takes the whole generation in use, in the lock order of
// doc.go: the requests' read models first (in-flight requests finish; one
// waiting for the runner still gets it), then the runner's lanes and
// state (the batch being applied finishes), so that nothing waits in a
// circle. install puts a generation in place and lets everyone go on, in
// the reverse order.
func (m liveModels) exclusive() (old liveSet, install func(liveSet)) {
	models, installModels := m.requests.Exclusive()
	oldLanes, installLanes := m.lanesFeed.Exclusive()
	oldState, installState := m.stateFeed.Exclusive()
	old = liveSet{ReadModels: ReadModels{Lanes: oldLanes, State: oldState}, reader: models.Transcripts}
	return old, func(next liveSet) {
		installState(next.State)
		installLanes(next.Lanes)
		installModels(next.requests())
	}
}

// close closes the generation in use.
func (m liveModels) close() {
	r, release := m.requests.Acquire()
	r.Transcripts.Close()
	release()
	m.stateFeed.Close()
	m.lanesFeed.Close()
}

// liveLanes is the lane read model in use, which a rebuild on a live home
// may swap (rebuild.go): queries read the generation the requests read,
// the purge and the exports go to the one the runner feeds.
type liveLanes struct {
	feed   *projections.Swappable[*sessions.Projection]
	models *projections.Holder[api.ReadModels]
}

// SessionKeys implements commands.LaneDirectory.
func (l liveLanes) SessionKeys(ctx context.Context) ([]string, error) {
	m, release := api.AcquireModels(ctx, l.models)
	defer release()
	return m.Lanes.SessionKeys(ctx)
}

// Count implements api.LaneCounter.
func (l liveLanes) Count(ctx context.Context) (int, error) {
	m, release := api.AcquireModels(ctx, l.models)
	defer release()
	return m.Lanes.Count(ctx)
}

func (l liveLanes) StuckLanes(ctx context.Context, threshold int) ([]string, error) {
	m, release := api.AcquireModels(ctx, l.models)
	defer release()
	return m.Lanes.StuckLanes(ctx, threshold)
}

func (l liveLanes) Lane(ctx context.Context, key string) (sessions.Row, error) {
	m, release := api.AcquireModels(ctx, l.models)
	defer release()
	return m.Lanes.Lane(ctx, key)
}

func (l liveLanes) OpenTurns(ctx context.Context) ([]sessions.Row, error) {
	m, release := api.AcquireModels(ctx, l.models)
	defer release()
	return m.Lanes.OpenTurns(ctx)
}

func (l liveLanes) Purge(ctx context.Context) error {
	return l.feed.Use(func(p *sessions.Projection) error { return p.Purge(ctx) })
}

func (l liveLanes) Flush(ctx context.Context) error {
	return l.feed.Use(func(p *sessions.Projection) error { return p.Flush(ctx) })
}

// liveState is the transcript read model the runner feeds (state.db).
type liveState struct {
	feed *projections.Swappable[*transcripts.Projection]
}

func (s liveState) Purge(ctx context.Context) error {
	return s.feed.Use(func(p *transcripts.Projection) error { return p.Purge(ctx) })
}

// MarkPurged: the last clean stop purged state.db (transcripts.Projection).
func (s liveState) MarkPurged() {
	_ = s.feed.Use(func(p *transcripts.Projection) error { p.MarkPurged(); return nil })
}

// AssignedMessages: the ids the serving state.db numbered for an event it
// has not committed yet (transcripts.Projection).
func (s liveState) AssignedMessages(position uint64) (r transcripts.MessageRange, ok bool) {
	_ = s.feed.Use(func(p *transcripts.Projection) error {
		r, ok = p.AssignedMessages(position)
		return nil
	})
	return r, ok
}

func (s liveState) Vacuum(ctx context.Context) error {
	return s.feed.Use(func(p *transcripts.Projection) error { return p.Vacuum(ctx) })
}

// liveReader is the transcript reader the requests read.
type liveReader struct {
	models *projections.Holder[api.ReadModels]
}

func (r liveReader) PrunableSessions(ctx context.Context, olderThan time.Duration, source string, now time.Time) ([]string, error) {
	m, release := api.AcquireModels(ctx, r.models)
	defer release()
	return m.Transcripts.PrunableSessions(ctx, olderThan, source, now)
}

func (r liveReader) SessionExists(ctx context.Context, id string) (bool, error) {
	m, release := api.AcquireModels(ctx, r.models)
	defer release()
	return m.Transcripts.SessionExists(ctx, id)
}

func (r liveReader) TitleOwner(ctx context.Context, title string) (string, error) {
	m, release := api.AcquireModels(ctx, r.models)
	defer release()
	return m.Transcripts.TitleOwner(ctx, title)
}

// openReadModels opens the read models with their files in the layout of
// a home (live) or all in one directory (a rebuild). clamps, when not nil,
// is told of the event values they clamp.
func openReadModels(lanesPath, statePath string, exports sessions.Exports, clamps projections.ClampReporter) (ReadModels, error) {
	lanes, err := sessions.Open(lanesPath, exports)
	if err != nil {
		return ReadModels{}, err
	}
	state, err := transcripts.Open(statePath)
	if err != nil {
		lanes.Close()
		return ReadModels{}, err
	}
	m := ReadModels{Lanes: lanes, State: state}
	if clamps != nil {
		m.reportClampsTo(clamps)
	}
	return m, nil
}

// OpenReadModels opens the read models of home h where they live, without
// their exports (for projections.Verify, or a catch-up offline).
func OpenReadModels(h Home) (ReadModels, error) {
	return openReadModels(h.LanesDB(), h.StateDB(), sessions.Exports{}, nil)
}

// CatchUpOffline applies to h's read models what store holds beyond them;
// the caller holds the home's lock (no node serves it).
func CatchUpOffline(ctx context.Context, h Home, store events.Store) error {
	m, err := OpenReadModels(h)
	if err != nil {
		return err
	}
	defer m.Close()
	return projections.NewRunner(store, m.Projections()...).CatchUp(ctx, nil)
}

// ScratchOpener opens read models for a rebuild, telling clamps (when not
// nil) of the values they clamp.
func ScratchOpener(clamps projections.ClampReporter) projections.OpenFunc {
	return func(dir string) ([]projections.Projection, error) {
		m, err := openReadModels(filepath.Join(dir, "lanes.db"), filepath.Join(dir, "state.db"), sessions.Exports{}, clamps)
		if err != nil {
			return nil, err
		}
		return m.Projections(), nil
	}
}

// openLiveSet opens the read models at their place in the home, as a start
// does once they are healthy.
func (rt *runtime) openLiveSet() (liveSet, error) {
	m, err := openReadModels(rt.home.LanesDB(), rt.home.StateDB(), rt.exports, nil)
	if err != nil {
		return liveSet{}, err
	}
	reader, err := transcripts.OpenReader(rt.home.StateDB())
	if err != nil {
		m.Close()
		return liveSet{}, err
	}
	m.reportClampsTo(rt.clamps)
	// The swap opens them caught up: the search's row lengths can be read
	// now, as a start does once it has caught up.
	reader.WarmSearch()
	return liveSet{ReadModels: m, reader: reader}, nil
}
