package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/projections"
	"hermes/testfixtures"
)

// homeWithLog is a home whose log holds a generated history of n events.
func homeWithLog(t *testing.T, n int) Home {
	t.Helper()
	h := Home{Dir: t.TempDir()}
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(h.EventsDB())
	if err != nil {
		t.Fatal(err)
	}
	o := testfixtures.HistoryOptions{Events: n, Lanes: 10, Seed: 7, Start: testfixtures.Date(2026, 1, 1, 0, 0, 0, 0)}
	if err := testfixtures.LoadHistory(context.Background(), store, o, 4); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	return h
}

// rebuildWith is the rebuild Restore calls, as hermes restore's: the read
// models of h rebuilt offline from its new log.
func rebuildWith(h Home) func(context.Context) error {
	return func(ctx context.Context) error {
		store, err := OpenStoreReadOnly(ctx, StoreSpec{}, h)
		if err != nil {
			return err
		}
		defer store.Close()
		tracker := projections.NewRebuildTracker(time.Now)
		if _, err := tracker.Begin(); err != nil {
			return err
		}
		err = RebuildOffline(ctx, h, store, tracker, nil)
		tracker.Finish(err)
		return err
	}
}

// TestBackupThenRestore: a backup's manifest describes its snapshot, and
// Restore puts that log into an empty home and rebuilds the read models
// from it; a home that is not empty is refused without force
// (ErrHomeNotEmpty), and a snapshot that does not match its manifest is
// refused before the home is touched.
func TestBackupThenRestore(t *testing.T) {
	ctx := context.Background()
	src := homeWithLog(t, 300)
	var calls int
	var last, total int64
	m, dir, _, err := Backup(ctx, src, filepath.Join(t.TempDir(), "backups"), time.Now(), "test", func(written, of int64) {
		calls++
		last, total = written, of
	})
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if m.Events != 300 || m.HeadPosition < 300 || m.HermesVersion != "test" || m.File != BackupLogName {
		t.Errorf("Backup manifest = %+v, want 300 events of version test in %s", m, BackupLogName)
	}
	if calls < 2 || last != total || total == 0 {
		t.Errorf("Backup progress: %d calls, last %d of %d; want a start and a finish at the total", calls, last, total)
	}

	into := Home{Dir: filepath.Join(t.TempDir(), "restored")}
	got, err := Restore(ctx, into, dir, false, rebuildWith(into))
	if err != nil {
		t.Fatalf("Restore into an empty home: %v", err)
	}
	if got.SHA256 != m.SHA256 {
		t.Errorf("Restore manifest sha256 = %s, want %s", got.SHA256, m.SHA256)
	}
	models, err := OpenReadModels(into)
	if err != nil {
		t.Fatal(err)
	}
	n, err := models.Lanes.Count(ctx)
	models.Close()
	if err != nil || n == 0 {
		t.Errorf("lanes after the restore's rebuild = %d, %v; want the lanes of the backup", n, err)
	}

	if _, err := Restore(ctx, into, dir, false, rebuildWith(into)); !errors.Is(err, ErrHomeNotEmpty) {
		t.Errorf("Restore into a home that is not empty = %v, want ErrHomeNotEmpty", err)
	}
	if _, err := Restore(ctx, into, dir, true, rebuildWith(into)); err != nil {
		t.Errorf("Restore with force: %v", err)
	}

	f, err := os.OpenFile(filepath.Join(dir, BackupLogName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("tampered"))
	f.Close()
	fresh := Home{Dir: filepath.Join(t.TempDir(), "fresh")}
	rebuilt := false
	if _, err := Restore(ctx, fresh, dir, false, func(context.Context) error { rebuilt = true; return nil }); err == nil {
		t.Error("Restore of a snapshot that does not match its manifest succeeded")
	}
	if _, err := os.Stat(fresh.Dir); !errors.Is(err, os.ErrNotExist) || rebuilt {
		t.Errorf("a refused restore touched the home (stat %v) or rebuilt (%v)", err, rebuilt)
	}
}
