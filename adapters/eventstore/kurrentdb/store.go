package kurrentdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"hermes/events"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var _ events.Store = (*Store)(nil)

// ErrClosed: the store was closed.
var ErrClosed = errors.New("event store closed")

// StreamPrefixes name hermes' streams: lanes, transcripts, the gateway
// streams (gateway, gateway-<node>, and the gateways' run streams
// gatewayrun-<gateway>), the lease streams (lease-<name>), state_meta
// (meta), Telegram's topic streams (telegram-<chat>) and the person
// erasures (erasures). Reads of $all and
// subscriptions keep only these.
var StreamPrefixes = []string{events.LanePrefix, events.TranscriptPrefix, events.GatewayStream, events.LeasePrefix,
	events.MetaStream, events.TelegramPrefix, events.ErasureStream}

// IsHermesStream reports whether stream is one of hermes' streams.
func IsHermesStream(stream string) bool {
	for _, p := range StreamPrefixes {
		if strings.HasPrefix(stream, p) {
			return true
		}
	}
	return false
}

// serverName is the server's name of a hermes stream.
func (s *Store) serverName(stream string) string { return s.namespace + stream }

// hermesName is the hermes name of a server stream, and whether the stream
// is one of this store's.
func (s *Store) hermesName(stream string) (string, bool) {
	name, ok := strings.CutPrefix(stream, s.namespace)
	return name, ok && IsHermesStream(name)
}

// filterPrefixes are the server-side subscription filter's prefixes.
func (s *Store) filterPrefixes() []string {
	out := make([]string, len(StreamPrefixes))
	for i, p := range StreamPrefixes {
		out[i] = s.namespace + p
	}
	return out
}

// Store is the KurrentDB event store. It is safe for concurrent use.
type Store struct {
	cfg       esdb.Configuration
	logger    *slog.Logger
	namespace string

	mu     sync.Mutex
	client *esdb.Client
	closed bool
	// ops counts calls in flight: the client may not be closed under them
	// (v4.2.0 panics on an error that arrives after Close).
	ops sync.WaitGroup
	// stop ends subscriptions when the store closes.
	stop chan struct{}
	// keys remembers the current key of the (stream, class) pairs this
	// store appended to (seal.go); never logged.
	keys keyCache
	// plaintext counts the events read with personal content in
	// plaintext (written before crypto-shredding); the first is logged.
	plaintext     atomic.Int64
	plaintextOnce sync.Once
	// shreds counts the keys this store destroyed; purgedAt is its value
	// at the last completed Purge (-1: never, so the first Purge
	// scavenges). scavenge.go.
	shreds, purgedAt atomic.Int64
	stopOnce         sync.Once
}

// Option configures [Open].
type Option func(*Store)

// WithLogger sends the client's log lines to l (default: discarded; the
// client's own default prints to stdout).
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.logger = l } }

// WithNamespace prefixes every stream name on the server with ns, so that
// several hermes deployments (or test runs) can share one database without
// seeing each other's events. Default: none.
func WithNamespace(ns string) Option { return func(s *Store) { s.namespace = ns } }

// Open connects to the KurrentDB named by url: esdb://, esdb+discover://,
// or the same with kurrentdb:// / kurrentdb+discover:// (or kurrent://),
// which the v4.2.0 client does not know and which mean the same. TLS,
// certificates, credentials (user:password@) and discovery settings come
// from the URL, as the client documents them. Open checks that the server
// answers before it returns.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	s := &Store{cfg: *cfg, stop: make(chan struct{})}
	s.purgedAt.Store(-1)
	for _, o := range opts {
		o(s)
	}
	s.cfg.Logger = s.logFunc()
	// A server that does not answer fails Open soon, rather than after the
	// whole reconnection budget of a call.
	probe, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	if _, err := s.Head(probe); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open kurrentdb %s: %w", redact(url), err)
	}
	return s, nil
}

