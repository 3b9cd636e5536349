package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"hermes/adapters/config"
)

// testNode is a node running inside the test process on a home, serving
// loopback HTTP, with its log lines in a buffer.
type testNode struct {
	t      testing.TB
	home   string
	addr   string
	stderr *syncBuffer
	node   *Node
	cancel context.CancelFunc
	done   chan struct{}
	err    error
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

// startNode opens a node on home and runs it until stop or the end of the
// test, and waits until /readyz is ready. configure, when not nil, may set
// the node's test hooks before it runs.
func startNode(t testing.TB, home string, configure func(*Node)) *testNode {
	t.Helper()
	s := &testNode{t: t, home: home, addr: freeAddr(t), stderr: &syncBuffer{}, done: make(chan struct{})}
	cfg, err := config.Load(config.LoadOptions{Home: home, Flags: map[string]string{"api.addr": s.addr}})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(s.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	n, err := Open(context.Background(), Config{Settings: cfg, Home: Home{Dir: home}, Log: log})
	if err != nil {
		t.Fatalf("open a node on %s: %v\n%s", home, err, s.stderr.String())
	}
	if configure != nil {
		configure(n)
	}
	s.node = n
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		defer n.Close()
		s.err = n.Run(ctx)
	}()
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("node: %v\n%s", err, s.stderr.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-s.done:
			t.Fatalf("the node stopped before ready: %v\n%s", s.err, s.stderr.String())
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
			t.Fatalf("the node is not ready after 60s:\n%s", s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop stops the node gracefully (as SIGTERM does), waits until it is
// closed and returns what Run returned; a second call returns the same.
func (s *testNode) stop() error {
	s.cancel()
	<-s.done
	return s.err
}

// request sends a JSON request and decodes the JSON answer into out (when
// not nil).
func (s *testNode) request(method, path string, body any, out any) (int, error) {
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
func (s *testNode) call(method, path string, body any, out any) int {
	s.t.Helper()
	status, err := s.request(method, path, body, out)
	if err != nil {
		s.t.Fatal(err)
	}
	return status
}

// must is call that fails the test unless the status is 200.
func (s *testNode) must(method, path string, body any, out any) {
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

// resolved is the answer of POST /v1/sessions/resolve, as far as the tests
// read it.
type resolved struct {
	Entry struct {
		SessionKey string `json:"session_key"`
		SessionID  string `json:"session_id"`
	} `json:"entry"`
}
