package hermeshome

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Home is a Python Hermes home directory.
type Home struct{ Dir string }

// Paths of the files the import reads.
func (h Home) SessionsJSON() string      { return filepath.Join(h.Dir, "sessions", "sessions.json") }
func (h Home) StateDB() string           { return filepath.Join(h.Dir, "state.db") }
func (h Home) RestartCounts() string     { return filepath.Join(h.Dir, ".restart_failure_counts") }
func (h Home) CleanShutdownPath() string { return filepath.Join(h.Dir, ".clean_shutdown") }
func (h Home) GatewayLock() string       { return filepath.Join(h.Dir, "gateway.lock") }
func (h Home) GatewayPID() string        { return filepath.Join(h.Dir, "gateway.pid") }

// ErrGatewayRunning: a live Hermes gateway holds the home; importing from
// it would read a state.db and a sessions.json that are changing.
var ErrGatewayRunning = errors.New("a Hermes gateway is running on this home")

// CheckNotRunning refuses a home a running gateway holds: its runtime lock
// (an flock on gateway.lock, released by the kernel when the process dies)
// is taken, or gateway.pid names a live process that looks like a gateway.
// A stale gateway.pid (dead process, or a pid reused by something else)
// is reported and ignored. Nothing is created or changed in the home.
func (h Home) CheckNotRunning(rep *Report) error {
	if f, err := os.OpenFile(h.GatewayLock(), os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%s is locked: %w (stop it first)", h.GatewayLock(), ErrGatewayRunning)
		}
	}
	data, err := readBounded(h.GatewayPID(), maxPIDFileBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", h.GatewayPID(), err)
	}
	var rec struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(data, &rec); err != nil || rec.PID <= 0 {
		// Old Hermes wrote the bare number.
		if _, serr := fmt.Sscan(strings.TrimSpace(string(data)), &rec.PID); serr != nil || rec.PID <= 0 {
			rep.Add(Info, "gateway.pid", "unreadable pid file ignored")
			return nil
		}
	}
	if rec.PID == os.Getpid() || !alive(rec.PID) {
		rep.Add(Info, "gateway.pid", "stale: pid %d is not running", rec.PID)
		return nil
	}
	// An empty command line (a process in the middle of an exec, or one
	// that exited and was not reaped yet) says nothing about what runs
	// there: like an unreadable one, it does not make the pid stale.
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", rec.PID))
	if err == nil && len(cmdline) > 0 && !looksLikeGateway(strings.ReplaceAll(string(cmdline), "\x00", " ")) {
		rep.Add(Info, "gateway.pid", "stale: pid %d is running but is not a Hermes gateway", rec.PID)
		return nil
	}
	return fmt.Errorf("%s names live process %d: %w (stop it first)", h.GatewayPID(), rec.PID, ErrGatewayRunning)
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// looksLikeGateway is Hermes' own test of a gateway command line.
func looksLikeGateway(cmdline string) bool {
	for _, p := range []string{"hermes_cli.main gateway", "hermes_cli/main.py gateway", "hermes gateway", "hermes-gateway", "gateway/run.py"} {
		if strings.Contains(cmdline, p) {
			return true
		}
	}
	return false
}

// ReadRestartCounts reads .restart_failure_counts: session key → count.
// A missing file is no counts. An unreadable file is reported and counts
// as none, as in Hermes. Era C's object values ({"count": N, ...}) give
// their count.
func (h Home) ReadRestartCounts(rep *Report) map[string]int {
	data, err := readBounded(h.RestartCounts(), maxCountsBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		rep.Add(Skipped, ".restart_failure_counts", "unreadable (%v): no counts imported", err)
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(markNonFinite(data), &raw); err != nil {
		rep.Add(Skipped, ".restart_failure_counts", "not a JSON object: no counts imported (Hermes counts it as {})")
		return nil
	}
	out := map[string]int{}
	for key, v := range raw {
		var obj struct {
			Count json.RawMessage `json:"count"`
		}
		if json.Unmarshal(v, &obj) == nil && obj.Count != nil {
			v = obj.Count
		}
		var f float64
		if err := json.Unmarshal(v, &f); err != nil || math.IsNaN(f) {
			rep.Add(Clamped, ".restart_failure_counts "+printable(key), "count is not a number: 0")
			continue
		}
		switch {
		case f < 0:
			rep.Add(Clamped, ".restart_failure_counts "+printable(key), "count %v is negative: 0", f)
			continue
		case f > 1000:
			rep.Add(Clamped, ".restart_failure_counts "+printable(key), "count %v is out of range: 1000", f)
			f = 1000
		}
		if f >= 1 {
			out[key] = int(f)
		}
	}
	return out
}

// HasCleanShutdown reports whether the last Hermes run left .clean_shutdown.
func (h Home) HasCleanShutdown() bool {
	_, err := os.Stat(h.CleanShutdownPath())
	return err == nil
}
