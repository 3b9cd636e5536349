package kurrentdb

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/gossip"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/persistent"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/serverfeatures"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// DefaultMaxAppendSize is KurrentDB's default --max-append-size (1 MiB):
// the most bytes of event data and metadata one append may carry.
const DefaultMaxAppendSize = 1 << 20

// Version is the server version the emulator reports.
const Version = "24.10.0"

// Server is a running emulator: one node, or a leader and followers
// serving the same data. It keeps its data across [Server.Stop] and
// [Server.Restart].
type Server struct {
	cfg       config
	log       *eventLog
	scavenges *scavenges
	nodes     []*node // nodes[0] is the leader

	subscriptions atomic.Int64

	groupsMu sync.Mutex
	groups   map[string]bool // persistent subscription groups, by stream and name
}

// node is one member of the emulated cluster, on its own address.
type node struct {
	id        uuid.UUID
	leader    bool
	addr      string // host:port it listens on
	advertise string // host:port gossip gives clients

	mu   sync.Mutex
	grpc *grpc.Server
	done chan struct{} // closed when the current grpc server has stopped
}

type config struct {
	addr          string
	followers     []string
	maxAppendSize int
	systemEvery   int
	now           func() time.Time
	tls           *tls.Config
	login         string
	password      string
	scavengeHook  func(id string)
}

// Option configures [Start].
type Option func(*config)

// WithAddr listens on addr (default 127.0.0.1:0, a free loopback port).
func WithAddr(addr string) Option { return func(c *config) { c.addr = addr } }

// WithFollowers adds follower nodes listening on addrs: gossip then names
// a cluster (the leader on WithAddr's address, these as followers), the
// nodes share one database, and a follower answers the calls that need a
// leader (persistent subscription management) with not-leader and the
// leader's endpoint, as a follower does.
func WithFollowers(addrs ...string) Option {
	return func(c *config) { c.followers = append(c.followers, addrs...) }
}

// WithMaxAppendSize sets the maximum append size in bytes (default
// [DefaultMaxAppendSize], like the server's --max-append-size).
func WithMaxAppendSize(n int) Option { return func(c *config) { c.maxAppendSize = n } }

// WithSystemEventEvery writes a system event ($stats-…/$statsCollected)
// after every n user appends (default 7; 0 never).
func WithSystemEventEvery(n int) Option { return func(c *config) { c.systemEvery = n } }

// WithClock sets the clock that stamps events' created dates and that
// $maxAge reads and scavenges compare them with.
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

// WithScavengeHook calls hook with each scavenge's id once it has written
// $scavengeStarted and before it removes anything; a test blocks in it to
// stop a scavenge that is running.
func WithScavengeHook(hook func(id string)) Option { return func(c *config) { c.scavengeHook = hook } }

// Start starts an emulator.
func Start(opts ...Option) (*Server, error) {
	cfg := config{addr: "127.0.0.1:0", maxAppendSize: DefaultMaxAppendSize, systemEvery: 7, now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	s := &Server{cfg: cfg, log: newEventLog(cfg.now, cfg.systemEvery), groups: make(map[string]bool)}
	s.scavenges = &scavenges{log: s.log, hook: cfg.scavengeHook}
	for i, addr := range append([]string{cfg.addr}, cfg.followers...) {
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("kurrentdb emulator: listen %s: %w", addr, err)
		}
		n := &node{id: uuid.New(), leader: i == 0, addr: lis.Addr().String()}
		n.advertise = n.addr
		if host, _, err := net.SplitHostPort(addr); err == nil && host != "" && net.ParseIP(host) == nil {
			// A node started on a name is advertised by that name, as
			// --advertise-host-to-client-as does.
			_, port, _ := net.SplitHostPort(n.addr)
			n.advertise = net.JoinHostPort(host, port)
		}
		if n.leader {
			s.scavenges.endpoint = n.advertise
		}
		s.nodes = append(s.nodes, n)
		s.serve(n, lis)
	}
	return s, nil
}

// Addr is the host:port the emulator (its leader) listens on.
func (s *Server) Addr() string { return s.nodes[0].addr }

// Addrs are the host:port of every node, the leader first.
func (s *Server) Addrs() []string {
	out := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = n.addr
	}
	return out
}

// URL is a connection string for the emulator's leader:
// esdb://host:port?tls=false, or with TLS, credentials and
// tlsVerifyCert=false.
func (s *Server) URL() string {
	if s.cfg.tls != nil {
		return fmt.Sprintf("esdb://%s:%s@%s?tls=true&tlsVerifyCert=false", s.cfg.login, s.cfg.password, s.Addr())
	}
	return fmt.Sprintf("esdb://%s?tls=false", s.Addr())
}

func (s *Server) serve(n *node, lis net.Listener) {
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(32 << 20), grpc.MaxSendMsgSize(32 << 20)}
	if s.cfg.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.cfg.tls)))
	}
	if s.cfg.login != "" {
		opts = append(opts, grpc.UnaryInterceptor(s.authUnary), grpc.StreamInterceptor(s.authStream))
	}
	g := grpc.NewServer(opts...)
	streams.RegisterStreamsServer(g, &streamsService{s: s})
	persistent.RegisterPersistentSubscriptionsServer(g, &persistentService{s: s, node: n})
	serverfeatures.RegisterServerFeaturesServer(g, &featuresService{})
	gossip.RegisterGossipServer(g, &gossipService{s: s})
	g.RegisterService(operationsServiceDesc(s.scavenges), nil)
	done := make(chan struct{})
	n.mu.Lock()
	n.grpc, n.done = g, done
	n.mu.Unlock()
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
}

// Subscriptions counts the subscriptions ever started (a client that
// resubscribes after a restart counts again).
func (s *Server) Subscriptions() int { return int(s.subscriptions.Load()) }

// Storage is the emulator's whole database as bytes: every event (data,
// metadata, stream, type) it still holds, system events, metadata and
// tombstones included. Events a scavenge removed are not in it; a test
// searches it for what must be gone.
func (s *Server) Storage() []byte { return s.log.storage() }

// Stop ends every connection, subscription and call at once, like a killed
// node (every node, for a cluster); the data stays for [Server.Restart]. A
// second Stop does nothing.
func (s *Server) Stop() {
	for _, n := range s.nodes {
		n.mu.Lock()
		g, done := n.grpc, n.done
		n.grpc = nil
		n.mu.Unlock()
		if g == nil {
			continue
		}
		g.Stop()
		<-done
	}
}

// Restart stops the server if it runs, then serves the same data on the
// same addresses again.
func (s *Server) Restart() error {
	s.Stop()
	for _, n := range s.nodes {
		var lis net.Listener
		var err error
		// The port was just released; on a busy machine binding may need a retry.
		for range 50 {
			lis, err = net.Listen("tcp", n.addr)
			if err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("kurrentdb emulator: restart: %w", err)
		}
		s.serve(n, lis)
	}
	return nil
}

// Close stops the server for good, once any scavenge has finished.
func (s *Server) Close() error {
	s.Stop()
	s.scavenges.wg.Wait()
	return nil
}

// advertisedHostPort is the host and port gossip gives for the node.
func (n *node) advertisedHostPort() (string, uint32) {
	host, port, _ := net.SplitHostPort(n.advertise)
	p, _ := strconv.Atoi(port)
	return host, uint32(p)
}
