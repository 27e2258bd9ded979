package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/auth"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/rpcerr"
)

// A responder writes the answer to one POSTed request: either one
// application/json body, or an SSE stream of messages that ends with the
// response. It switches to SSE when the upstream streams (the gateway mirrors
// the upstream's choice), and once headers are out it never writes a second
// status.
type responder struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	discard bool // a collector: nothing is written
	// publicURL is the gateway's, whose protected resource metadata a
	// step-up challenge points to.
	publicURL string
	// onSSE, if set, is called once when the response becomes a stream.
	onSSE func()
	// log, if set, gives the stream's events ids and logs them, so that
	// the client can resume it (see resume.go). With logTo set, startSSE
	// makes it: a JSON body costs nothing.
	log    *streamLog
	logTo  logTarget
	hangUp hangUp // see callContext

	mu      sync.Mutex
	sse     bool
	written bool // headers sent
	buf     []byte

	// With lazyHeaders (see deferHeaders), a stream's headers wait for its
	// first event, or for headerTimer.
	lazyHeaders bool
	unflushed   bool // headers written, not flushed
	headerTimer *time.Timer
	// streamTimer starts a stream that Stream deferred (see Stream).
	streamTimer *time.Timer
	finished    bool // the handler is done with w: nothing may touch it
}

// sseHeaderDelay bounds how long the headers of a relayed stream wait for
// its first event before they are flushed alone.
const sseHeaderDelay = 50 * time.Millisecond

func newResponder(w http.ResponseWriter) *responder {
	return &responder{w: w, rc: http.NewResponseController(w)}
}

// newCollector returns a responder that writes nothing: it drops relayed
// notifications, and its caller takes the final message from dispatch.
// Batched requests are served with one.
func newCollector() *responder { return &responder{discard: true} }

// deferHeaders lets the headers of a stream this responder starts wait for
// its first event, for at most sseHeaderDelay, so that they reach the
// client in the same write. An upstream's answer mostly follows its
// headers at once, and flushing them alone cost a write to the connection
// and a wakeup of the client per call. The caller must call finish before
// the handler returns.
func (r *responder) deferHeaders() { r.lazyHeaders = true }

// finish marks the responder done with its ResponseWriter: a header flush
// still pending (see deferHeaders) is dropped, the handler's return sends
// the headers.
func (r *responder) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished = true
	r.stopStreamTimerLocked()
	r.flushedLocked()
	r.log.end()
}

// stopStreamTimerLocked cancels a stream start Stream deferred: the
// answer has begun otherwise, or is over. r.mu must be held; a timer
// already firing waits for it, then finds the answer written.
func (r *responder) stopStreamTimerLocked() {
	if r.streamTimer != nil {
		r.streamTimer.Stop()
		r.streamTimer = nil
	}
}

// flushedLocked notes that the headers are out (or need not be flushed).
func (r *responder) flushedLocked() {
	r.unflushed = false
	if r.headerTimer != nil {
		r.headerTimer.Stop()
		r.headerTimer = nil
	}
}

// flushHeaders flushes the headers of a stream no event has followed yet.
func (r *responder) flushHeaders() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unflushed && !r.finished {
		r.unflushed = false
		_ = r.rc.Flush()
	}
}

// startSSE sends the headers of an SSE response. It is a no-op if the
// response has started already.
func (r *responder) startSSE() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.startSSELocked()
}

