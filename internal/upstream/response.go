package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
)

const (
	// maxReconnects bounds the GETs that try to resume a broken event stream
	// without the stream making progress (a new event id) in between.
	maxReconnects = 3
	// drainWait bounds how long Close waits for the end of an event stream
	// whose response has arrived; reading to the end lets an HTTP/1
	// connection be reused.
	drainWait = 100 * time.Millisecond
	maxDrain  = 64 << 10
)

// errStreamEnded is the error for an event stream that ended, and could not
// be resumed, before the response arrived.
var errStreamEnded = errors.New("stream ended before the response")

// errClosed is returned by Next after Close.
var errClosed = errors.New("response closed")

// A Response is the upstream's answer to one request: one JSON message, or an
// event stream of messages that ends with the response. Next and Close must
// not be called concurrently with each other, except that Close may be called
// to abort a Next blocked on the upstream.
type Response struct {
	c           *Client
	s           session.Upstream
	id          jsonrpc.ID
	method      string
	ctx         context.Context // the caller's: tells "client gone" from "timed out"
	tctx        context.Context // ctx bounded by the upstream's timeout
	stop        context.CancelFunc
	cancellable bool // false for initialize
	inFlight    bool // the upstream may be working on the request
	header      http.Header
	length      int64         // the answer's Content-Length, -1 when unknown
	req         *http.Request // the request sent, for its credentials (see credentialsOf)
	streaming   bool
	cred        *Scrubber // of req's credentials, once credDone
	credDone    bool

	mu   sync.Mutex // guards body, which resumption replaces
	body io.ReadCloser

	sse         *sseReader
	reconnects  int    // resumptions since the stream last made progress
	resumedFrom string // the Last-Event-ID of the last resumption
	err         error  // sticky error from Next

	done       atomic.Bool // the response has been read
	closed     atomic.Bool
	closeOnce  sync.Once
	cancelOnce sync.Once
}

// Streaming reports whether the upstream answered with text/event-stream
// rather than one application/json message.
func (r *Response) Streaming() bool { return r.streaming }

// Next returns the next message the upstream sent for this request, in
// arrival order, with its bytes exactly as received: notifications and
// server-to-client requests first, as soon as each is read, then the response
// whose id is the request's (Kind KindResponse or KindErrorResponse). After
// the response, Next returns io.EOF. Responses to other ids are dropped.
//
// Errors are *Error, and sticky. If the caller's context is done or the
// upstream's timeout fires before the response, the request is cancelled
// upstream.
func (r *Response) Next() (msg *jsonrpc.Message, raw []byte, err error) {
	switch {
	case r.closed.Load():
		return nil, nil, r.c.error(r.method, 0, errClosed)
	case r.err != nil:
		return nil, nil, r.err
	case r.done.Load():
		return nil, nil, io.EOF
	}
	if !r.streaming {
		msg, raw, err = r.nextJSON()
	} else {
		msg, raw, err = r.nextEvent()
	}
	if err == nil && r.closed.Load() {
		// Close ran while the message was being read.
		msg, raw, err = nil, nil, r.c.error(r.method, 0, errClosed)
	}
	if err == nil && msg.Kind == jsonrpc.KindErrorResponse {
		// An upstream's error (a debugging page turned JSON-RPC error)
		// may echo the request's headers: it goes to the client without
		// the upstream's secrets. Results are the upstream's content and
		// are not scanned (a per-call cost on every result).
		if e := credentialsOf(r.req).rpcError(r.c.secrets.rpcError(msg.Error)); e != msg.Error {
			m := *msg
			m.Error = e
			// The message is written again from the scrubbed error, so
			// that what is relayed raw (a parked call's answer) is as
			// clean, and valid JSON, whatever the secret looked like.
			msg, raw = &m, jsonrpc.AppendError(nil, msg.ID, e)
		}
	}
	if err == nil && msg.Kind != jsonrpc.KindErrorResponse {
		msg, raw, err = r.scrubCredentials(msg, raw)
	}
	if err != nil {
		r.err = err
		if r.tctx.Err() != nil && !r.closed.Load() {
			r.cancelUpstream()
		}
	}
	if r.sse != nil && (err != nil || r.done.Load()) {
		// Nothing more is read from the stream (Close drains the body
		// without it): its buffer can serve another request.
		r.sse.release()
	}
	return msg, raw, err
}

// scrubCredentials removes from a message the credentials the gateway
// fetched or made for this request (a token of client credentials, token
// exchange, a user's OAuth or signed identity, see Options.Credentials):
// an upstream that echoes its request headers in a result or a
// notification must not hand the client a token for the upstream. The
// config's own secrets are the content guards' (internal/guard). A
// message that would not stay valid JSON is refused.
func (r *Response) scrubCredentials(msg *jsonrpc.Message, raw []byte) (*jsonrpc.Message, []byte, error) {
	if !r.credDone {
		r.credDone = true
		r.cred = credentialsOf(r.req)
	}
	out, found := r.cred.message(raw)
	if !found {
		return msg, raw, nil
	}
	if out != nil {
		if m, err := jsonrpc.Decode(out); err == nil {
			return m, out, nil
		}
	}
	return nil, nil, r.c.error(r.method, 0, errors.New("the upstream's answer holds the request's credentials and cannot be cleaned of them"))
}

