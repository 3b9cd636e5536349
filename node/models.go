package node

import (
	"context"
	"path/filepath"
	"time"

	"hermes/api"
	"hermes/projections"
	"hermes/projections/sessions"
	"hermes/projections/transcripts"
)

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

// openReadModels opens the projections with their files in the layout of
// a home (live) or all in one directory (a rebuild). clamps, when not nil,
// is told of the event values they clamp.
func openReadModels(lanesPath, statePath string, exports sessions.Exports, clamps projections.ClampReporter) ([]projections.Projection, error) {
	lanes, err := sessions.Open(lanesPath, exports)
	if err != nil {
		return nil, err
	}
	state, err := transcripts.Open(statePath)
	if err != nil {
		lanes.Close()
		return nil, err
	}
	if clamps != nil {
		lanes.ReportClampsTo(clamps)
		state.ReportClampsTo(clamps)
	}
	return []projections.Projection{lanes, state}, nil
}

// OpenReadModels opens the read models of home h where they live, without
// their exports (for projections.Verify).
func OpenReadModels(h Home) ([]projections.Projection, error) {
	return openReadModels(h.LanesDB(), h.StateDB(), sessions.Exports{}, nil)
}

// ScratchOpener opens read models for a rebuild, telling clamps (when not
// nil) of the values they clamp.
func ScratchOpener(clamps projections.ClampReporter) projections.OpenFunc {
	return func(dir string) ([]projections.Projection, error) {
		return openReadModels(filepath.Join(dir, "lanes.db"), filepath.Join(dir, "state.db"), sessions.Exports{}, clamps)
	}
}
