package upstream

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// errClosedBeforeSent fails the first write of a request on a connection
// the upstream has closed: nothing of the request is written.
var errClosedBeforeSent = errors.New("the upstream closed the connection before the request was sent")

// liveDialer wraps dial so that every connection it opens is a liveConn.
func liveDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newLiveConn(c), nil
	}
}

// A liveConn is a connection to an upstream that will not start a request
// on a connection the upstream has already closed.
//
// A keep-alive connection the upstream closed (it restarted, or its idle
// timeout passed) stays in net/http's pool until the transport's reader
// goroutine sees the end of it. A request written in that window is lost,
// and net/http can only say that it got EOF after writing it, which is also
// what an upstream dying mid-call looks like. So before the first write
// that follows a read (on HTTP/1.1, the start of the next request on a
// reused connection) and before the first write of all, the connection
// checks, without blocking, whether the upstream's end of it has arrived;
// if so the write fails with nothing written. net/http then sends the
// request again on another connection, as it does for any request of which
// nothing was written on a connection used before, if its body can be
// rewound.
//
// It does not for a connection never used (one dialed for a request that
// then went out on another may wait in the pool unused): a liveConn on
// which nothing was written reports any read error, as well as a refused
// write, as errClosedBeforeSent, and the caller sends the request again
// (see replayable). Over TLS the handshake is written first, so a TLS
// connection never used for a request is not told apart: a request that
// finds one closed fails as it would without the check.
type liveConn struct {
	net.Conn
	raw syscall.RawConn // nil if the connection has no file descriptor

	// read is set by Read and cleared by Write: the next write starts a
	// request. The transport reads and writes in different goroutines.
	read atomic.Bool

	// used is set, under mu, once a write got past the check: from then on
	// bytes may have reached the upstream. mu orders the first write
	// against a failed read.
	mu   sync.Mutex
	used atomic.Bool

	// peek is c.peekFD, bound once so that a check allocates nothing;
	// closed is its result. Both belong to the writing goroutine.
	peek   func(fd uintptr)
	closed bool
}

func newLiveConn(c net.Conn) *liveConn {
	lc := &liveConn{Conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			lc.raw = raw
			lc.peek = lc.peekFD
		}
	}
	return lc
}

// peerClosed reports whether the upstream's end of the stream (or a reset)
// is the next thing to read on the connection. It neither consumes anything
// nor waits for the transport's own read, which may be blocked on the same
// connection.
func (c *liveConn) peerClosed() bool {
	if c.raw == nil {
		return false
	}
	c.closed = false
	return c.raw.Control(c.peek) == nil && c.closed
}

func (c *liveConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Store(true)
	if err != nil && !c.used.Load() {
		c.mu.Lock()
		if !c.used.Load() {
			// Nothing was written, and a write from now on finds the
			// connection closed.
			err = errClosedBeforeSent
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *liveConn) Write(b []byte) (int, error) {
	if !c.used.Load() {
		c.mu.Lock()
		if !c.used.Load() {
			if c.peerClosed() {
				c.mu.Unlock()
				return 0, errClosedBeforeSent
			}
			c.used.Store(true)
		}
		c.mu.Unlock()
		c.read.Store(false)
	} else if c.read.Swap(false) && c.peerClosed() {
		return 0, errClosedBeforeSent
	}
	return c.Conn.Write(b)
}
