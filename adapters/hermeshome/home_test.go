package hermeshome

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Given a gateway.pid naming a live process whose command line cannot be
// read as anything (empty: here an exited child not reaped yet, as a
// process in the middle of an exec also reads), when the home is checked,
// then it is refused as running, not taken for a stale pid.
func TestCheckNotRunningRefusesAPidWithAnEmptyCommandLine(t *testing.T) {
	child := exec.Command("true")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Wait() })
	pid := child.Process.Pid
	// Wait until the child has exited and is a zombie: alive to kill(0),
	// with an empty /proc/<pid>/cmdline.
	for deadline := time.Now().Add(30 * time.Second); ; {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		if fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(fields) > 0 && fields[0] == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child did not exit in 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	home := Home{Dir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(home.Dir, "gateway.pid"), fmt.Appendf(nil, `{"pid": %d, "kind": "hermes-gateway"}`, pid), 0o600); err != nil {
		t.Fatal(err)
	}

	err := home.CheckNotRunning(&Report{})

	if !errors.Is(err, ErrGatewayRunning) {
		t.Fatalf("CheckNotRunning() = %v, want ErrGatewayRunning", err)
	}
}
