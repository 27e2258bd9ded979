package transport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/gateway/internal/dispatch"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/share"
	"github.com/mcpgw/gateway/internal/telemetry"
)

// Resumable streams (2025-11-25 basic/transports, "Resumability and
// Redelivery").
//
// Every SSE event the gateway sends on a session's stream (the SSE answer
// to a POST, the session's GET stream) carries an id, and is logged, before
// it is written, in the session's event log (session.EventLog: in process,
// or in Redis for every replica). An id is "<stream>.<cursor>": the stream
// ("p…" for a POST's answer, "g…" for a GET stream, then 16 random hex
// digits) and the event's cursor in that stream's log. Ids are unique
// within the session, and name their stream, so that a resume replays
// that stream only, as the spec requires.
//
// A client resumes with a GET carrying Last-Event-ID, on any replica: the
// events of that stream after the id are replayed; a POST's answer whose
// call is still running (on any replica) then goes on with its events as
// they are logged, up to the response, and a GET stream goes on as the
// session's GET stream. An id of another session, or one the log does not
// know (expired, malformed), is 400 with one message; one whose
// successors were dropped to keep the log's bounds is 400 with another.
//
// Disconnection is no cancellation ("Sending Messages to the Server" 6):
// once a POST's stream has an id the client can resume from, a client that
// hangs up leaves the call running, its events going to the log, up to
// limits.detached_calls_per_principal calls per principal,
// limits.detached_calls_per_tenant per tenant and limits.detached_calls in
// all on a replica (beyond them, the call is cancelled as before: a
// detached call is running work, never taken back for another's); the
// request timeout bounds each. notifications/cancelled still cancels.
//
// 2026-07-28 streams carry no ids: that revision has no resumable streams
// (basic/transports/streamable-http, "Resumable SSE streams via
// Last-Event-ID are not supported").

// resumeWait bounds one wait for a logged event while a resumed stream
// follows a call running elsewhere.
const resumeWait = 5 * time.Second

// streamLog logs one stream's events and gives them ids. Its methods are
// called with the responder's lock held, except resumable, and are no-ops
// on a nil streamLog.
type streamLog struct {
	log    session.EventLog
	ctx    context.Context // the request's, not cancelled when the client goes
	who    session.Principal
	sid    string
	stream string
	cursor string // the last event's

	state atomic.Int32 // logNew, logOn or logOff
	gone  atomic.Bool  // the client is gone: events are logged only
	ended bool         // the final event is logged

	// A call's stream: owner is its request's id, and calls renews its
	// lease while it runs.
	owner []byte
	calls *liveCalls
}

const (
	logNew int32 = iota // not opened yet
	logOn               // events are logged
	logOff              // the log failed: events go out without ids
)

// A logTarget says where a stream's log goes, for a responder to make it
// when its answer becomes a stream.
type logTarget struct {
	h    *Handler
	r    *http.Request
	rq   *dispatch.Request
	kind byte       // 'p' or 'g'
	id   jsonrpc.ID // a POST's request
}

// logTarget returns the log target of rq's streams, the zero one when the gateway
// keeps no event log or rq has no session (2026-07-28).
func (h *Handler) logTarget(r *http.Request, rq *dispatch.Request, kind byte, id jsonrpc.ID) logTarget {
	if h.events == nil || rq.Stateless() || rq.Session == nil {
		return logTarget{}
	}
	return logTarget{h: h, r: r, rq: rq, kind: kind, id: id}
}

