package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pgtest "hermes/testfixtures/postgres"
)

// binary is the hermes binary built once for the process-level tests.
var binary string

func TestMain(m *testing.M) {
	if os.Getenv(gatewayHelperEnv) != "" {
		os.Exit(m.Run()) // a gateway process of gatewayruns_test.go: no hermes binary needed
	}
	dir, err := os.MkdirTemp("", "hermes-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "hermes")
	build := exec.Command("go", "build", "-o", binary, ".")
	if os.Getenv("HERMES_TEST_RACE") != "" {
		build = exec.Command("go", "build", "-race", "-o", binary, ".")
	}
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build hermes:", err)
		os.Exit(1)
	}
	// pgtest.Main runs the tests and stops the PostgreSQL cluster the
	// multi-node tests started, if any.
	code := pgtest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is a running `hermes serve` child process.
type server struct {
	t      testing.TB
	cmd    *exec.Cmd
	home   string
	addr   string
	stderr *syncBuffer
	done   chan struct{}
	exit   int
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startServer starts hermes serve on home and waits until /readyz is ready.
func startServer(t testing.TB, home string, env []string, args ...string) *server {
	t.Helper()
	return startServerBin(t, binary, home, env, args...)
}

// startServerBin is startServer with another hermes binary (bin).
func startServerBin(t testing.TB, bin, home string, env []string, args ...string) *server {
	t.Helper()
	s := launchServerBin(t, bin, home, env, args...)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-s.done:
			t.Fatalf("hermes serve exited (%d) before ready:\n%s", s.exit, s.stderr.String())
		default:
		}
		resp, err := http.Get("http://" + s.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("hermes serve not ready after 60s:\n%s", s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// launchServer starts hermes serve on home without waiting for anything.
func launchServer(t testing.TB, home string, env []string, args ...string) *server {
	t.Helper()
	return launchServerBin(t, binary, home, env, args...)
}

// launchServerBin is launchServer with another hermes binary (bin).
func launchServerBin(t testing.TB, bin, home string, env []string, args ...string) *server {
	t.Helper()
	s := &server{t: t, home: home, addr: freeAddr(t), stderr: &syncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(bin, append([]string{"serve", "--home", home, "--addr", s.addr}, args...)...)
	s.cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := s.cmd.Wait()
		s.exit = 0
		if ee, ok := err.(*exec.ExitError); ok {
			s.exit = ee.ExitCode()
		}
		close(s.done)
	}()
	t.Cleanup(func() { s.kill() })
	return s
}

func (s *server) kill() {
	if s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
	}
}

// stop sends sig and waits for the exit code.
func (s *server) stop(sig syscall.Signal) int {
	s.t.Helper()
	s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
		return s.exit
	case <-time.After(60 * time.Second):
		s.t.Fatalf("hermes serve did not exit after %v:\n%s", sig, s.stderr.String())
		return -1
	}
}

// request sends a JSON request and decodes the JSON answer into out (when
// not nil).
func (s *server) request(method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, "http://"+s.addr+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, out); err != nil && resp.StatusCode == http.StatusOK {
			return resp.StatusCode, fmt.Errorf("%s %s: decode %q: %w", method, path, data, err)
		}
	}
	return resp.StatusCode, nil
}

// call is request that fails the test on a transport error.
func (s *server) call(method, path string, body any, out any) int {
	s.t.Helper()
	status, err := s.request(method, path, body, out)
	if err != nil {
		s.t.Fatal(err)
	}
	return status
}

// must is call that fails the test unless the status is 200.
func (s *server) must(method, path string, body any, out any) {
	s.t.Helper()
	var raw json.RawMessage
	if status := s.call(method, path, body, &raw); status != http.StatusOK {
		s.t.Fatalf("%s %s = %d %s", method, path, status, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatal(err)
		}
	}
}

// hermes runs the CLI and returns stdout; it fails the test on a non-zero
// exit unless wantCode says otherwise.
func hermes(t *testing.T, wantCode int, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != wantCode {
		t.Fatalf("hermes %s exited %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantCode, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

type entry struct {
	SessionKey         string  `json:"session_key"`
	SessionID          string  `json:"session_id"`
	ResumePending      bool    `json:"resume_pending"`
	ResumeReason       *string `json:"resume_reason"`
	Suspended          bool    `json:"suspended"`
	TotalTokens        int64   `json:"total_tokens"`
	OpenTurnID         *string `json:"open_turn_id"`
	Version            uint64  `json:"version"`
	WasAutoReset       bool    `json:"was_auto_reset"`
	AutoResetReason    *string `json:"auto_reset_reason"`
	PreviousSessionID  *string `json:"previous_session_id"`
	LastResumeMarkedAt *string `json:"last_resume_marked_at"`
}

type resolved struct {
	Entry       entry   `json:"entry"`
	Created     bool    `json:"created"`
	ResetReason *string `json:"reset_reason"`
}
