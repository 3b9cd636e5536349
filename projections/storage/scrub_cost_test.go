package storage_test

import (
	"database/sql"
	"os"
	"syscall"
	"testing"
	"time"

	"hermes/projections/storage"
)

// TestScrubCost measures ScrubFreeSpace and, for comparison, VACUUM on a
// copy of a real file: HERMES_SCRUB_COST=/path/to/copy.db (the file is
// modified). CPU seconds from the process's rusage.
func TestScrubCost(t *testing.T) {
	path := os.Getenv("HERMES_SCRUB_COST")
	if path == "" {
		t.Skip("HERMES_SCRUB_COST not set")
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := t.Context()
	measure := func(what string, f func() error) {
		var r0, r1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
		start := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		wall := time.Since(start)
		syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		cpu := time.Duration(r1.Utime.Nano()+r1.Stime.Nano()-r0.Utime.Nano()-r0.Stime.Nano()) * time.Nanosecond
		t.Logf("%s: wall %v cpu %v", what, wall.Round(time.Millisecond), cpu.Round(time.Millisecond))
	}
	for i := range 2 {
		measure("scrub+checkpoint", func() error {
			res, err := storage.ScrubFreeSpace(ctx, db)
			t.Logf("pass %d: %+v", i, res)
			if err != nil {
				return err
			}
			return storage.CheckpointTruncate(ctx, db)
		})
	}
	if os.Getenv("HERMES_SCRUB_COST_VACUUM") != "" {
		measure("vacuum+checkpoint", func() error {
			if _, err := db.ExecContext(ctx, "VACUUM"); err != nil {
				return err
			}
			return storage.CheckpointTruncate(ctx, db)
		})
	}
}
