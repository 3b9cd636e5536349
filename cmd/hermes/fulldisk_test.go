package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"hermes/events"
)

// mountTmpfs mounts a tmpfs of size at a new directory, or skips the test
// saying why (no root, or a sandbox that forbids mounting).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a %s tmpfs here (needs root and a sandbox that allows mount): %v: %s", size, err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// startServerAnyReadiness starts hermes serve on home and waits until
// /readyz answers, ready or not.
func startServerAnyReadiness(t *testing.T, home string) (*server, int, string) {
	t.Helper()
	s := &server{t: t, home: home, addr: freeAddr(t), stderr: &syncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(binary, "serve", "--home", home, "--addr", s.addr)
	s.cmd.Env = append(os.Environ(), "NO_COLOR=1")
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := s.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			s.exit = ee.ExitCode()
		}
		close(s.done)
	}()
	t.Cleanup(s.kill)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-s.done:
			t.Fatalf("hermes serve exited (%d):\n%s", s.exit, s.stderr.String())
		default:
		}
		var body map[string]string
		if status, err := s.request("GET", "/readyz", nil, &body); err == nil {
			return s, status, body["status"]
		}
		if time.Now().After(deadline) {
			t.Fatalf("hermes serve does not answer /readyz after 60s:\n%s", s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRealFullDisk runs hermes on a 12 MiB tmpfs and appends until the
// disk is full: the write is refused with 507 and the process stays up,
// serving reads; a restart with the disk still full serves reads and
// refuses writes; once space is freed, writes succeed and the server turns
// ready without a restart, with every acknowledged message kept and the
// read models matching a rebuild.
func TestRealFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and mounts a tmpfs")
	}
	mnt := mountTmpfs(t, "12m")
	home := filepath.Join(mnt, "home")
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, home, nil)
	var r resolved
	s.must("POST", "/v1/sessions/resolve", map[string]any{"source": map[string]any{"platform": "telegram", "chat_id": "full", "chat_type": "dm"}}, &r)
	msgs := "/v1/transcripts/" + r.Entry.SessionID + "/messages"
	content := strings.Repeat("disk ", 3000)
	acked := 0
	full := false
	for i := 0; i < 5000 && !full; i++ {
		var body map[string]any
		status := s.call("POST", msgs, map[string]any{"role": "user", "content": fmt.Sprintf("%d %s", i, content)}, &body)
		switch status {
		case http.StatusOK:
			acked++
		case http.StatusInsufficientStorage:
			full = true
		default:
			t.Fatalf("append %d = %d %v\n%s", i, status, body, s.stderr.String())
		}
	}
	if !full {
		t.Fatal("the 12 MiB tmpfs never filled")
	}
	t.Logf("%d messages acknowledged before the disk was full", acked)
	checkFullButServing := func(s *server) {
		t.Helper()
		// At a start, /readyz says starting until recovery met the full
		// disk (a bounded wait).
		deadline := time.Now().Add(60 * time.Second)
		for {
			var ready map[string]string
			status := s.call("GET", "/readyz", nil, &ready)
			if status == http.StatusServiceUnavailable && ready["status"] == "storage_full" {
				break
			}
			if (status != http.StatusServiceUnavailable || ready["status"] != "starting") || time.Now().After(deadline) {
				t.Fatalf("/readyz = %d %v, want 503 storage_full\n%s", status, ready, s.stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		var got struct {
			Messages []map[string]any `json:"messages"`
		}
		s.must("GET", msgs, nil, &got)
		if len(got.Messages) < acked {
			t.Fatalf("%d messages served, %d acknowledged", len(got.Messages), acked)
		}
		if status := s.call("POST", msgs, map[string]any{"role": "user", "content": "while full"}, nil); status != http.StatusInsufficientStorage {
			t.Fatalf("append while full = %d, want 507", status)
		}
	}
	checkFullButServing(s)
	select {
	case <-s.done:
		t.Fatalf("hermes serve exited on a full disk:\n%s", s.stderr.String())
	default:
	}
	s.stop(syscall.SIGTERM)

	// A start with the disk still full serves reads and refuses writes
	// (deleting the space reserve if it cannot open its files otherwise).
	s2, status, ready := startServerAnyReadiness(t, home)
	if strings.Contains(s2.stderr.String(), "deleted the space reserve") {
		t.Log("the start deleted the space reserve to open its files")
	}
	if status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz at a start on a full disk = %d %s\n%s", status, ready, s2.stderr.String())
	}
	select {
	case <-s2.done:
		t.Fatalf("exited %d:\n%s", s2.exit, s2.stderr.String())
	default:
	}
	checkFullButServing(s2)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for s2.call("POST", msgs, map[string]any{"role": "user", "content": "after"}, nil) != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("writes still refused 90s after space was freed:\n%s", s2.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		var body map[string]string
		if s2.call("GET", "/readyz", nil, &body) == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready 90s after space was freed: %v\n%s", body, s2.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code := s2.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("stop = %d\n%s", code, s2.stderr.String())
	}
	out, _ := hermes(t, 0, "projections", "verify", "--home", home)
	if !strings.Contains(out, "ok") {
		t.Fatalf("verify: %s", out)
	}
	n := 0
	for _, e := range readLog(t, home) {
		if e.Type == events.TypeMessageAppended {
			n++
		}
	}
	if n < acked+1 {
		t.Fatalf("%d messages in the log, %d acknowledged (+1 after)", n, acked)
	}
}