// startSSELocked is startSSE with r.mu held.
func (r *responder) startSSELocked() {
	r.stopStreamTimerLocked()
	if r.written || r.discard || r.finished {
		return
	}
	h := r.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	r.w.WriteHeader(http.StatusOK)
	r.sse, r.written = true, true
	if r.onSSE != nil {
		r.onSSE()
	}
	if r.log == nil {
		r.log = r.logTo.newLog()
	}
	if r.log != nil {
		// 2025-11-25 basic/transports, "Sending Messages to the Server"
		// 6: an event with an id and empty data first, which the client
		// can resume from before anything else is sent.
		if r.buf == nil {
			r.buf = getEventBuf() // the last event's too, see lastEvent
		}
		r.buf = r.log.appendPriming(r.buf[:0])
		_, _ = r.w.Write(r.buf)
	}
	if r.lazyHeaders {
		r.unflushed = true
		r.headerTimer = time.AfterFunc(sseHeaderDelay, r.flushHeaders)
		return
	}
	_ = r.rc.Flush() // flushing is best-effort
}

// Event writes one JSON-RPC message as an SSE event and flushes it, so the
// client sees it as soon as the upstream sent it. It switches the response
// to SSE if needed.
func (r *responder) Event(msg []byte) error {
	if r.discard {
		return nil
	}
	r.startSSE()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.sse {
		return nil // a JSON body was written already; nothing can follow it
	}
	if r.buf == nil {
		r.buf = getEventBuf() // given back by release between events
	}
	r.buf = r.log.appendID(r.buf[:0], msg, false)
	if r.log.detached() {
		return nil // logged for a resume; the connection is gone
	}
	r.buf = appendEvent(r.buf, msg)
	if _, err := r.w.Write(r.buf); err != nil {
		return r.gone(err)
	}
	r.flushedLocked()
	if err := r.rc.Flush(); err != nil {
		return r.gone(err)
	}
	return nil
}

// gone handles a failed write: the client is gone, unless the stream is
// logged, when the events go on to the log for the client to resume
// (2025-11-25 basic/transports: disconnection is no cancellation).
func (r *responder) gone(err error) error {
	if r.log.resumable() {
		r.log.detach()
		return nil
	}
	return fmt.Errorf("%w: %w", rpcerr.ErrClientGone, err)
}

// Retry writes an SSE block with only a retry field, d in milliseconds,
// and flushes it: the client waits that long before it reconnects. It
// dispatches no event (WHATWG HTML, "Interpreting an event stream"). It is
// a no-op unless the response is an SSE stream.
func (r *responder) Retry(d time.Duration) error {
	if r.discard {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.sse {
		return nil
	}
	r.buf = append(r.buf[:0], "retry: "...)
	r.buf = strconv.AppendInt(r.buf, d.Milliseconds(), 10)
	r.buf = append(r.buf, "\n\n"...)
	if _, err := r.w.Write(r.buf); err != nil {
		return fmt.Errorf("%w: %w", rpcerr.ErrClientGone, err)
	}
	r.flushedLocked()
	if err := r.rc.Flush(); err != nil {
		return fmt.Errorf("%w: %w", rpcerr.ErrClientGone, err)
	}
	return nil
}

// lastEvent writes the response message as the stream's last event. It is
// not flushed: the handler returns right after it, and net/http then
// flushes it together with the end of the chunked body, one write to the
// connection instead of two. The event buffer goes back to its pool.
func (r *responder) lastEvent(build func(dst []byte) []byte, msg func() []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.buf == nil {
		r.buf = getEventBuf()
	}
	r.buf = r.buf[:0]
	if r.log != nil {
		// The message is made once, for the log and the event.
		m := msg()
		r.buf = r.log.appendID(r.buf, m, true)
		build = func(dst []byte) []byte { return appendEvent(dst, m) }
	}
	if !r.log.detached() {
		r.buf = build(r.buf)
		_, _ = r.w.Write(r.buf)
	}
	r.flushedLocked() // the handler's return flushes
	putEventBuf(r.buf)
	r.buf = nil
}

// release gives the event buffer back to the pool. A long-lived stream
// calls it whenever it waits for its next message: 10,000 idle GET
// streams would otherwise hold 4 KiB each (40 MiB, twice that in the
// garbage collector's headroom) for the priming event or the last
// message they sent; the next event takes a buffer again.
func (r *responder) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.buf != nil {
		putEventBuf(r.buf)
		r.buf = nil
	}
}