// nextJSON reads an application/json body: one message, the response.
func (r *Response) nextJSON() (*jsonrpc.Message, []byte, error) {
	data, err := readSized(io.LimitReader(r.body, int64(r.c.maxMsg)+1), r.length, r.c.maxMsg)
	if err != nil {
		return nil, nil, r.readError(err)
	}
	if len(data) > r.c.maxMsg {
		return nil, nil, r.c.error(r.method, 0, fmt.Errorf("response larger than %d bytes", r.c.maxMsg))
	}
	msg, err := jsonrpc.Decode(data)
	if err != nil {
		return nil, nil, r.c.error(r.method, 0, fmt.Errorf("invalid JSON-RPC message: %s", excerpt([]byte(err.Error()), maxExcerpt)))
	}
	if ok, err := r.isFinal(msg); err != nil {
		return nil, nil, err
	} else if !ok {
		return nil, nil, r.c.error(r.method, 0, errors.New("upstream answered with a message that is not the response"))
	}
	r.done.Store(true)
	return msg, data, nil
}

// readSized is io.ReadAll(rd) with the allocations of one buffer of the
// answer's size. io.ReadAll starts small and grows step by step: it
// allocated 24 KB for a 10 KB answer, in a dozen buffers. An answer that
// announced its size (size, its Content-Length, when it is known and at
// most max) is read into a buffer of that size, up to sizedChunk, with
// one byte more so that the read that finds the end needs no growth (a
// body longer than it said grows it, as io.ReadAll would). Any other
// (chunked, as large answers usually are) is read into a pooled buffer
// and copied out once whole.
func readSized(rd io.Reader, size int64, max int) ([]byte, error) {
	if size < 0 || size > int64(max) {
		bp := readBufPool.Get().(*[]byte)
		b, err := readInto((*bp)[:0], rd)
		out := bytes.Clone(b)
		if cap(b) <= sizedChunk {
			// A buffer grown past that is left to the collector, so that
			// the pool holds no large ones.
			*bp = b
			readBufPool.Put(bp)
		}
		return out, err
	}
	return readInto(make([]byte, 0, min(size, sizedChunk)+1), rd)
}

// readInto is io.ReadAll(rd) appending to b.
func readInto(b []byte, rd io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// sizedChunk is the most readSized allocates before bytes arrive: an
// answer larger than it grows as it comes, so that an upstream announcing
// a large Content-Length and sending it slowly holds no more of the
// gateway's memory than it sent.
const sizedChunk = 64 << 10

// readBufPool holds the buffers readSized reads an answer of unknown size
// into.
var readBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// nextEvent reads events until one carries a message for the caller.
func (r *Response) nextEvent() (*jsonrpc.Message, []byte, error) {
	for {
		ev, err := r.sse.Next()
		if err != nil {
			if errors.Is(err, errEventTooLarge) {
				return nil, nil, r.c.error(r.method, 0, err)
			}
			if err := r.resume(err); err != nil {
				return nil, nil, err
			}
			continue
		}
		if ev.Type != "message" {
			// An EventSource would not hand these to onmessage either.
			r.c.log.Debug("ignoring upstream event", "event", excerpt([]byte(r.c.Scrub(ev.Type)), 40), "rpc_method", r.method)
			continue
		}
		msg, err := jsonrpc.Decode(ev.Data)
		if err != nil {
			return nil, nil, r.c.error(r.method, 0, fmt.Errorf("invalid JSON-RPC message: %s", excerpt([]byte(err.Error()), maxExcerpt)))
		}
		if msg.Kind == jsonrpc.KindRequest || msg.Kind == jsonrpc.KindNotification {
			return msg, ev.Data, nil
		}
		ok, err := r.isFinal(msg)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			r.c.log.Debug("ignoring upstream response to another request", "rpc_method", r.method, "rpc_id", r.id.String())
			continue
		}
		r.done.Store(true)
		return msg, ev.Data, nil
	}
}

// isFinal reports whether msg is the response to this request. An error
// response with a null id, which is what a server sends when it could not
// read the request, is this request's failure; it becomes an *Error rather
// than a message, whose null id the caller could not relay.
func (r *Response) isFinal(msg *jsonrpc.Message) (bool, error) {
	switch msg.Kind {
	case jsonrpc.KindResponse, jsonrpc.KindErrorResponse:
	default:
		return false, nil
	}
	if msg.ID.String() == r.id.String() {
		return true, nil
	}
	if msg.Kind == jsonrpc.KindErrorResponse && msg.ID.IsNull() {
		return false, r.c.error(r.method, 0, shortened(msg.Error))
	}
	return false, nil
}

