package kurrentdb_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"hermes/adapters/eventstore/kurrentdb"
	"hermes/events"
	emulator "hermes/testfixtures/kurrentdb"
	"hermes/testfixtures/storetest"

	"github.com/google/uuid"
)

// startEmulator starts an emulator for one test. The contract suite appends
// two 1 MiB events at once, so the append limit is raised the way a
// deployment raises KurrentDB's --max-append-size.
func startEmulator(t testing.TB, opts ...emulator.Option) *emulator.Server {
	t.Helper()
	srv, err := emulator.Start(append([]emulator.Option{emulator.WithMaxAppendSize(8 << 20)}, opts...)...)
	if err != nil {
		t.Fatalf("emulator.Start() error = %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func open(t testing.TB, url string, opts ...kurrentdb.Option) *kurrentdb.Store {
	t.Helper()
	s, err := kurrentdb.Open(t.Context(), url, opts...)
	if err != nil {
		t.Fatalf("Open(%s) error = %v", url, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestContractOnEmulator runs the store contract suite on the adapter
// against the KurrentDB emulator (not a real server).
func TestContractOnEmulator(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store {
		return open(t, startEmulator(t).URL())
	})
}

// TestContractOnKurrentDB runs the contract suite against a real server
// named by HERMES_TEST_KURRENTDB_URL (for example
// esdb://localhost:2113?tls=false). Each subtest works in its own stream
// namespace, so the server needs no cleaning between runs; it must allow
// appends of 2 MiB (--max-append-size=8388608).
func TestContractOnKurrentDB(t *testing.T) {
	url := os.Getenv("HERMES_TEST_KURRENTDB_URL")
	if url == "" {
		t.Skip("HERMES_TEST_KURRENTDB_URL is not set: no real KurrentDB to test against (see README, Running on KurrentDB)")
	}
	run := uuid.NewString()[:8]
	n := 0
	storetest.Run(t, func(t *testing.T) events.Store {
		n++
		return open(t, url, kurrentdb.WithNamespace(fmt.Sprintf("t%s-%d.", run, n)))
	})
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url     string
		wantErr bool
		tls     bool
		user    string
	}{
		{url: "esdb://localhost:2113?tls=false"},
		{url: "kurrentdb://localhost:2113?tls=false"},
		{url: "kurrent://localhost:2113?tls=false"},
		{url: "kurrentdb://admin:changeit@localhost:2113", tls: true, user: "admin"},
		{url: "esdb://admin:changeit@localhost:2113?tls=true&tlsVerifyCert=false", tls: true, user: "admin"},
		{url: "http://localhost:2113", wantErr: true},
	} {
		cfg, err := kurrentdb.ParseURL(tc.url)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseURL(%s) error = %v, want error %v", tc.url, err, tc.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if cfg.DisableTLS == tc.tls || cfg.Username != tc.user {
			t.Errorf("ParseURL(%s) = tls %v user %q, want tls %v user %q", tc.url, !cfg.DisableTLS, cfg.Username, tc.tls, tc.user)
		}
	}
}

func TestOpenUnreachable(t *testing.T) {
	srv := startEmulator(t)
	url := srv.URL()
	srv.Stop()
	start := time.Now()
	if _, err := kurrentdb.Open(t.Context(), url+"&maxDiscoverAttempts=2"); err == nil {
		t.Fatalf("Open(%s) of a stopped server error = nil, want an error", url)
	}
	t.Logf("Open of a stopped server failed after %v", time.Since(start))
}