// ParseURL parses a KurrentDB connection string into the client's
// configuration, accepting the kurrentdb:// and kurrent:// schemes too.
func ParseURL(url string) (*esdb.Configuration, error) {
	for _, scheme := range []string{"kurrentdb", "kurrent"} {
		if rest, ok := strings.CutPrefix(url, scheme+"://"); ok {
			url = "esdb://" + rest
		} else if rest, ok := strings.CutPrefix(url, scheme+"+discover://"); ok {
			url = "esdb+discover://" + rest
		}
	}
	cfg, err := esdb.ParseConnectionString(url)
	if err != nil {
		return nil, fmt.Errorf("parse kurrentdb url %s: %w", redact(url), err)
	}
	return cfg, nil
}

// redact hides the password of a connection string.
func redact(url string) string {
	at := strings.LastIndex(url, "@")
	scheme := strings.Index(url, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return url
	}
	userinfo := url[scheme+3 : at]
	if user, _, ok := strings.Cut(userinfo, ":"); ok {
		return url[:scheme+3] + user + ":xxxxx" + url[at:]
	}
	return url
}

func (s *Store) logFunc() esdb.LoggingFunc {
	l := s.logger
	return func(level esdb.LogLevel, format string, args ...any) {
		if l == nil {
			return
		}
		msg := fmt.Sprintf(format, args...)
		switch level {
		case esdb.LogError:
			l.Warn("kurrentdb client: " + msg)
		case esdb.LogWarn:
			l.Info("kurrentdb client: " + msg)
		default:
			l.Debug("kurrentdb client: " + msg)
		}
	}
}

// acquire returns the client for one call and a release function. A client
// that gave up (its discovery failed, so it closed itself for good) is
// replaced by a new one.
func (s *Store) acquire() (*esdb.Client, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, ErrClosed
	}
	if s.client == nil {
		cfg := s.cfg
		c, err := esdb.NewClient(&cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("kurrentdb client: %w", err)
		}
		s.client = c
	}
	s.ops.Add(1)
	return s.client, s.ops.Done, nil
}

// discard forgets c after it closed itself; the next call makes a new
// client. c is not closed again: its state machine is gone, and Close would
// make any late error report panic.
func (s *Store) discard(c *esdb.Client) {
	s.mu.Lock()
	if s.client == c {
		s.client = nil
	}
	s.mu.Unlock()
}

// openTimeout bounds Open's first call.
const openTimeout = 5 * time.Second

// retryLimit bounds how long one call keeps retrying a lost connection.
const retryLimit = 15 * time.Second

// do runs call with a client, retrying while the connection is down (a
// restarting or failing-over server) until ctx ends or retryLimit passes.
// Calls must be safe to repeat: reads are, and appends are made safe by the
// server's idempotency on event ids.
func (s *Store) do(ctx context.Context, call func(c *esdb.Client) error) error {
	deadline := time.Now().Add(retryLimit)
	backoff := 20 * time.Millisecond
	for {
		c, release, err := s.acquire()
		if err != nil {
			return err
		}
		err = call(c)
		release()
		if err == nil || !transient(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		if closedClient(err) {
			s.discard(c)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return err
		case <-s.stop:
			return ErrClosed
		}
		backoff = min(backoff*2, time.Second)
	}
}

// transient reports whether err means the connection, not the request,
// failed.
func transient(err error) bool {
	var e *esdb.Error
	if errors.As(err, &e) {
		switch e.Code() {
		case esdb.ErrorUnavailable, esdb.ErrorCodeConnectionClosed, esdb.ErrorCodeNotLeader, esdb.ErrorAborted:
			return true
		case esdb.ErrorCodeUnknown:
			// Transport errors the client did not classify.
			if inner := e.Unwrap(); inner != nil {
				return status.Code(inner) == codes.Unavailable
			}
		}
		return false
	}
	return status.Code(err) == codes.Unavailable
}

func closedClient(err error) bool {
	var e *esdb.Error
	return errors.As(err, &e) && e.Code() == esdb.ErrorCodeConnectionClosed
}

// Close ends the subscriptions, waits for the calls in flight and closes
// the client. A second Close does nothing.
func (s *Store) Close() error {
	s.stopOnce.Do(func() { close(s.stop) })
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c := s.client
	s.client = nil
	s.mu.Unlock()
	s.ops.Wait()
	if c != nil {
		return c.Close()
	}
	return nil
}
