package api

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// idleGrace is how long a connection may sit outside any request (sending
// nothing since it was accepted, sending a request line or headers, or idle
// between keep-alive requests) before a new connection may take its place
// once api.max_connections are open.
const idleGrace = 250 * time.Millisecond

// LimitConnections returns ln behind a cap of n open connections at once
// (api.max_connections) and wires srv to it; srv must then serve the
// returned listener. Past the cap, a new connection is accepted only in
// place of one that is not inside a request and has been so for idleGrace
// (the longest such first), which is closed; with none, Accept waits until
// a connection closes, and new connections wait in the kernel's listen
// backlog instead of costing hermes a goroutine and buffers each. So
// connections that send nothing, or trickle their headers, or idle between
// requests cannot keep other clients (and /healthz) out for longer than
// idleGrace; only connections inside requests hold the cap. Event streams
// are inside a request for their whole life; api.max_followers stays below
// n so other clients keep room.
func LimitConnections(srv *http.Server, ln net.Listener, n int) net.Listener {
	l := &limitListener{Listener: ln, slots: make(chan struct{}, max(n, 1)), done: make(chan struct{}),
		open: map[*limitedConn]struct{}{}}
	inner := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if inner != nil {
			ctx = inner(ctx, c)
		}
		if lc, ok := c.(*limitedConn); ok {
			ctx = context.WithValue(ctx, limitedConnKey{}, lc)
		}
		return ctx
	}
	next := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, _ := r.Context().Value(limitedConnKey{}).(*limitedConn)
		if lc == nil {
			next.ServeHTTP(w, r)
			return
		}
		lc.requests.Add(1)
		defer func() {
			lc.since.Store(time.Now().UnixNano())
			lc.requests.Add(-1)
		}()
		next.ServeHTTP(w, r)
	})
	return l
}

type limitedConnKey struct{}

type limitListener struct {
	net.Listener
	slots     chan struct{} // one value per open connection
	done      chan struct{} // closed by Close: Accept stops waiting
	closeOnce sync.Once

	mu   sync.Mutex
	open map[*limitedConn]struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
		return l.accept()
	case <-l.done:
		return nil, net.ErrClosed
	default:
	}
	// At the cap: take the next connection off the backlog and find it a
	// slot, in place of a connection outside any request for idleGrace.
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(idleGrace / 4)
	defer tick.Stop()
	for {
		l.evictIdle() // a closed connection gives its slot back at once
		select {
		case l.slots <- struct{}{}:
			return l.track(c), nil
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		case <-tick.C:
		}
	}
}

func (l *limitListener) accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return l.track(c), nil
}

func (l *limitListener) track(c net.Conn) *limitedConn {
	lc := &limitedConn{Conn: c, l: l}
	lc.since.Store(time.Now().UnixNano())
	l.mu.Lock()
	l.open[lc] = struct{}{}
	l.mu.Unlock()
	return lc
}

// evictIdle closes the connection that has been outside any request the
// longest, if for at least idleGrace, and reports whether it closed one.
func (l *limitListener) evictIdle() bool {
	cutoff := time.Now().Add(-idleGrace).UnixNano()
	var victim *limitedConn
	oldest := cutoff
	l.mu.Lock()
	for c := range l.open {
		if c.requests.Load() == 0 {
			if since := c.since.Load(); since <= oldest {
				victim, oldest = c, since
			}
		}
	}
	l.mu.Unlock()
	if victim == nil {
		return false
	}
	victim.Close()
	return true
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitedConn gives its slot back on its first Close. requests counts the
// requests inside a handler on it (0 or 1 with HTTP/1.1); since is when it
// was accepted or its last request ended, in Unix nanoseconds.
type limitedConn struct {
	net.Conn
	l        *limitListener
	once     sync.Once
	requests atomic.Int32
	since    atomic.Int64
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.open, c)
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return err
}
