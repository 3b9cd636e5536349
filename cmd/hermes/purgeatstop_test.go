package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCleanStopPurgesSoTheStartNeedNot: given a clean stop, the stop has
// purged every file and left its mark; when hermes starts again, the start
// consumes the mark (and skips its own purge); after a SIGKILL no mark is
// left, so the start after a crash purges.
func TestCleanStopPurgesSoTheStartNeedNot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	home := t.TempDir()
	mark := filepath.Join(home, "hermes", "purged_at_stop")

	s := startServer(t, home, nil)
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("hermes serve exited %d:\n%s", code, s.stderr.String())
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("after a clean stop: %v (want the purge mark)", err)
	}

	s = startServer(t, home, nil)
	if _, err := os.Stat(mark); !os.IsNotExist(err) {
		t.Errorf("after a start: mark still there (%v), want it consumed", err)
	}
	if code := s.stop(syscall.SIGKILL); code == 0 {
		t.Fatalf("SIGKILL: exit code 0")
	}
	if _, err := os.Stat(mark); !os.IsNotExist(err) {
		t.Errorf("after a crash: a purge mark exists (%v); the next start must purge", err)
	}
}
