package upstream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
)

// Streams on connections of their own.
//
// A stream the gateway holds open to an upstream (a legacy session's GET
// stream, a 2026-07-28 subscriptions/listen) lasts as long as the client
// session it serves, and there may be one per session. Through an
// http.Transport each such connection costs two goroutines of the
// transport's own (its reader, parked in a select, and its writer) and a
// 4 KiB write buffer it never uses again once the request is out: about
// 14 KiB per stream beyond the connection itself, 10,000 relayed streams
// 140 MiB. The stream is read by the caller's goroutine anyway, so when the
// upstream is reached directly over HTTP/1.1 the client writes the request
// itself on a connection dialled for it, reads the response with
// http.ReadResponse, and closes the connection with the stream.
//
// Anything the transport does that this does not (a proxy, a dialer of
// the caller's, HTTP/2) keeps the stream on the transport.

// maxStreamHeaderBytes bounds the status line and headers of a stream's
// response; an upstream that sends more is refused.
const maxStreamHeaderBytes = 64 << 10

// streamReadBuffer is the read buffer of a stream's connection: enough
// for the headers and the chunk lines, which is all it buffers; the
// events are read by the stream's own reader (sse.go).
const streamReadBuffer = 2 << 10

var errStreamHeaderTooBig = errors.New("stream response headers too large")

// openStream sends req and returns the upstream's response.
func (c *Client) openStream(req *http.Request) (*http.Response, error) {
	t := c.ownStream
	if t == nil || !directHTTP1(t, req) {
		return c.streamHC.Do(req)
	}
	ctx := req.Context()
	addr := streamAddr(req)
	conn, err := t.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	// From here the connection is closed with the context, which ends the
	// handshake, the writes and the reads below, and later the stream.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	fail := func(err error) (*http.Response, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	if req.URL.Scheme == "https" {
		cfg := &tls.Config{}
		if t.TLSClientConfig != nil {
			cfg = t.TLSClientConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = req.URL.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(conn, cfg)
		hctx, cancel := ctx, context.CancelFunc(func() {})
		if t.TLSHandshakeTimeout > 0 {
			hctx, cancel = context.WithTimeout(ctx, t.TLSHandshakeTimeout)
		}
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			return fail(err)
		}
		conn = tc
	}
	var head bytes.Buffer // one write: headers and body together
	if err := req.Write(&head); err != nil {
		return fail(err)
	}
	if _, err := conn.Write(head.Bytes()); err != nil {
		return fail(err)
	}
	bound := &headerBound{r: conn, left: maxStreamHeaderBytes}
	resp, err := http.ReadResponse(bufio.NewReaderSize(bound, streamReadBuffer), req)
	if err != nil {
		return fail(err)
	}
	bound.lift()
	resp.Body = &connBody{ReadCloser: resp.Body, conn: conn, stop: stop}
	return resp, nil
}

// directHTTP1 reports whether req can go on a connection of its own: an
// http or https URL reached without a proxy, with the transport's own
// dialer.
func directHTTP1(t *http.Transport, req *http.Request) bool {
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return false
	}
	if t.DialContext == nil || t.DialTLSContext != nil {
		return false
	}
	if t.Proxy != nil {
		if u, err := t.Proxy(req); err != nil || u != nil {
			return false
		}
	}
	return true
}

// streamAddr is the host:port req goes to.
func streamAddr(req *http.Request) string {
	port := req.URL.Port()
	if port == "" {
		port = "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(req.URL.Hostname(), port)
}

// A headerBound reads at most left bytes until lifted: the response's
// headers (and whatever the read buffer takes of the body with them) must
// fit in it.
type headerBound struct {
	r    io.Reader
	left int // < 0: lifted
}

func (h *headerBound) Read(p []byte) (int, error) {
	if h.left == 0 {
		return 0, errStreamHeaderTooBig
	}
	if h.left > 0 && len(p) > h.left {
		p = p[:h.left]
	}
	n, err := h.r.Read(p)
	if h.left > 0 {
		h.left -= n
	}
	return n, err
}

// lift ends the bound; the reads that follow are the stream's.
func (h *headerBound) lift() { h.left = -1 }

// A connBody is a stream's body whose Close closes its connection.
type connBody struct {
	io.ReadCloser
	conn net.Conn
	stop func() bool
}

func (b *connBody) Close() error {
	b.stop()
	return b.conn.Close()
}