// readError describes an error reading the body.
func (r *Response) readError(err error) error {
	if r.closed.Load() {
		return r.c.error(r.method, 0, errClosed)
	}
	return r.c.transportError(r.tctx, r.method, err)
}

// resume reconnects a broken event stream, if the upstream gave its events
// ids, with GET and Last-Event-ID, after the delay the stream asked for. It
// returns nil once a new stream is being read.
func (r *Response) resume(cause error) error {
	for {
		if r.closed.Load() || r.tctx.Err() != nil {
			return r.readError(cause)
		}
		lastID := r.sse.LastEventID()
		if lastID != r.resumedFrom {
			r.reconnects = 0 // the stream made progress since the last attempt
		}
		if lastID == "" || r.reconnects >= maxReconnects {
			if errors.Is(cause, io.EOF) {
				return r.c.error(r.method, 0, errStreamEnded)
			}
			var ue *Error
			if errors.As(cause, &ue) {
				return r.c.error(r.method, ue.Status, fmt.Errorf("%w: %w", errStreamEnded, ue.Err))
			}
			return r.c.error(r.method, 0, fmt.Errorf("%w: %w", errStreamEnded, r.c.scrub(cause)))
		}
		r.reconnects++
		r.resumedFrom = lastID
		delay, _ := r.sse.Retry()
		r.c.log.Debug("resuming upstream stream", "rpc_method", r.method, "rpc_id", r.id.String(), "attempt", r.reconnects, "delay", delay)
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-r.tctx.Done():
				t.Stop()
				continue
			}
		}
		body, err := r.c.resume(r.tctx, r.s, r.method, lastID)
		if err != nil {
			var ue *Error
			if errors.As(err, &ue) && (errors.Is(err, ErrSessionExpired) ||
				ue.Status >= 400 && ue.Status < 500 && ue.Status != http.StatusRequestTimeout && ue.Status != http.StatusTooManyRequests) {
				// The upstream will not resume (405: it offers no GET stream).
				return r.c.error(r.method, ue.Status, fmt.Errorf("%w: resuming: %w", errStreamEnded, ue.Err))
			}
			cause = err
			continue
		}
		r.mu.Lock()
		old := r.body
		r.body = body
		r.mu.Unlock()
		old.Close()
		if r.closed.Load() { // Close ran before the new body was in place
			body.Close()
		}
		retry, hasRetry := r.sse.Retry()
		r.sse.release()
		r.sse = newSSEReader(body, lastID, r.c.maxMsg)
		r.sse.retry, r.sse.hasRetry = retry, hasRetry
		return nil
	}
}

// Close releases the response: it closes the body and stops the timer. If
// the response had not been read, the upstream is told to cancel the request.
// Close may be called more than once.
func (r *Response) Close() error {
	r.closeOnce.Do(func() {
		r.closed.Store(true)
		done := r.done.Load()
		r.mu.Lock()
		body := r.body
		r.mu.Unlock()
		if body != nil && r.streaming && done {
			// The response is in; the stream should end right after it.
			t := time.AfterFunc(drainWait, r.stop)
			_, _ = io.Copy(io.Discard, io.LimitReader(body, maxDrain))
			t.Stop()
		}
		r.stop()
		if body != nil {
			body.Close()
		}
		// Only now that nothing more is read: the cancellation could
		// otherwise race the upstream's answer to it into a Next.
		if !done {
			r.cancelUpstream()
		}
	})
	return nil
}

// cancelUpstream sends notifications/cancelled for the request, once, in the
// background, if the request may be running upstream and may be cancelled.
func (r *Response) cancelUpstream() {
	if !r.cancellable || !r.inFlight || IsModern(r.s) {
		// 2026-07-28 basic/patterns/cancellation: a request without a
		// session is cancelled by closing its stream, which Close does.
		return
	}
	r.cancelOnce.Do(func() {
		reason := "request abandoned by the gateway"
		switch {
		case isTimeout(r.tctx):
			reason = "gateway timed out after " + r.c.timeout.String()
		case r.ctx.Err() != nil:
			reason = "cancelled by the client"
		}
		params := append([]byte(`{"requestId":`), r.id.Raw()...)
		params = append(params, `,"reason":"`+reason+`"}`...)
		ctx := context.WithoutCancel(r.ctx)
		c, s, id := r.c, r.s, r.id.String()
		c.bg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, cancelTimeout)
			defer cancel()
			if err := c.notify(ctx, s, protocol.NotifyCancelled, params); err != nil {
				c.log.Debug("cancelling upstream request", "rpc_id", id, "error", err)
			}
		})
	})
}
