package kurrentdb

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"hermes/events"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
)

var _ events.Eraser = (*Store)(nil)

// Purge implements events.Eraser: it scavenges every node named by the
// connection string (the host, or each gossip seed) and returns once each
// scavenge completed. An erasure destroyed its keys when its append
// returned (seal.go), so no node can read the erased content through the
// server's API from then on; after Purge the keys are gone from the
// server's storage too, and what remains of each erased event is its
// shadow and a ciphertext no key opens.
//
// The scavenge is started through the operations service
// (event_store.client.operations.Operations/StartScavenge) on the client's
// own TLS settings and credentials, which need the $ops or $admins role,
// and its end is read from the node's $scavenges-<id> stream. A scavenge
// already running is waited for and then a new one started: it may have
// begun before the erasure. Purge waits as long as ctx lets it: a
// scavenge of a big database takes long.
//
// A scavenge reads every chunk of a node, so Purge scavenges only when
// there may be something to remove: after this store destroyed a key
// since its last completed Purge, or when it was never purged and not told
// by MarkPurged that the last process purged at its clean stop (a crashed
// process may have erased without scavenging).
func (s *Store) Purge(ctx context.Context) error {
	gen := s.shreds.Load()
	if gen == s.purgedAt.Load() {
		return nil
	}
	for _, target := range s.nodes() {
		if err := s.scavenge(ctx, target); err != nil {
			return fmt.Errorf("purge: scavenge %s: %w", target, err)
		}
	}
	s.purgedAt.Store(gen)
	return nil
}

// MarkPurged tells the store that the last process on this home purged at
// its clean stop: its first Purge need not scavenge unless it erases.
func (s *Store) MarkPurged() { s.purgedAt.CompareAndSwap(-1, s.shreds.Load()) }

// nodes are the host:port of each node the connection string names.
func (s *Store) nodes() []string {
	if len(s.cfg.GossipSeeds) == 0 {
		return []string{s.cfg.Address}
	}
	out := make([]string, len(s.cfg.GossipSeeds))
	for i, e := range s.cfg.GossipSeeds {
		out[i] = net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
	}
	return out
}

const operationsMethod = "/event_store.client.operations.Operations/StartScavenge"

// Scavenge results of the operations service.
const (
	scavengeStarted    = 0
	scavengeInProgress = 1
)

func (s *Store) scavenge(ctx context.Context, target string) error {
	conn, err := s.dialOperations(target)
	if err != nil {
		return err
	}
	defer conn.Close()
	// StartScavengeReq{options: {thread_count: 1, start_from_chunk: 0}}.
	opts := protowire.AppendTag(nil, 1, protowire.VarintType)
	opts = protowire.AppendVarint(opts, 1)
	req := protowire.AppendTag(nil, 1, protowire.BytesType)
	req = protowire.AppendBytes(req, opts)
	for range 3 {
		var resp []byte
		if err := conn.Invoke(ctx, operationsMethod, req, &resp, grpc.ForceCodec(rawCodec{})); err != nil {
			return fmt.Errorf("start scavenge: %w", err)
		}
		id, result, err := parseScavengeResp(resp)
		if err != nil {
			return err
		}
		status, err := s.awaitScavenge(ctx, id)
		if err != nil {
			return err
		}
		if result == scavengeStarted {
			if status != "Success" {
				return fmt.Errorf("scavenge %s ended %s", id, status)
			}
			return nil
		}
		if result != scavengeInProgress {
			return fmt.Errorf("start scavenge: result %d", result)
		}
		// One was running: it may have started before the erasure, so
		// start another once it ended.
	}
	return errors.New("start scavenge: another scavenge kept running")
}

// awaitScavenge reads $scavenges-<id> until its $scavengeCompleted, and
// returns its result (Success, Stopped, Failed).
func (s *Store) awaitScavenge(ctx context.Context, id string) (string, error) {
	stream := "$scavenges-" + id
	backoff := 10 * time.Millisecond
	for {
		var result string
		err := s.do(ctx, func(c *esdb.Client) error {
			rs, err := c.ReadStream(ctx, stream, esdb.ReadStreamOptions{}, 100)
			if err != nil {
				return err
			}
			defer rs.Close()
			for {
				ev, err := rs.Recv()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				if r := ev.OriginalEvent(); r != nil && r.EventType == "$scavengeCompleted" {
					var done struct {
						Result string `json:"result"`
					}
					if err := json.Unmarshal(r.Data, &done); err != nil {
						return fmt.Errorf("%s: %w", stream, err)
					}
					result = done.Result
					return nil
				}
			}
		})
		if err != nil && !notFound(err) {
			return "", fmt.Errorf("wait for scavenge %s: %w", id, err)
		}
		if result != "" {
			return result, nil
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return "", fmt.Errorf("wait for scavenge %s: %w", id, ctx.Err())
		case <-s.stop:
			return "", ErrClosed
		}
		backoff = min(backoff*2, time.Second)
	}
}

// dialOperations connects to one node with the client's TLS settings and
// credentials.
func (s *Store) dialOperations(target string) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{}
	secure := !s.cfg.DisableTLS
	if secure {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs: s.cfg.RootCAs, InsecureSkipVerify: s.cfg.SkipCertificateVerification, MinVersion: tls.VersionTLS12,
		})))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if s.cfg.Username != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(basicAuth{
			header: "Basic " + base64.StdEncoding.EncodeToString([]byte(s.cfg.Username+":"+s.cfg.Password)), secure: secure,
		}))
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return conn, nil
}

type basicAuth struct {
	header string
	secure bool
}

func (b basicAuth) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": b.header}, nil
}

func (b basicAuth) RequireTransportSecurity() bool { return b.secure }

// parseScavengeResp reads ScavengeResp{scavenge_id = 1; scavenge_result = 2}.
func parseScavengeResp(b []byte) (id string, result int, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", 0, errors.New("scavenge response does not decode")
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", 0, errors.New("scavenge response does not decode")
			}
			id, b = string(v), b[n:]
		case num == 2 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return "", 0, errors.New("scavenge response does not decode")
			}
			result, b = int(v), b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return "", 0, errors.New("scavenge response does not decode")
			}
			b = b[n:]
		}
	}
	if id == "" {
		return "", 0, errors.New("scavenge response has no id")
	}
	return id, result, nil
}

// rawCodec passes protobuf bytes through: the client ships no generated
// code for the operations service, whose two messages are written by hand.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: %T", v)
	}
	return b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: %T", v)
	}
	*p = append((*p)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }
