package transport

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Detached streams.
//
// A long-lived GET stream over HTTP/1.x costs what net/http keeps for any
// connection it serves: the goroutine running the handler, deep in the
// server's and the middlewares' frames (its stack stays at 16 KiB while it
// waits), a second goroutine reading ahead to notice the client leave, and
// the connection's read and write buffers (10 KiB). Ten thousand idle
// streams held 177 MiB of stacks and about as much heap for that alone.
//
// So once a GET stream is admitted and about to start, the gateway takes
// its connection from net/http (http.ResponseController.Hijack) and serves
// the stream from a goroutine of its own, started shallow, whose stack
// shrinks back to a few KiB between events; a second small goroutine
// blocks in a one-byte read to learn that the client left. The response is
// written as net/http would have: status line, the headers the handler and
// the middlewares set, a chunked body (RFC 9112 section 7.1), and the
// connection is closed when the stream ends. HTTP/2 streams cannot be taken
// (Hijack reports http.ErrNotSupported) and are served in the handler as
// before.

// streamWriteTimeout bounds one write to a detached stream: a client that
// stops reading holds its stream (and its place under the stream caps)
// for at most this long once the kernel's buffers are full.
const streamWriteTimeout = 30 * time.Second

// A detachedConn is the connection of a detached stream, seen by the
// stream loop as an http.ResponseWriter whose every Write reaches the
// client at once (Flush has nothing to do).
type detachedConn struct {
	conn    net.Conn
	header  http.Header
	chunked bool          // HTTP/1.1: a chunked body; HTTP/1.0: delimited by the close
	timeout time.Duration // of each write: streamWriteTimeout

	ctx    context.Context // ended when the client leaves or the owner closes
	cancel context.CancelFunc
	read   chan struct{} // closed when the reader has returned

	mu    sync.Mutex
	head  []byte // the status line and headers, until the first write
	wrote bool   // the status line is out (or pending in head)
	err   error  // the first write error; every later write fails with it
}

// detach takes the connection of r from net/http, for a stream that is
// about to start, and returns it with a context that ends when the client
// leaves. It returns nil, and w stays usable, when the connection cannot
// be taken (HTTP/2, a writer that cannot hijack).
func detach(w http.ResponseWriter, r *http.Request) *detachedConn {
	if r.ProtoMajor != 1 {
		return nil
	}
	header := w.Header().Clone() // the middlewares' and the handler's
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil
	}
	// No deadline from the server applies any more; writes set their own.
	_ = conn.SetDeadline(time.Time{})
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	d := &detachedConn{conn: conn, header: header, chunked: r.ProtoAtLeast(1, 1), timeout: streamWriteTimeout, ctx: ctx, cancel: cancel, read: make(chan struct{})}
	pending := brw.Reader.Buffered() > 0
	go d.watch(pending)
	return d
}

// watch ends the stream's context when the client closes the connection
// or sends anything: a client that wrote beyond its request (a pipelined
// request, a body on a GET) cannot be answered on this connection, whose
// response never ends while the stream lasts.
func (d *detachedConn) watch(pending bool) {
	defer close(d.read)
	defer d.cancel()
	if pending {
		return
	}
	var b [1]byte
	_, _ = d.conn.Read(b[:])
}

// Header returns the headers the response will be sent with.
func (d *detachedConn) Header() http.Header { return d.header }

// WriteHeader makes the status line and the headers, which go out with the
// first write or flush.
func (d *detachedConn) WriteHeader(code int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.wrote {
		return
	}
	d.wrote = true
	h := d.header
	if h.Get("Date") == "" {
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	h.Del("Content-Length")
	h.Del("Transfer-Encoding")
	if d.chunked {
		h.Set("Transfer-Encoding", "chunked")
	}
	h.Set("Connection", "close")
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 ")
	b.WriteString(strconv.Itoa(code))
	b.WriteByte(' ')
	b.WriteString(http.StatusText(code))
	b.WriteString("\r\n")
	_ = h.Write(&b)
	b.WriteString("\r\n")
	d.head = b.Bytes()
	d.header = nil // sent: nothing may change it
}

// Write sends p to the client as one chunk, after the headers if they are
// still pending.
func (d *detachedConn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, d.FlushError()
	}
	d.WriteHeader(http.StatusOK) // a no-op once written
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil && d.ctx.Err() != nil {
		// The client left (or the owner closes): a write to a peer that
		// closed may still be taken by the kernel, and would be lost.
		d.err = net.ErrClosed
	}
	if d.err != nil {
		return 0, d.err
	}
	b := getEventBuf()
	b = append(b, d.head...)
	d.head = nil
	if d.chunked {
		b = strconv.AppendUint(b, uint64(len(p)), 16)
		b = append(b, "\r\n"...)
	}
	b = append(b, p...)
	if d.chunked {
		b = append(b, "\r\n"...)
	}
	err := d.send(b)
	putEventBuf(b)
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// send writes b within d.timeout. d.mu must be held.
func (d *detachedConn) send(b []byte) error {
	_ = d.conn.SetWriteDeadline(time.Now().Add(d.timeout))
	if _, err := d.conn.Write(b); err != nil {
		d.err = err
		d.cancel()
		return err
	}
	return nil
}

// FlushError sends the headers, with 200 if no status was written, if
// nothing has followed them yet; writes are not buffered. http.ResponseController.Flush calls it.
func (d *detachedConn) FlushError() error {
	d.WriteHeader(http.StatusOK) // as net/http: a flush starts the response
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return d.err
	}
	if d.head == nil {
		return nil
	}
	head := d.head
	d.head = nil
	return d.send(head)
}

// close ends the response (the last chunk, when the client is still
// there), closes the connection and waits for its reader.
func (d *detachedConn) close() {
	d.mu.Lock()
	if d.wrote && d.err == nil && d.ctx.Err() == nil {
		b := d.head
		d.head = nil
		if d.chunked {
			b = append(b, "0\r\n\r\n"...)
		}
		if len(b) > 0 {
			_ = d.send(b)
		}
	}
	d.mu.Unlock()
	d.cancel()
	_ = d.conn.Close()
	<-d.read
}