// newLog returns the log of a new stream, nil for the zero logTarget.
func (t logTarget) newLog() *streamLog {
	if t.h == nil {
		return nil
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	l := &streamLog{log: t.h.events, ctx: context.WithoutCancel(t.r.Context()), who: t.rq.Session.Principal, sid: t.rq.Session.ID, stream: string(t.kind) + hex.EncodeToString(b[:])}
	if t.kind == 'p' {
		l.owner, l.calls = t.id.Raw(), &t.h.calls
	}
	return l
}

// appendPriming opens the log and appends the priming event: an id and no
// data, which dispatches nothing on the client (WHATWG HTML, "Interpreting
// an event stream") but gives it a place to resume from.
func (l *streamLog) appendPriming(dst []byte) []byte {
	if l == nil || l.state.Load() != logNew {
		return dst
	}
	c, err := l.log.Open(l.ctx, l.who, l.sid, l.stream, l.owner)
	if err != nil {
		l.state.Store(logOff)
		return dst
	}
	l.cursor = c
	l.state.Store(logOn)
	if l.calls != nil {
		l.calls.add(l)
	}
	dst = appendID(dst, l.stream, c)
	return append(dst, "data:\n\n"...)
}

// appendID logs msg as the stream's next event (final: its response) and
// appends the event's id line to dst. A log that fails is given up: the
// events after it go out without ids, so that a resume never skips one.
func (l *streamLog) appendID(dst, msg []byte, final bool) []byte {
	if l == nil || l.state.Load() != logOn {
		return dst
	}
	c, err := l.log.Append(l.ctx, l.sid, l.stream, msg, final)
	if err != nil {
		l.state.Store(logOff)
		l.calls.remove(l)
		return dst
	}
	l.cursor, l.ended = c, final
	if final {
		l.calls.remove(l)
	}
	return appendID(dst, l.stream, c)
}

// end logs the end of a stream that ended without a response (the client
// cancelled its request), so that a resumed stream ends too.
func (l *streamLog) end() {
	if l != nil && !l.ended && l.state.Load() == logOn {
		l.appendID(nil, nil, true)
	}
}

// resumable reports whether the client was given an id it can resume the
// stream from, and the log still keeps it whole.
func (l *streamLog) resumable() bool { return l != nil && l.state.Load() == logOn }

// touch keeps the log of an open stream that sends nothing from
// expiring.
func (l *streamLog) touch() {
	if l != nil && l.state.Load() == logOn {
		_ = l.log.Touch(l.ctx, l.sid, l.stream) // a failure: the next may do
	}
}

// detach notes that the client is gone: events are only logged from now on.
func (l *streamLog) detach() { l.gone.Store(true) }

// detached reports whether the client is gone from a logged stream.
func (l *streamLog) detached() bool { return l != nil && l.gone.Load() }

func appendID(dst []byte, stream, cursor string) []byte {
	dst = append(dst, "id: "...)
	dst = append(dst, stream...)
	dst = append(dst, '.')
	dst = append(dst, cursor...)
	return append(dst, '\n')
}

// replay writes a logged event, with its id, to a resumed stream. An
// event without data (the priming event, the end of a stream without a
// response) is not written. A lost call's end becomes an error response
// to its request, without an id: it is not in the log.
func (r *responder) replay(stream string, ev session.Event) error {
	if len(ev.Data) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Lost {
		id, err := jsonrpc.RawID(ev.Data)
		if err != nil {
			return nil
		}
		r.buf = appendEvent(r.buf[:0], jsonrpc.AppendError(nil, id, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: "Internal error: the call was lost: the replica serving it stopped"}))
	} else {
		r.buf = appendID(r.buf[:0], stream, ev.Cursor)
		r.buf = appendEvent(r.buf, ev.Data)
	}
	if _, err := r.w.Write(r.buf); err != nil {
		return err
	}
	r.flushedLocked()
	return r.rc.Flush()
}

// keepalive writes an SSE comment.
func (r *responder) keepalive() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.w.Write([]byte(": keepalive\n\n")); err != nil {
		return err
	}
	return r.rc.Flush()
}

