package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"hermes/api"
	"hermes/events"
	"hermes/projections"
)

// trackedRebuilder is the API's view of a rebuild without the files (those
// are package node's, tested there with a real hermes serve): it starts a
// rebuild on its tracker, or refuses with refuse.
type trackedRebuilder struct {
	tracker *projections.RebuildTracker
	refuse  error
	// atOnce finishes each rebuild as soon as it started.
	atOnce bool
}

func (r *trackedRebuilder) StartRebuild() (projections.RebuildStatus, error) {
	if r.refuse != nil {
		return projections.RebuildStatus{}, r.refuse
	}
	if _, err := r.tracker.Begin(); err != nil {
		return r.tracker.Status(), err
	}
	st := r.tracker.Status()
	if r.atOnce {
		r.tracker.Finish(nil)
	}
	return st, nil
}

func (r *trackedRebuilder) RebuildStatus() projections.RebuildStatus { return r.tracker.Status() }

func withRebuilder(r api.Rebuilder) option { return func(o *harnessOptions) { o.rebuild = r } }

// TestRebuildRoutes: POST starts a rebuild (202 and its status), a second
// one while it runs is refused (409), GET follows it, a refusal for want of
// space is 507, and the routes take the token like the rest of /v1.
func TestRebuildRoutes(t *testing.T) {
	reb := &trackedRebuilder{tracker: projections.NewRebuildTracker(func() time.Time { return start })}
	h := newHarness(t, withRebuilder(reb), withToken("s3cret"))
	var st api.RebuildStatusResponse
	h.call("GET", "/v1/projections/rebuild", nil, http.StatusOK, &st)
	if st.Run != 0 || st.Phase != "idle" || st.StartedAt != nil {
		t.Errorf("GET before any rebuild = %+v, want run 0 idle", st)
	}
	h.call("POST", "/v1/projections/rebuild", map[string]any{}, http.StatusAccepted, &st)
	if st.Run != 1 || st.Phase != "building" || st.StartedAt == nil || st.FinishedAt != nil {
		t.Errorf("POST = %+v, want run 1 building", st)
	}
	if r := h.do("POST", "/v1/projections/rebuild", map[string]any{}); r.status != http.StatusConflict {
		t.Errorf("POST while running = %d %s, want 409", r.status, r.body)
	}
	reb.tracker.Progress(300, 1000)
	reb.tracker.Finish(fmt.Errorf("disk on fire"))
	h.call("GET", "/v1/projections/rebuild", nil, http.StatusOK, &st)
	if st.Phase != "failed" || st.Error == nil || *st.Error != "disk on fire" || st.Done != 300 || st.Total != 1000 {
		t.Errorf("GET after a failure = %+v, want failed with the error at 300 of 1000", st)
	}
	reb.refuse = fmt.Errorf("%w: a rebuild needs about 64 MiB", events.ErrStorageFull)
	if r := h.do("POST", "/v1/projections/rebuild", map[string]any{}); r.status != http.StatusInsufficientStorage {
		t.Errorf("POST without space = %d %s, want 507", r.status, r.body)
	}
	h.token = ""
	if r := h.do("GET", "/v1/projections/rebuild", nil); r.status != http.StatusUnauthorized {
		t.Errorf("GET without the token = %d, want 401", r.status)
	}
}