// eventBufPool holds buffers for the last event of a streamed response: a
// 10 KB tool result would otherwise need a new buffer of that size (and
// before it, one for the JSON-RPC response) for every call.
var eventBufPool sync.Pool

// maxPooledEventBuf bounds the buffers kept in eventBufPool, so that one
// large answer (a long list) does not stay allocated in the pool.
const maxPooledEventBuf = 64 << 10

func getEventBuf() []byte {
	if p, ok := eventBufPool.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, 4<<10)
}

func putEventBuf(b []byte) {
	if cap(b) <= maxPooledEventBuf {
		eventBufPool.Put(&b)
	}
}

// appendEvent appends msg as an SSE "message" event. A payload with line
// breaks (JSON may contain them between tokens) is split over several data
// lines, which the client joins back with "\n".
func appendEvent(dst, msg []byte) []byte {
	dst = append(dst, "event: message\n"...)
	if bytes.IndexByte(msg, '\n') < 0 && bytes.IndexByte(msg, '\r') < 0 {
		// The common case, found with two vectorized scans.
		dst = append(dst, "data: "...)
		dst = append(dst, msg...)
		return append(dst, "\n\n"...)
	}
	for {
		i := bytes.IndexAny(msg, "\r\n")
		if i < 0 {
			break
		}
		dst = append(dst, "data: "...)
		dst = append(dst, msg[:i]...)
		dst = append(dst, '\n')
		if msg[i] == '\r' && i+1 < len(msg) && msg[i+1] == '\n' {
			i++
		}
		msg = msg[i+1:]
	}
	dst = append(dst, "data: "...)
	dst = append(dst, msg...)
	return append(dst, "\n\n"...)
}

// appendResultEvent appends the success response to request id as an SSE
// "message" event: appendEvent(dst, jsonrpc.AppendResult(nil, id, result)),
// without the response's own buffer when result has no line breaks.
func appendResultEvent(dst []byte, id jsonrpc.ID, result json.RawMessage) []byte {
	if bytes.IndexByte(result, '\n') >= 0 || bytes.IndexByte(result, '\r') >= 0 {
		return appendEvent(dst, jsonrpc.AppendResult(nil, id, result))
	}
	dst = slices.Grow(dst, len(result)+len(id.Raw())+64)
	dst = append(dst, "event: message\ndata: "...)
	dst = jsonrpc.AppendResult(dst, id, result)
	return append(dst, "\n\n"...)
}

// final writes the response message: as the last SSE event when streaming,
// else as an application/json body with the given status. Nothing may be
// written after it.
func (r *responder) final(status int, msg []byte) {
	r.last(func(dst []byte) []byte { return appendEvent(dst, msg) }, func() []byte { return msg }, func() { writeJSON(r.w, status, msg) })
}

// last writes the response message: with event, as the stream's last
// event (msg returns the message, for the log), or, when nothing was
// written yet, with body, as the whole body, r.mu held.
func (r *responder) last(event func(dst []byte) []byte, msg func() []byte, body func()) {
	r.mu.Lock()
	// Decided under one hold of the lock: a deferred stream start (see
	// Stream) must not slip in between.
	r.stopStreamTimerLocked()
	sse, written := r.sse, r.written
	if !sse && !written {
		r.written = true
		body()
	}
	r.mu.Unlock()
	if sse {
		r.lastEvent(event, msg)
	}
}

// Result writes a success response. As a JSON body it is written in
// three parts, so that a large result (a cached list) is not copied into a
// new envelope for every response.
func (r *responder) Result(id jsonrpc.ID, result json.RawMessage) {
	r.last(func(dst []byte) []byte { return appendResultEvent(dst, id, result) },
		func() []byte { return jsonrpc.AppendResult(nil, id, result) },
		func() { r.writeResult(id, result) })
}

