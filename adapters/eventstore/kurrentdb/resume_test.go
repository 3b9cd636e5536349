package kurrentdb_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"hermes/adapters/eventstore/kurrentdb"
	"hermes/events"
	emulator "hermes/testfixtures/kurrentdb"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

func touched(stream, name string) []events.Proposed {
	n := int64(len(name))
	return []events.Proposed{{
		ID:       uuid.NewSHA1(uuid.NameSpaceOID, []byte(stream+"/"+name)).String(),
		Event:    events.Touched{LastPromptTokens: &n, At: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)},
		Metadata: events.Metadata{SchemaVersion: events.SchemaVersionOf(events.TypeTouched), Command: "touch"},
	}}
}

func identities(envs []events.Envelope) []string {
	out := make([]string, len(envs))
	for i, e := range envs {
		out[i] = fmt.Sprintf("%d %s@%d %s", e.Position, e.Stream, e.Version, e.ID)
	}
	return out
}

// TestSubscriptionResumesAfterRestart restarts the emulator twice while a
// subscription is mid-stream and writers keep appending: the subscription
// must resubscribe by itself and deliver every event once, in order.
func TestSubscriptionResumesAfterRestart(t *testing.T) {
	srv := startEmulator(t)
	s := open(t, srv.URL())
	ctx := t.Context()
	for i := range 40 {
		st := events.LaneStream(fmt.Sprintf("k%d", i%4))
		if _, err := s.Append(ctx, st, events.AnyVersion(), touched(st, fmt.Sprint("pre", i))); err != nil {
			t.Fatalf("Append error = %v", err)
		}
	}
	sub, err := s.Subscribe(ctx, 0)
	if err != nil {
		t.Fatalf("Subscribe error = %v", err)
	}
	t.Cleanup(sub.Close)

	var got []events.Envelope
	receive := func(n int) {
		t.Helper()
		limit := time.After(60 * time.Second)
		for len(got) < n {
			select {
			case e, ok := <-sub.Events():
				if !ok {
					t.Fatalf("subscription ended after %d events: %v", len(got), sub.Err())
				}
				got = append(got, e)
			case <-limit:
				t.Fatalf("subscription stuck at %d events, want %d", len(got), n)
			}
		}
	}
	receive(20)

	const writes = 120
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	progress := make(chan int, writes)
	wg.Go(func() {
		for i := range writes {
			st := events.LaneStream(fmt.Sprintf("w%d", i%3))
			if _, err := s.Append(ctx, st, events.AnyVersion(), touched(st, fmt.Sprint("live", i))); err != nil {
				errs <- err
				return
			}
			progress <- i
		}
	})
	for restart := range 2 {
		for i := range progress {
			if i >= 30+40*restart {
				break
			}
		}
		if err := srv.Restart(); err != nil {
			t.Fatalf("Restart() error = %v", err)
		}
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatalf("Append across restarts error = %v", err)
	}

	var all []events.Envelope
	var after uint64
	for {
		page, err := s.ReadAll(ctx, after, 100)
		if err != nil {
			t.Fatalf("ReadAll error = %v", err)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, page...)
		after = page[len(page)-1].Position
	}
	if len(all) != 40+writes {
		t.Fatalf("ReadAll: %d events, want %d", len(all), 40+writes)
	}
	receive(len(all))
	if diff := cmp.Diff(identities(all), identities(got)); diff != "" {
		t.Errorf("subscription across restarts differs from ReadAll (-want +got):\n%s", diff)
	}
	if n := srv.Subscriptions(); n < 3 {
		t.Errorf("emulator saw %d subscriptions, want at least 3 (one, then one after each restart)", n)
	}
	select {
	case e, ok := <-sub.Events():
		if ok {
			t.Errorf("subscription delivered %s beyond the log", identities([]events.Envelope{e}))
		}
	case <-time.After(100 * time.Millisecond):
	}
}

// selfSigned makes a certificate for 127.0.0.1 and writes its PEM to dir.
func selfSigned(t *testing.T, dir string) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kurrentdb-emulator"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, caFile
}

// TestTLSAndCredentials connects over TLS with credentials taken from the
// connection string, and is refused with wrong ones.
func TestTLSAndCredentials(t *testing.T) {
	cert, caFile := selfSigned(t, t.TempDir())
	srv := startEmulator(t, emulator.WithTLS(cert, "admin", "changeit"))
	for _, tc := range []struct {
		name, url string
		wantErr   bool
	}{
		{"CA file", fmt.Sprintf("esdb://admin:changeit@%s?tls=true&tlsCAFile=%s", srv.Addr(), caFile), false},
		{"no verification", srv.URL(), false},
		{"kurrentdb scheme", fmt.Sprintf("kurrentdb://admin:changeit@%s?tlsCAFile=%s", srv.Addr(), caFile), false},
		{"wrong password", fmt.Sprintf("esdb://admin:nope@%s?tlsCAFile=%s", srv.Addr(), caFile), true},
		{"no TLS", fmt.Sprintf("esdb://admin:changeit@%s?tls=false&maxDiscoverAttempts=1", srv.Addr()), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := kurrentdb.Open(t.Context(), tc.url)
			if tc.wantErr {
				if err == nil {
					_ = s.Close()
					t.Fatalf("Open(%s) error = nil, want an error", tc.url)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%s) error = %v", tc.url, err)
			}
			defer s.Close()
			st := events.LaneStream("tls")
			if _, err := s.Append(t.Context(), st, events.AnyVersion(), touched(st, tc.name)); err != nil {
				t.Fatalf("Append over TLS error = %v", err)
			}
			if _, err := s.ReadStream(t.Context(), st, 0, 10, events.Forwards); err != nil {
				t.Fatalf("ReadStream over TLS error = %v", err)
			}
		})
	}
}

// TestWrongVersionCarriesActual checks the mapping of the server's
// wrong-expected-version result, through the client's error text.
func TestWrongVersionCarriesActual(t *testing.T) {
	s := open(t, startEmulator(t).URL())
	st := events.LaneStream("wv")
	for i := range 3 {
		if _, err := s.Append(t.Context(), st, events.ExactVersion(uint64(i)), touched(st, fmt.Sprint(i))); err != nil {
			t.Fatalf("Append error = %v", err)
		}
	}
	// Expected 2 while the stream is at 3: the adapter's own pre-check
	// answers; expected 5 goes to the server, which refuses it.
	for _, x := range []events.ExpectedVersion{events.ExactVersion(2), events.ExactVersion(5), events.NoStream()} {
		_, err := s.Append(t.Context(), st, x, touched(st, "late"))
		var wv *events.WrongVersionError
		if !errors.As(err, &wv) || wv.Actual != 3 {
			t.Errorf("Append(%s) error = %v, want a WrongVersionError at version 3", x, err)
		}
	}
}
