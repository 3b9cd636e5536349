package kurrentdb

import (
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/gossip"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/serverfeatures"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// DefaultMaxAppendSize is KurrentDB's default --max-append-size (1 MiB):
// the most bytes of event data and metadata one append may carry.
const DefaultMaxAppendSize = 1 << 20

// Version is the server version the emulator reports.
const Version = "24.10.0"

// Server is a running emulator. It keeps its data across [Server.Stop] and
// [Server.Restart].
type Server struct {
	cfg  config
	log  *eventLog
	addr string

	subscriptions atomic.Int64

	mu   sync.Mutex
	grpc *grpc.Server
	done chan struct{} // closed when the current grpc server has stopped
}

type config struct {
	addr          string
	maxAppendSize int
	systemEvery   int
	now           func() time.Time
	tls           *tls.Config
	login         string
	password      string
}

// Option configures [Start].
type Option func(*config)

// WithAddr listens on addr (default 127.0.0.1:0, a free loopback port).
func WithAddr(addr string) Option { return func(c *config) { c.addr = addr } }

// WithMaxAppendSize sets the maximum append size in bytes (default
// [DefaultMaxAppendSize], like the server's --max-append-size).
func WithMaxAppendSize(n int) Option { return func(c *config) { c.maxAppendSize = n } }

// WithSystemEventEvery writes a system event ($stats-…/$statsCollected)
// after every n user appends (default 7; 0 never).
func WithSystemEventEvery(n int) Option { return func(c *config) { c.systemEvery = n } }

// WithClock sets the clock that stamps events' created dates.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithTLS serves over TLS with cert, and requires every call to carry the
// basic-auth credentials login:password (the client sends credentials only
// over TLS).
func WithTLS(cert tls.Certificate, login, password string) Option {
	return func(c *config) {
		c.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		c.login, c.password = login, password
	}
}

// Start starts an emulator.
func Start(opts ...Option) (*Server, error) {
	cfg := config{addr: "127.0.0.1:0", maxAppendSize: DefaultMaxAppendSize, systemEvery: 7, now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	s := &Server{cfg: cfg, log: newEventLog(cfg.now, cfg.systemEvery)}
	lis, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("kurrentdb emulator: listen: %w", err)
	}
	s.addr = lis.Addr().String()
	s.serve(lis)
	return s, nil
}

// Addr is the host:port the emulator listens on.
func (s *Server) Addr() string { return s.addr }

// URL is a connection string for the emulator: esdb://host:port?tls=false,
// or with TLS, credentials and tlsVerifyCert=false.
func (s *Server) URL() string {
	if s.cfg.tls != nil {
		return fmt.Sprintf("esdb://%s:%s@%s?tls=true&tlsVerifyCert=false", s.cfg.login, s.cfg.password, s.addr)
	}
	return fmt.Sprintf("esdb://%s?tls=false", s.addr)
}

func (s *Server) serve(lis net.Listener) {
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(32 << 20), grpc.MaxSendMsgSize(32 << 20)}
	if s.cfg.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.cfg.tls)))
	}
	if s.cfg.login != "" {
		opts = append(opts, grpc.UnaryInterceptor(s.authUnary), grpc.StreamInterceptor(s.authStream))
	}
	g := grpc.NewServer(opts...)
	streams.RegisterStreamsServer(g, &streamsService{s: s})
	serverfeatures.RegisterServerFeaturesServer(g, &featuresService{})
	gossip.RegisterGossipServer(g, &gossipService{s: s})
	done := make(chan struct{})
	s.mu.Lock()
	s.grpc, s.done = g, done
	s.mu.Unlock()
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
}

// Subscriptions counts the subscriptions ever started (a client that
// resubscribes after a restart counts again).
func (s *Server) Subscriptions() int { return int(s.subscriptions.Load()) }

// Stop ends every connection, subscription and call at once, like a killed
// node; the data stays for [Server.Restart]. A second Stop does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	g, done := s.grpc, s.done
	s.grpc = nil
	s.mu.Unlock()
	if g == nil {
		return
	}
	g.Stop()
	<-done
}

// Restart stops the server if it runs, then serves the same data on the
// same address again.
func (s *Server) Restart() error {
	s.Stop()
	var lis net.Listener
	var err error
	// The port was just released; on a busy machine binding may need a retry.
	for range 50 {
		lis, err = net.Listen("tcp", s.addr)
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("kurrentdb emulator: restart: %w", err)
	}
	s.serve(lis)
	return nil
}

// Close stops the server for good.
func (s *Server) Close() error {
	s.Stop()
	return nil
}
