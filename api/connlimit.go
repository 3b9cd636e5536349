package api

import (
	"net"
	"sync"
)

// LimitListener returns a listener that keeps at most n of its connections
// open at once (api.max_connections): past that, Accept waits until one
// closes, and new connections wait in the kernel's listen backlog (then,
// once it is full, are refused by the kernel) instead of costing hermes a
// goroutine and buffers each. Event streams count too; api.max_followers
// stays below n so other clients keep room.
func LimitListener(ln net.Listener, n int) net.Listener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, max(n, 1)), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	slots     chan struct{} // one value per open connection
	done      chan struct{} // closed by Close: Accept stops waiting
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitedConn gives its slot back on its first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
