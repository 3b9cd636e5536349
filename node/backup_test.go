package node

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/projections"
	"hermes/testfixtures"
	"hermes/testfixtures/ondisk"
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
	if got.Manifest.SHA256 != m.SHA256 || got.Events != 300 || got.Head != m.HeadPosition || got.PreviousLog != "" {
		t.Errorf("Restore = %+v, want the manifest's sha256 %s, 300 events counted up to %d, no previous log", got, m.SHA256, m.HeadPosition)
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
	forced, err := Restore(ctx, into, dir, true, rebuildWith(into))
	if err != nil {
		t.Errorf("Restore with force: %v", err)
	}
	if st, err := os.Stat(forced.PreviousLog); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the log a forced restore replaced: %q, %v, %v; want it kept, 0600", forced.PreviousLog, st, err)
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

// TestRestoreRefusesTamperedBackups: a backup whose manifest's checksum was
// fixed after the log was tampered with (a hole, an event that does not
// decode, damaged pages, counts that do not match) is refused by the check
// of the copy, before anything is replaced: the home's log is the same
// bytes, no log is kept aside, nothing is rebuilt.
func TestRestoreRefusesTamperedBackups(t *testing.T) {
	ctx := context.Background()
	src := homeWithLog(t, 3000)
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, log string, m *Manifest)
		want   string
	}{
		{"an event deleted (a hole)", func(t *testing.T, log string, m *Manifest) {
			sqlExec(t, log, "DELETE FROM events WHERE position = 1040")
			m.Events--
		}, "damaged"},
		{"an event with invalid JSON", func(t *testing.T, log string, m *Manifest) {
			sqlExec(t, log, "UPDATE events SET data = '{\"at\": ' WHERE position = 1500")
		}, "damaged"},
		{"an event of an unknown type", func(t *testing.T, log string, m *Manifest) {
			sqlExec(t, log, "UPDATE events SET type = 'lane.no_such_event.v9' WHERE position = 1500")
		}, "damaged"},
		{"a damaged index page", func(t *testing.T, log string, m *Manifest) {
			ondisk.DamageLeaf(t, log, "sqlite_autoindex_events_1")
		}, "damaged"},
		{"a truncated file", func(t *testing.T, log string, m *Manifest) {
			st, err := os.Stat(log)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(log, st.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, "backup"},
		{"a manifest that says more events", func(t *testing.T, log string, m *Manifest) {
			m.Events += 10
		}, "its manifest says"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, dir, _, err := Backup(ctx, src, filepath.Join(t.TempDir(), "backups"), time.Now(), "test", nil)
			if err != nil {
				t.Fatal(err)
			}
			var m Manifest
			raw, err := os.ReadFile(filepath.Join(dir, ManifestName))
			if err != nil || json.Unmarshal(raw, &m) != nil {
				t.Fatalf("read manifest: %v", err)
			}
			log := filepath.Join(dir, BackupLogName)
			tc.tamper(t, log, &m)
			if m.SHA256, m.Bytes, err = fileSHA256(log); err != nil {
				t.Fatal(err)
			}
			raw, _ = json.Marshal(m)
			if err := os.WriteFile(filepath.Join(dir, ManifestName), raw, 0o600); err != nil {
				t.Fatal(err)
			}

			into := homeWithLog(t, 50)
			before, _, err := fileSHA256(into.EventsDB())
			if err != nil {
				t.Fatal(err)
			}
			rebuilt := false
			_, err = Restore(ctx, into, dir, true, func(context.Context) error { rebuilt = true; return nil })
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "untouched") {
				t.Fatalf("Restore of a tampered backup = %v, want a refusal saying %q and that the home is untouched", err, tc.want)
			}
			after, _, _ := fileSHA256(into.EventsDB())
			aside, _ := filepath.Glob(into.EventsDB() + preRestoreSuffix + "*")
			leftover, _ := filepath.Glob(into.EventsDB() + ".restore-tmp*")
			if after != before || len(aside) > 0 || len(leftover) > 0 || rebuilt {
				t.Fatalf("a refused restore changed the home: log %s -> %s, kept aside %v, left %v, rebuilt %t", before, after, aside, leftover, rebuilt)
			}
		})
	}
}

func sqlExec(t *testing.T, path, q string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
}
