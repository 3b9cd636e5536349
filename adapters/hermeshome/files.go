package hermeshome

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Bounds on the files the import reads whole. A sessions.json of 256 MiB
// holds some 250,000 lanes; Hermes' own files are far smaller.
const (
	MaxSessionsJSONBytes = 256 << 20
	maxCountsBytes       = 64 << 20 // .restart_failure_counts
	maxPIDFileBytes      = 1 << 20  // gateway.pid
)

// ErrUnsafeFile: a file the import would read is not a regular file inside
// the source home (a device, a FIFO, a directory, a symlink out of the
// home) or is larger than its bound. Nothing is read from it.
var ErrUnsafeFile = errors.New("refused")

// CheckFiles refuses a home whose files the import reads, or moves aside,
// are not what Hermes writes there: each of sessions/, sessions.json,
// state.db (with its -wal and -shm), .restart_failure_counts,
// .clean_shutdown, gateway.pid, gateway.lock and config.yaml that exists must be a
// regular file (sessions/ a directory) that stays inside the home when
// its symlinks are followed. So no device, FIFO or file elsewhere on the
// machine is read, blocked on, imported or renamed.
func (h Home) CheckFiles() error {
	root, err := filepath.EvalSymlinks(h.Dir)
	if err != nil {
		return fmt.Errorf("source home %s: %w", h.Dir, err)
	}
	dir := filepath.Join(h.Dir, "sessions")
	if err := checkInside(root, dir, true); err != nil {
		return err
	}
	for _, p := range []string{h.SessionsJSON(), h.StateDB(), h.StateDB() + "-wal", h.StateDB() + "-shm",
		h.RestartCounts(), h.CleanShutdownPath(), h.GatewayPID(), h.GatewayLock(), h.ConfigYAML()} {
		if err := checkInside(root, p, false); err != nil {
			return err
		}
	}
	return nil
}

// checkInside checks that path, if it exists, resolves to a regular file
// (a directory when dir) under root.
func checkInside(root, path string, dir bool) error {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("%w: %s is a symlink that leads nowhere (%v)", ErrUnsafeFile, path, err)
	}
	if rel, err := filepath.Rel(root, resolved); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%w: %s leads out of the home, to %s: the import reads only the home's own files", ErrUnsafeFile, path, resolved)
	}
	st, err := os.Stat(resolved)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case dir && !st.IsDir():
		return fmt.Errorf("%w: %s is not a directory (%s)", ErrUnsafeFile, path, st.Mode().Type())
	case !dir && !st.Mode().IsRegular():
		return fmt.Errorf("%w: %s is not a regular file (%s)", ErrUnsafeFile, path, describeMode(st.Mode()))
	}
	return nil
}

func describeMode(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}

// readBounded reads a regular file of at most max bytes. It never blocks
// on a FIFO (opened non-blocking, then refused) and never reads more than
// max+1 bytes of a file that grows meanwhile.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file (%s)", ErrUnsafeFile, path, describeMode(st.Mode()))
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%w: %s is %d bytes, more than the %d a Hermes home holds there", ErrUnsafeFile, path, st.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: %s grew past %d bytes while it was read", ErrUnsafeFile, path, max)
	}
	return data, nil
}