// writeResult writes a success response as the whole body.
func (r *responder) writeResult(id jsonrpc.ID, result json.RawMessage) {
	head := jsonrpc.AppendResult(nil, id, json.RawMessage("0"))
	head = head[:len(head)-2] // up to `"result":`
	if len(result) == 0 {
		result = json.RawMessage("{}")
	}
	h := r.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(head)+len(result)+1))
	r.w.WriteHeader(http.StatusOK)
	_, _ = r.w.Write(head)
	_, _ = r.w.Write(result)
	_, _ = r.w.Write([]byte{'}'})
}

// Stream implements dispatch.Out: the upstream streams, so may the
// answer. A POST's answer (see deferHeaders) becomes a stream at its
// first event, or sseHeaderDelay after Stream, whichever comes first: an
// upstream that streams nothing but its result within that time is
// answered with an application/json body, which needs no event ids, no
// priming event and no event log (a Redis round trip for each), and
// which no client can lose half of. A slower call gets its stream and its
// priming event then, so that a client whose connection drops can resume
// it (see resume.go).
func (r *responder) Stream() {
	if !r.lazyHeaders {
		r.startSSE()
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.written || r.discard || r.finished || r.streamTimer != nil {
		return
	}
	r.streamTimer = time.AfterFunc(sseHeaderDelay, r.startDeferred)
}

// startDeferred starts the stream Stream deferred, and flushes its
// headers and priming event at once: the client has waited already.
func (r *responder) startDeferred() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.streamTimer == nil {
		return // stopped: the answer began, or is over
	}
	r.streamTimer = nil
	r.startSSELocked()
	if r.unflushed && !r.finished {
		r.flushedLocked()
		_ = r.rc.Flush()
	}
}

// Collects implements dispatch.Out: a collector sends nothing before the
// response.
func (r *responder) Collects() bool { return r.discard }

// Refuse implements dispatch.Out: a header mismatch is a 400 (2026-07-28
// basic/transports/streamable-http, "Server Validation"), so is a missing
// client capability (basic/index, "Per-request protocol fields"), a missing scope a
// 403 step-up challenge (2025-11-25 basic/authorization, "Scope Challenge
// Handling"), when nothing was written yet.
func (r *responder) Refuse(id jsonrpc.ID, err error) bool {
	if r.discard || r.Started() {
		return false
	}
	var hm *catalog.HeaderMismatchError
	var se *rpcerr.ScopeError
	var ce *protocol.CapabilityError
	var ea *rpcerr.Answer
	switch {
	case errors.As(err, &ea):
		// A 2026-07-28 error answer with the status its code has.
		r.final(ea.Status, jsonrpc.AppendError(nil, id, ea.Err))
		return true
	case errors.As(err, &ce):
		// 2026-07-28 basic/index, "Per-request protocol fields".
		r.final(http.StatusBadRequest, jsonrpc.AppendError(nil, id, ce.RPCError()))
		return true
	case errors.As(err, &hm):
		r.final(http.StatusBadRequest, jsonrpc.AppendError(nil, id, &jsonrpc.Error{Code: protocol.CodeHeaderMismatch, Message: hm.Error()}))
		return true
	case errors.As(err, &se):
		r.challenge(auth.MetadataURL(r.publicURL), se.Scopes)
		return true
	}
	return false
}

// challenge answers 403 with an insufficient_scope challenge naming scopes.
func (r *responder) challenge(resourceMetadataURL string, scopes []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.written = true
	auth.InsufficientScope(r.w, resourceMetadataURL, scopes)
}

// Started reports whether headers have been sent.
func (r *responder) Started() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError answers with a JSON-RPC error response and an HTTP status. Used
// for transport-level failures, where no request was dispatched.
func writeError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, msg string) {
	writeJSON(w, status, jsonrpc.AppendError(nil, id, &jsonrpc.Error{Code: code, Message: msg}))
}
