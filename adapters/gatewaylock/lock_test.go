package gatewaylock_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
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
// stale lock behind. The holder is this test binary re-executed: one
// process that takes the lock itself with Acquire (no fork in between, as
// flock(1) has), says so on stdout, and waits. Once it is killed and
// reaped its descriptors are closed, so the lock must be free at once:
// nothing is retried or timed.
func TestAcquire_ReleasedWhenTheHolderIsKilled(t *testing.T) {
	if path := os.Getenv(lockChildEnv); path != "" {
		holdLockAndWait(path)
		return
	}
	path := filepath.Join(t.TempDir(), "gateway.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestAcquire_ReleasedWhenTheHolderIsKilled$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // closed by the cleanup: the holder exits
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	t.Cleanup(func() {
		stdin.Close()
		if !waited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})

	line, err := bufio.NewReader(stdout).ReadString('\n')
	if want := fmt.Sprintf("locked %d\n", cmd.Process.Pid); err != nil || line != want {
		t.Fatalf("holder said %q, %v; want %q", line, err, want)
	}
	_, err = gatewaylock.Acquire(path, gatewaylock.Holder{PID: 1})
	var le *gatewaylock.LockedError
	if !errors.As(err, &le) || le.Holder.PID != cmd.Process.Pid {
		t.Fatalf("Acquire while the holder runs = %v, want ErrLocked naming pid %d", err, cmd.Process.Pid)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	waited = true
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("holder ended with %v, want killed by SIGKILL", err)
	}
	l, err := gatewaylock.Acquire(path, gatewaylock.Holder{PID: 2})
	if err != nil {
		t.Fatalf("Acquire after the holder was killed = %v", err)
	}
	l.Release()
}

// lockChildEnv names the lock file the re-executed test binary holds.
const lockChildEnv = "HERMES_LOCK_CHILD"

// holdLockAndWait is the holder process: it takes the lock at path,
// reports "locked <pid>" and keeps the lock until it is killed or its
// stdin is closed.
func holdLockAndWait(path string) {
	l, err := gatewaylock.Acquire(path, gatewaylock.Holder{PID: os.Getpid(), Command: "lock holder"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		os.Exit(2)
	}
	fmt.Printf("locked %d\n", os.Getpid())
	io.Copy(io.Discard, os.Stdin)
	l.Release()
	os.Exit(0)
}
