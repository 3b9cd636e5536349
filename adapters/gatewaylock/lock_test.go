package gatewaylock_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"hermes/adapters/gatewaylock"
)

func TestAcquire_OneHolderAtATime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.lock")
	first, err := gatewaylock.Acquire(path, gatewaylock.Holder{PID: 111, Command: "hermes serve", StartedAt: time.Unix(1700000000, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = gatewaylock.Acquire(path, gatewaylock.Holder{PID: 222})
	var le *gatewaylock.LockedError
	if !errors.Is(err, gatewaylock.ErrLocked) || !errors.As(err, &le) || le.Holder.PID != 111 {
		t.Fatalf("second Acquire = %v, want ErrLocked naming pid 111", err)
	}
	if !strings.Contains(err.Error(), "pid 111") {
		t.Fatalf("error %q does not name the holder", err)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Fatalf("lock file mode = %v, want 0600", info.Mode().Perm())
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := gatewaylock.Acquire(path, gatewaylock.Holder{PID: 333})
	if err != nil {
		t.Fatalf("Acquire after Release = %v", err)
	}
	again.Release()
}

// TestAcquire_ReleasedWhenTheHolderIsKilled: a SIGKILLed holder leaves no
// stale lock behind.
func TestAcquire_ReleasedWhenTheHolderIsKilled(t *testing.T) {
	if os.Getenv("HERMES_LOCK_CHILD") != "" {
		return
	}
	path := filepath.Join(t.TempDir(), "gateway.lock")
	cmd := exec.Command("flock", "-o", "-x", path, "sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	if err := cmd.Start(); err != nil {
		t.Skipf("flock(1) unavailable: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := gatewaylock.Acquire(path, gatewaylock.Holder{PID: 1})
		if errors.Is(err, gatewaylock.ErrLocked) {
			break
		}
		if err == nil {
			l.Release()
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the child never took the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	l, err := gatewaylock.Acquire(path, gatewaylock.Holder{PID: 2})
	if err != nil {
		t.Fatalf("Acquire after the holder was killed = %v", err)
	}
	l.Release()
}
