package gatewaylock

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// failingRecord is a lock file whose one named operation fails.
type failingRecord struct {
	*os.File
	fail string
}

var errDiskFull = errors.New("no space left on device (test)")

func (f failingRecord) Truncate(size int64) error {
	if f.fail == "truncate" {
		return errDiskFull
	}
	return f.File.Truncate(size)
}

func (f failingRecord) WriteAt(b []byte, off int64) (int, error) {
	if f.fail == "write" {
		return 0, errDiskFull
	}
	return f.File.WriteAt(b, off)
}

func (f failingRecord) Sync() error {
	if f.fail == "sync" {
		return errDiskFull
	}
	return f.File.Sync()
}

// TestAcquire_ReportsALostRecord: when the PID record cannot be truncated,
// written or synced, Acquire fails (and does not keep the lock) instead of
// reporting a lock that cannot say who holds it.
func TestAcquire_ReportsALostRecord(t *testing.T) {
	for _, op := range []string{"truncate", "write", "sync"} {
		t.Run(op, func(t *testing.T) {
			orig := recordOf
			recordOf = func(f *os.File) recordFile { return failingRecord{File: f, fail: op} }
			t.Cleanup(func() { recordOf = orig })

			path := filepath.Join(t.TempDir(), "gateway.lock")
			l, err := Acquire(path, Holder{PID: 111, Command: "hermes serve"})
			if err == nil {
				l.Release()
				t.Fatalf("Acquire with a failing %s = nil error, want the failure reported", op)
			}
			if !errors.Is(err, errDiskFull) || !strings.Contains(err.Error(), "write lock record") {
				t.Fatalf("Acquire with a failing %s = %v, want a lock record error wrapping %v", op, err, errDiskFull)
			}

			recordOf = orig
			again, err := Acquire(path, Holder{PID: 222})
			if err != nil {
				t.Fatalf("Acquire after a failed one = %v, want nil (the lock must not be kept)", err)
			}
			again.Release()
		})
	}
}
