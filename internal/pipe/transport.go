package pipe

import (
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

// RoundTrip serves req. It returns when the Handler has written the
// response's status and headers.
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
			w.writeHeader(http.StatusOK)
			pw.Close()
			in.Body.Close()
		}()
		t.h.ServeHTTP(w, in)
	}()
	// As with net/http, the request's context ending fails the body's
	// reads, and so the Handler's writes, whoever holds the body.
	context.AfterFunc(ctx, func() { pr.CloseWithError(context.Cause(ctx)) })
	select {
	case <-w.ready:
	case <-ctx.Done():
		cancel()
		return nil, context.Cause(req.Context())
	}
	return &http.Response{
		Status:        http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &pipeBody{pr: pr, cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}, nil
}

// Close waits for the Handlers still serving requests (each ends when its
// request's context is done or its body closed).
func (t *Transport) Close() { t.wg.Wait() }

// pipeWriter is the http.ResponseWriter of one in-process request.
type pipeWriter struct {
	header http.Header
	sent   http.Header // header as it was when the status was written
	status int
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) { w.writeHeader(code) }

func (w *pipeWriter) writeHeader(code int) {
	w.once.Do(func() {
		w.status = code
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.writeHeader(http.StatusOK)
	return w.pw.Write(b)
}

// Flush does nothing: a pipe has no buffer, every Write is read as it is.
func (w *pipeWriter) Flush() {}

// pipeBody is a response's body; closing it ends the Handler's request.
type pipeBody struct {
	pr     *io.PipeReader
	cancel context.CancelFunc
}

func (b *pipeBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *pipeBody) Close() error {
	b.cancel()
	return b.pr.Close()
}