// serveResume serves a GET with Last-Event-ID: it replays the events of
// the stream the id names that follow it, then goes on with that stream.
func (h *Handler) serveResume(w http.ResponseWriter, r *http.Request, rq *dispatch.Request, lastID string) {
	stream, cursor, _ := strings.Cut(lastID, ".")
	evs, err := h.events.Read(r.Context(), rq.Session.ID, stream, cursor, 0)
	if err == nil && stream[0] != 'p' && stream[0] != 'g' {
		err = session.ErrNotFound // not an id the gateway gave
	}
	switch {
	case errors.Is(err, session.ErrNotFound):
		// Unknown, expired, or of another session: one answer for all.
		h.metrics.StreamResumed(telemetry.ResumeUnknown)
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"Bad Request: Last-Event-ID names no event this session can resume from (unknown or expired)")
		return
	case errors.Is(err, session.ErrEventsGone):
		h.metrics.StreamResumed(telemetry.ResumeGone)
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"Bad Request: the events after Last-Event-ID are no longer kept (past sessions.events bounds); the stream cannot be resumed")
		return
	case err != nil:
		h.storeFailed(r, "event log", err)
		writeError(w, http.StatusServiceUnavailable, jsonrpc.ID{}, jsonrpc.CodeInternalError, "Service Unavailable: session store unavailable")
		return
	}
	h.metrics.StreamResumed(telemetry.ResumeOK)
	if stream[0] == 'g' {
		l := &streamLog{log: h.events, ctx: context.WithoutCancel(r.Context()), sid: rq.Session.ID, stream: stream, cursor: cursor}
		l.state.Store(logOn)
		h.runStream(w, r, rq, rq.Session.ID, jsonrpc.ID{}, "", h.getStreamHooks(rq, l, func(ctx context.Context, out *responder) bool {
			_, ok := h.replayLogged(ctx, out, rq.Session.ID, stream, cursor, evs)
			return ok
		}))
		return
	}
	h.followCall(w, r, rq, stream, cursor, evs)
}

// replayLogged writes evs and whatever the log holds after them, up to
// now. It returns the last cursor, and whether the stream goes on (false:
// the client is gone, or the final event was written).
func (h *Handler) replayLogged(ctx context.Context, out *responder, sid, stream, cursor string, evs []session.Event) (string, bool) {
	for len(evs) > 0 {
		for _, ev := range evs {
			if out.replay(stream, ev) != nil {
				return cursor, false
			}
			cursor = ev.Cursor
			if ev.Final {
				return cursor, false
			}
		}
		var err error
		if evs, err = h.events.Read(ctx, sid, stream, cursor, 0); err != nil {
			return cursor, false
		}
	}
	return cursor, true
}

// followCall serves a resumed POST stream: the logged events after cursor,
// then those of the call as they are logged, wherever it runs, up to its
// response. It counts as a server-to-client stream of the principal
// (limits.streams_per_principal), under a key of its own, so that a
// second resume of the same stream replaces it (no message is sent on
// two streams). It ends early when the client goes, the log is gone, the
// call cannot run any longer (the request timeout), or this replica
// drains (with a retry field, so that the client resumes elsewhere).
func (h *Handler) followCall(w http.ResponseWriter, r *http.Request, rq *dispatch.Request, stream, cursor string, evs []session.Event) {
	lim := rq.State().Config().Limits
	s, limit, max := h.streams.open(rq.Session.ID+"/"+stream, dispatch.PrincipalKey(rq), rq.Principal().Tenant,
		streamCaps{perPrincipal: lim.StreamsPerPrincipal, perTenant: lim.StreamsPerTenant})
	if s == nil {
		h.tooMany(w, r, rq, jsonrpc.ID{}, "", limit, int64(max))
		return
	}
	defer h.streams.remove(s)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	out := newResponder(w)
	out.onSSE = h.metrics.SSEStreamOpened
	out.startSSE()
	defer h.metrics.SSEStreamClosed()
	deadline := time.Now().Add(rq.State().Config().Server.RequestTimeout.D())
	lastWrite := time.Now()
	for {
		var ok bool
		if len(evs) > 0 {
			lastWrite = time.Now()
		}
		if cursor, ok = h.replayLogged(ctx, out, rq.Session.ID, stream, cursor, evs); !ok {
			return
		}
		if s.drained.Load() {
			_ = out.Retry(drainRetry)
			return
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return
		}
		if time.Since(lastWrite) >= heartbeat {
			if out.keepalive() != nil {
				return
			}
			lastWrite = time.Now()
		}
		var err error
		if evs, err = h.events.Read(ctx, rq.Session.ID, stream, cursor, resumeWait); err != nil {
			if s.drained.Load() {
				_ = out.Retry(drainRetry)
			}
			return
		}
	}
}

