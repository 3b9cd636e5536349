package gatewaylock

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// ErrLocked: another live process holds the lock.
var ErrLocked = errors.New("another hermes process holds this home")

// Holder is the PID record written into the lock file.
type Holder struct {
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	Command   string    `json:"command"`
}

// Lock is a held gateway lock.
type Lock struct {
	f    *os.File
	path string
}

// LockedError says who holds the lock.
type LockedError struct {
	Path   string
	Holder Holder
}

func (e *LockedError) Error() string {
	if e.Holder.PID == 0 {
		return fmt.Sprintf("%s: %v", e.Path, ErrLocked)
	}
	return fmt.Sprintf("%s: %v (pid %d, %s, started %s)", e.Path, ErrLocked, e.Holder.PID, e.Holder.Command,
		e.Holder.StartedAt.Format(time.RFC3339))
}

// Unwrap makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Unwrap() error { return ErrLocked }

// Acquire takes the lock at path without waiting and records holder in it.
// It fails with a *LockedError when another process holds it.
func Acquire(path string, holder Holder) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			le := &LockedError{Path: path}
			if data, rerr := os.ReadFile(path); rerr == nil {
				_ = json.Unmarshal(data, &le.Holder)
			}
			return nil, le
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	data, err := json.Marshal(holder)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := writeRecord(recordOf(f), append(data, '\n')); err != nil {
		f.Close()
		return nil, fmt.Errorf("write lock record %s: %w", path, err)
	}
	return &Lock{f: f, path: path}, nil
}

// recordFile is what writing the PID record needs of the lock file.
type recordFile interface {
	Truncate(size int64) error
	WriteAt(b []byte, off int64) (int, error)
	Sync() error
}

// recordOf is the lock file as the PID record is written to it; tests
// substitute a file whose writes fail.
var recordOf = func(f *os.File) recordFile { return f }

// writeRecord replaces the content of f with data, durably. Any failure is
// returned: a lock whose record is lost cannot say who holds the home.
func writeRecord(f recordFile, data []byte) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	return f.Sync()
}

// Release drops the lock. The file stays (removing it would race with a
// process that just opened it).
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
