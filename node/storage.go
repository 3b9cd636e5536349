package node

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"hermes/events"
	"hermes/projections"
	"hermes/projections/storage"
)

// errStorageNotReady: a read model cannot write at start, so recovery waits.
var errStorageNotReady = errors.New("a read model cannot write: storage full")

// recoveryRetry bounds the waits between the attempts of a recovery
// deferred by a full disk.
var recoveryRetry = projections.Backoff{Min: time.Second, Max: 30 * time.Second, After: time.After}

// retryableStorage reports whether a failed recovery is worth retrying once
// space returns: the log refused the write, or a read model cannot write.
func retryableStorage(err error, runner *projections.Runner) bool {
	return errors.Is(err, events.ErrStorageFull) || errors.Is(err, errStorageNotReady) || runner.StorageError() != nil
}

// recoverLater retries startup recovery, with backoff, until storage takes
// writes again, then turns ready. Meanwhile the server serves reads and
// refuses writes (507). It returns nil when ready or when ctx ends, and the
// error of a recovery that failed for another reason.
func (rt *runtime) recoverLater(ctx context.Context, bg *duties) error {
	wait := recoveryRetry.Min
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-recoveryRetry.After(wait):
		}
		wait = min(wait*2, recoveryRetry.Max)
		if rt.runner.StorageError() != nil {
			continue
		}
		err := rt.recover(ctx)
		if err == nil {
			rt.log.Info("storage takes writes again: recovery done, ready")
			return rt.becomeReady(bg)
		}
		if ctx.Err() != nil {
			return nil
		}
		if !retryableStorage(err, rt.runner) {
			return err
		}
		rt.log.Warn("recovery still cannot write: storage full", "err", err, "retry_in", wait)
	}
}

// reserveBytes is the size of the space reserve: enough for the shared
// memory files (32 KiB each) and first pages SQLite needs to open the log
// and the read models on a full disk.
const reserveBytes = 1 << 20

// spaceReserve is <home>/hermes/space.reserve, a file of zeros kept while
// there is room and deleted when a start meets a full disk: SQLite cannot
// open a WAL database without room for its -shm, and a start that cannot
// open its files cannot serve reads.
type spaceReserve struct {
	path string
	log  *slog.Logger
}

// newSpaceReserve makes sure the reserve exists when there is room for it.
func newSpaceReserve(h Home, log *slog.Logger) spaceReserve {
	r := spaceReserve{path: h.SpaceReserve(), log: log}
	if st, err := os.Stat(r.path); err == nil && st.Size() == reserveBytes {
		return r
	}
	if err := writeReserve(r.path); err != nil {
		os.Remove(r.path)
		log.Warn("no room for the space reserve", "file", r.path, "err", err)
	}
	return r
}

func writeReserve(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(make([]byte, reserveBytes)); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// retry runs open; when it fails for want of space and the reserve is
// there, it deletes the reserve and runs open once more.
func (r spaceReserve) retry(open func() error) error {
	err := open()
	if err == nil || !storage.IsFull(err) {
		return err
	}
	if rmErr := os.Remove(r.path); rmErr != nil {
		return err
	}
	r.log.Warn("storage full at start: deleted the space reserve to open the files; writes stay refused until space is freed",
		"file", r.path, "err", err)
	return open()
}