// liveCalls are the streams of the calls this replica runs, whose leases
// it renews (see session.EventLog.Open), so that a resume elsewhere can
// tell a call that is slow from one whose replica died. One goroutine
// renews them all, while there are any; close ends it and waits for it.
type liveCalls struct {
	mu      sync.Mutex
	m       map[*streamLog]struct{}
	running bool
	closed  bool
	stop    chan struct{} // closed by close
	wg      sync.WaitGroup
}

// touchEvery is how often the leases are renewed: well within their
// length.
const touchEvery = session.EventLease / 3

func (c *liveCalls) add(l *streamLog) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[*streamLog]struct{})
	}
	c.m[l] = struct{}{}
	if !c.running && !c.closed {
		c.running = true
		if c.stop == nil {
			c.stop = make(chan struct{})
		}
		c.wg.Add(1)
		go c.renew(c.stop)
	}
}

// close stops the renewals and waits for the goroutine that makes them:
// nothing is written to the event log after it returns. Calls still
// running then are the HTTP server's to end.
func (c *liveCalls) close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		if c.stop != nil {
			close(c.stop)
		}
	}
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *liveCalls) remove(l *streamLog) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, l)
}

// renew renews the leases until there are none to renew, or stop is
// closed.
func (c *liveCalls) renew(stop <-chan struct{}) {
	defer c.wg.Done()
	t := time.NewTicker(touchEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			c.mu.Lock()
			c.running = false
			c.mu.Unlock()
			return
		case <-t.C:
		}
		c.mu.Lock()
		if len(c.m) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		list := make([]*streamLog, 0, len(c.m))
		for l := range c.m {
			list = append(list, l)
		}
		c.mu.Unlock()
		for _, l := range list {
			_ = l.log.Touch(l.ctx, l.sid, l.stream) // a failed renewal: the next may do
		}
	}
}

// callContext returns the context of a POSTed request whose answer out
// writes: when the client hangs up, the call goes on if its stream is
// resumable and the principal's detached calls are below the limit, and
// is cancelled otherwise. out.hangUp.done must be called when the call is
// over. The watch lives in the responder, so that a call answered with
// a JSON body allocates little for it.
func (h *Handler) callContext(r *http.Request, rq *dispatch.Request, out *responder) context.Context {
	if out.logTo.h == nil {
		return r.Context()
	}
	w := &out.hangUp
	w.h, w.r, w.rq, w.out = h, r, rq, out
	var ctx context.Context
	ctx, w.cancel = context.WithCancelCause(context.WithoutCancel(r.Context()))
	w.fired.Add(1)
	w.stop = context.AfterFunc(r.Context(), w.fire)
	return ctx
}

// hangUp watches a call's client: see callContext.
type hangUp struct {
	h      *Handler
	r      *http.Request
	rq     *dispatch.Request
	out    *responder
	cancel context.CancelCauseFunc // nil: nothing watched
	stop   func() bool
	fired  sync.WaitGroup // done when fire returns
	held   bool           // a detached call is counted
}

func (w *hangUp) fire() {
	defer w.fired.Done()
	if w.out.resumable() {
		l := &w.rq.State().Config().Limits
		sh := share.Share{Pool: l.DetachedCalls, Principal: l.DetachedCallsPerPrincipal, Tenant: l.DetachedCallsPerTenant}
		limit := telemetry.LimitDetachedCalls
		switch w.h.detached.Take(dispatch.PrincipalKey(w.rq), w.rq.Principal().Tenant, sh) {
		case 0:
			w.held = true
			w.h.metrics.CallDetached(1)
			return
		case share.Tenant:
			limit = telemetry.LimitDetachedTenant
		case share.Pool:
			limit = telemetry.LimitDetachedPool
		}
		w.h.srv.LimitHit(context.WithoutCancel(w.r.Context()), w.rq, limit, "")
	}
	w.cancel(context.Cause(w.r.Context()))
}

func (w *hangUp) done() {
	if w.cancel == nil {
		return
	}
	if !w.stop() {
		w.fired.Wait()
		if w.held {
			w.h.detached.Give(dispatch.PrincipalKey(w.rq), w.rq.Principal().Tenant)
			w.h.metrics.CallDetached(-1)
		}
	}
	w.cancel(nil)
}

// resumable reports whether the client was given an id to resume the
// stream from.
func (r *responder) resumable() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.resumable()
}
