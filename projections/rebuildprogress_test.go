package projections_test

import (
	"errors"
	"testing"
	"time"

	"hermes/projections"
)

// TestRebuildTracker drives a tracker with a fake clock through a rebuild.
func TestRebuildTracker(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := projections.NewRebuildTracker(func() time.Time { return now })
	if st := tr.Status(); st.Phase != projections.RebuildIdle || st.Running() {
		t.Fatalf("new tracker = %+v, want idle", st)
	}
	run, err := tr.Begin()
	if err != nil || run != 1 {
		t.Fatalf("Begin() = %d, %v; want 1", run, err)
	}
	if _, err := tr.Begin(); !errors.Is(err, projections.ErrRebuildRunning) {
		t.Errorf("Begin() while running = %v, want ErrRebuildRunning", err)
	}
	now = now.Add(2 * time.Second)
	tr.Progress(1000, 3000)
	st := tr.Status()
	if st.EventsPerSecond != 500 || st.ETA != 4*time.Second || st.Done != 1000 || st.Total != 3000 {
		t.Errorf("after 1000 of 3000 in 2s: %+v, want 500 events/s, ETA 4s", st)
	}
	tr.Restart()
	now = now.Add(time.Second)
	tr.Progress(100, 3000)
	if st := tr.Status(); st.Restarts != 1 || st.EventsPerSecond != 100 {
		t.Errorf("after a restart and 100 events in 1s: %+v, want 1 restart, 100 events/s", st)
	}
	tr.Enter(projections.RebuildCatchingUp)
	now = now.Add(time.Second)
	tr.Progress(3100, 3200)
	if st := tr.Status(); st.Phase != projections.RebuildCatchingUp || st.EventsPerSecond != 100 || st.Total != 3200 {
		t.Errorf("catching up: %+v, want the building rate kept and the new head", st)
	}
	tr.Finish(nil)
	if st := tr.Status(); st.Phase != projections.RebuildDone || st.Running() || st.Done != 3200 || st.ETA != 0 || !st.FinishedAt.Equal(now) {
		t.Errorf("finished: %+v, want done at the head", st)
	}
	if run, err := tr.Begin(); err != nil || run != 2 {
		t.Fatalf("Begin() after done = %d, %v; want 2", run, err)
	}
	tr.Finish(errors.New("disk on fire"))
	if st := tr.Status(); st.Phase != projections.RebuildFailed || st.Err != "disk on fire" {
		t.Errorf("failed: %+v, want failed with the error", st)
	}
}
