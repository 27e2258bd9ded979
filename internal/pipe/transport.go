package pipe

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
)

// Transport is an http.RoundTripper that serves each request with a
// Handler in the same process: no socket, no copy beyond a pipe. The
// Handler writes the response's body as the client reads it, so an event
// stream reaches the client message by message.
//
// Each request runs its Handler in a goroutine of its own, which ends when
// the Handler returns (it returns when the request's context is done or
// the body is closed); Close waits for all of them.
type Transport struct {
	h  http.Handler
	wg sync.WaitGroup
}

// NewTransport returns a Transport serving requests with h.
func NewTransport(h http.Handler) *Transport { return &Transport{h: h} }

// RoundTrip serves req. It returns when the Handler flushed its response
// (an event stream: the body is then read as the Handler writes it), or
// returned (the body, whole, was kept: cancelling the request cannot cut
// it short, as it could a stream).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	in := req.Clone(ctx)
	if in.Body == nil {
		in.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: make(http.Header), pw: pw, ready: make(chan struct{})}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer func() {
			if v := recover(); v != nil && v != http.ErrAbortHandler {
				// A panic in the Handler ends this response, not the
				// gateway; net/http's server does the same.
				pw.CloseWithError(errors.New("handler panicked"))
			}
			w.done()
			pw.Close()
			in.Body.Close()
		}()
		t.h.ServeHTTP(w, in)
	}()
	// As with net/http, the request's context ending fails a stream's
	// reads, and so the Handler's writes, whoever holds the body.
	context.AfterFunc(ctx, func() { pr.CloseWithError(context.Cause(ctx)) })
	select {
	case <-w.ready:
	case <-ctx.Done():
		cancel()
		return nil, context.Cause(req.Context())
	}
	resp := &http.Response{
		Status:        http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		ContentLength: -1,
		Request:       req,
	}
	if w.streaming {
		resp.Body = &pipeBody{r: pr, cancel: cancel}
	} else {
		resp.ContentLength = int64(w.buf.Len())
		resp.Body = &pipeBody{r: bytes.NewReader(w.buf.Bytes()), cancel: cancel}
		pr.Close()
	}
	return resp, nil
}

// Close waits for the Handlers still serving requests (each ends when its
// request's context is done or its body closed).
func (t *Transport) Close() { t.wg.Wait() }

// pipeWriter is the http.ResponseWriter of one in-process request. Until
// the Handler flushes, what it writes is kept; from then on it goes
// through the pipe. Only the Handler's goroutine calls its methods; the
// caller of RoundTrip reads status, sent, streaming and buf once ready is
// closed.
type pipeWriter struct {
	header    http.Header
	sent      http.Header // header as it was when the status was written
	status    int
	pw        *io.PipeWriter
	buf       bytes.Buffer
	streaming bool
	ready     chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.sent = w.header.Clone()
	}
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.streaming {
		return w.pw.Write(b)
	}
	return w.buf.Write(b)
}

// Flush hands the response to the caller and streams the rest of it.
func (w *pipeWriter) Flush() {
	w.WriteHeader(http.StatusOK)
	if w.streaming {
		return
	}
	w.streaming = true
	close(w.ready)
	if w.buf.Len() > 0 {
		_, _ = w.pw.Write(w.buf.Bytes())
		w.buf.Reset()
	}
}

// done hands a response that was never flushed to the caller, whole.
func (w *pipeWriter) done() {
	w.WriteHeader(http.StatusOK)
	if !w.streaming {
		close(w.ready)
	}
}

// pipeBody is a response's body; closing it ends the Handler's request.
type pipeBody struct {
	r      io.Reader
	cancel context.CancelFunc
}

func (b *pipeBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *pipeBody) Close() error {
	b.cancel()
	if c, ok := b.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
