package hooks_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/adapters/hooks"
)

// The crash test runs this test binary again as a child that runs the hooks
// router (see TestHooksHelperProcess) and SIGKILLs it mid-delivery.
const (
	childEnv      = "HERMES_HOOKS_CHILD"
	childStoreEnv = "HERMES_HOOKS_STORE"
	childDirEnv   = "HERMES_HOOKS_DIR"
	childURLEnv   = "HERMES_HOOKS_URL"
	childBatch    = 8
)

// TestHooksHelperProcess is the child side of TestRouter_CrashResumes; run
// directly it does nothing.
func TestHooksHelperProcess(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("child process of TestRouter_CrashResumes")
	}
	store, err := sqlite.Open(os.Getenv(childStoreEnv), sqlite.WithReadOnly(), sqlite.WithPollInterval(5*time.Millisecond))
	if err != nil {
		os.Stderr.WriteString("child: " + err.Error() + "\n")
		os.Exit(1)
	}
	r, err := hooks.New(store, hooks.Config{
		Dir:       os.Getenv(childDirEnv),
		Webhooks:  []hooks.WebhookConfig{{Name: "rcv", URL: os.Getenv(childURLEnv), Secret: secret, Backoff: time.Millisecond}},
		BatchSize: childBatch,
	})
	if err != nil {
		os.Stderr.WriteString("child: " + err.Error() + "\n")
		os.Exit(1)
	}
	// Runs until the parent kills it.
	err = r.Run(context.Background())
	os.Stderr.WriteString("child: Run returned: " + errString(err) + "\n")
	os.Exit(2)
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func startChild(t *testing.T, store, dir, url string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHooksHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1", childStoreEnv+"="+store, childDirEnv+"="+dir, childURLEnv+"="+url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, &stderr
}

// TestRouter_CrashResumes runs the router in a real process, SIGKILLs it
// while a delivery is in flight, restarts it on the same checkpoint and
// checks the receiver saw every event at least once, and that the second
// run started from the checkpoint (only events after it came twice).
func TestRouter_CrashResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	storePath := filepath.Join(dir, "events.db")
	hooksDir := filepath.Join(dir, "hooks")
	store := openStore(t, storePath)
	ids := appendEvents(t, store, 120)

	const blockAt = 40 // the request that hangs until the child is dead
	var run atomic.Int32
	run.Store(1)
	var requests atomic.Int32
	reached := make(chan struct{})
	release := make(chan struct{})
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	runOf := map[string][]int32{} // event id → the runs that delivered it
	var mu sync.Mutex
	rcv := newReceiver(t, secret, func(id string, _ int) int {
		mu.Lock()
		runOf[id] = append(runOf[id], run.Load())
		mu.Unlock()
		if requests.Add(1) == blockAt {
			close(reached)
			<-release
		}
		return 200
	})

	child, stderr := startChild(t, storePath, hooksDir, rcv.srv.URL)
	select {
	case <-reached:
	case <-time.After(waitLimit):
		child.Process.Kill()
		t.Fatalf("first child never reached request %d; stderr:\n%s", blockAt, stderr)
	}
	if err := child.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	child.Wait()
	releaseOnce.Do(func() { close(release) })

	cp1, ok, err := hooks.ReadCheckpoint(hooksDir)
	if err != nil || !ok {
		t.Fatalf("checkpoint after the kill = %d, %v, %v; want one", cp1, ok, err)
	}
	if cp1 == 0 || cp1 >= blockAt {
		t.Fatalf("checkpoint after the kill = %d, want in (0, %d): delivered batches, not the one in flight", cp1, blockAt)
	}

	// More events while no router runs, then the restart.
	ids = append(ids, appendEvents(t, store, 15)...)
	head, _ := store.Head(context.Background())
	run.Store(2)
	child2, stderr2 := startChild(t, storePath, hooksDir, rcv.srv.URL)
	waitFor(t, "the second child to deliver everything", func() bool {
		cp, _, _ := hooks.ReadCheckpoint(hooksDir)
		return hasAll(acceptedIDs(rcv), ids) && cp == head
	})
	child2.Process.Kill()
	child2.Wait()
	if t.Failed() {
		t.Logf("second child stderr:\n%s", stderr2)
	}

	envs, err := store.ReadAll(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	dups := 0
	for _, env := range envs {
		runs := runOf[env.ID]
		if len(runs) == 0 {
			t.Errorf("event %s (position %d) never delivered", env.ID, env.Position)
		}
		if len(runs) > 1 {
			dups++
		}
		for _, r := range runs {
			if r == 2 && env.Position <= cp1 {
				t.Errorf("event at position %d redelivered by the restarted router, whose checkpoint was %d", env.Position, cp1)
			}
		}
	}
	if dups == 0 {
		t.Errorf("no event was delivered twice, but the one in flight at the kill should have been")
	}
	t.Logf("checkpoint at kill %d, head %d, duplicates %d", cp1, head, dups)
}
