package transport

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/gateway/internal/dispatch"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
)

// Server-to-client streams.
//
// A session may hold one GET stream (2025-11-25 basic/transports,
// "Listening for Messages from the Server"). The gateway sends on it what it
// originates itself: list_changed notifications when a config reload or an
// upstream's new list changes what the session's tenant sees. A second GET
// for the same session replaces the first, so that no message is ever sent
// on two streams. Streams are per replica; each replica notifies the streams
// it holds, and every replica reloads the same config. A session's GET
// stream also carries what dispatch relays to it from the session's
// upstream streams and the session bus (see dispatch.Server.Listen).

// heartbeat is how often an idle stream carries an SSE comment, which keeps
// intermediaries from timing it out and lets the gateway notice a session
// that was deleted on another replica.
const heartbeat = 25 * time.Second

// streamBuffer bounds the messages queued for a slow stream; beyond it,
// list_changed notifications are dropped, which loses nothing, since one
// queued notification of a kind already tells the client to list again.
const streamBuffer = 16

// drainRetry is the reconnection delay, in the SSE retry field, that a
// draining replica gives the streams it ends: by then the load balancers
// route elsewhere (see [Handler.Drain]).
const drainRetry = time.Second

type stream struct {
	sessionID string
	principal string // principalKey: issuer, subject, tenant
	tenant    string
	ch        chan []byte
	done      chan struct{} // closed when replaced or closed by the gateway
	once      sync.Once
	drained   atomic.Bool // set before done is closed by a drain
}

func (s *stream) stop() { s.once.Do(func() { close(s.done) }) }

// streams are the open server-to-client streams of this replica, counted
// per principal and per tenant for limits.streams_per_principal and
// limits.streams_per_tenant. The counts are per replica: each replica
// bounds what it holds, so a principal may hold the cap on every replica.
type streams struct {
	mu          sync.Mutex
	bySession   map[string]*stream
	byPrincipal map[string]int // open streams per principal; no zero entries
	byTenant    map[string]int // open streams per tenant; no zero entries
	draining    bool           // set by drain: streams end as they open
}

// streamCaps are the caps open checks a new stream against.
type streamCaps struct{ perPrincipal, perTenant int }

// open registers a new stream for a session, ending the one it replaces.
// A stream that replaces one takes its place in the counts; any other is
// refused when its principal or tenant holds as many as caps allow: s is
// then nil, and limit (a telemetry.Limit* name) and max say which cap.
func (ss *streams) open(sessionID, principal, tenant string, caps streamCaps) (s *stream, limit string, max int) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.bySession == nil {
		ss.bySession = make(map[string]*stream)
		ss.byPrincipal = make(map[string]int)
		ss.byTenant = make(map[string]int)
	}
	old := ss.bySession[sessionID]
	if old == nil {
		switch {
		case ss.byPrincipal[principal] >= caps.perPrincipal:
			return nil, telemetry.LimitStreamsPrincipal, caps.perPrincipal
		case ss.byTenant[tenant] >= caps.perTenant:
			return nil, telemetry.LimitStreamsTenant, caps.perTenant
		}
	} else {
		old.stop()
		ss.uncountLocked(old)
	}
	s = &stream{sessionID: sessionID, principal: principal, tenant: tenant, ch: make(chan []byte, streamBuffer), done: make(chan struct{})}
	if ss.draining {
		// Opened after the drain swept the others (its request was in
		// flight): it ends like them, at once.
		s.drained.Store(true)
		s.stop()
	}
	ss.bySession[sessionID] = s
	ss.byPrincipal[principal]++
	ss.byTenant[tenant]++
	return s, "", 0
}

func (ss *streams) uncountLocked(s *stream) {
	decr(ss.byPrincipal, s.principal)
	decr(ss.byTenant, s.tenant)
}

// decr decrements m[k], deleting it at zero so that the maps hold only the
// principals and tenants with open streams.
func decr(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}

// remove unregisters s if it is still the session's stream.
func (ss *streams) remove(s *stream) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.bySession[s.sessionID] == s {
		delete(ss.bySession, s.sessionID)
		ss.uncountLocked(s)
	}
}

// end ends the stream of a session, if this replica holds one.
func (ss *streams) end(sessionID string) {
	ss.mu.Lock()
	s := ss.bySession[sessionID]
	if s != nil {
		delete(ss.bySession, sessionID)
		ss.uncountLocked(s)
	}
	ss.mu.Unlock()
	if s != nil {
		s.stop()
	}
}

// drain ends every open stream and every stream opened from now on, each
// with its reconnection delay (see [Handler.Drain]).
func (ss *streams) drain() {
	ss.mu.Lock()
	ss.draining = true
	ss.mu.Unlock()
	ss.each(func(s *stream) {
		s.drained.Store(true)
		s.stop()
	})
}

// each calls fn for every open stream, outside the lock.
func (ss *streams) each(fn func(s *stream)) {
	ss.mu.Lock()
	list := make([]*stream, 0, len(ss.bySession))
	for _, s := range ss.bySession {
		list = append(list, s)
	}
	ss.mu.Unlock()
	for _, s := range list {
		fn(s)
	}
}

// send queues msg on s without blocking.
func (s *stream) send(msg []byte) {
	select {
	case s.ch <- msg:
	default: // full: the client has list_changed queued already
	}
}

// streamHooks adapt the stream loop to one kind of stream.
type streamHooks struct {
	// first, if set, is sent before anything else.
	first []byte
	// shape turns a queued message into what the stream sends; nil drops
	// it. Nil shape sends messages as they are.
	shape func(msg []byte) []byte
	// alive, if set, runs at each heartbeat and reports whether the stream
	// should go on.
	alive func(ctx context.Context) bool
	// ended, if set, is sent when the gateway ends the stream.
	ended []byte
	// source, if set, is started once the stream is open and returns
	// more messages for it, the shape each goes through (nil drops it),
	// and stop, which ends them and waits. ctx ends with the stream.
	source func(ctx context.Context) (msgs <-chan []byte, shape func([]byte) []byte, stop func())
	// log, if set, gives the stream's events ids (resume.go).
	log *streamLog
	// replay, if set, writes a resumed stream's logged events before
	// anything else, and reports whether the stream goes on.
	replay func(ctx context.Context, out *responder) bool
	// detach lets the stream be served outside its handler (detach.go):
	// nothing the handler holds may be needed once it has returned, and
	// every hook takes the stream's context from its arguments.
	detach bool
}

// runStream registers a stream under key for rq's principal and serves it
// as SSE until the client leaves, the gateway ends it, or a hook says stop.
// The GET stream of a session and a subscriptions/listen stream (request
// id and method) both run here. A stream over the principal's or the
// tenant's cap is answered 429 before anything else happens.
func (h *Handler) runStream(w http.ResponseWriter, r *http.Request, rq *dispatch.Request, key string, id jsonrpc.ID, method string, hooks streamHooks) {
	lim := rq.State().Config().Limits
	s, limit, max := h.streams.open(key, dispatch.PrincipalKey(rq), rq.Principal().Tenant,
		streamCaps{perPrincipal: lim.StreamsPerPrincipal, perTenant: lim.StreamsPerTenant})
	if s == nil {
		h.tooMany(w, r, rq, id, method, limit, int64(max))
		return
	}
	// A reload that removed the tenant after this request took its
	// snapshot stops the streams it finds registered; one registered just
	// now, after that sweep, sees the new config here instead.
	if cur := h.srv.Current(); cur != rq.State() && !cur.Tenants().Known(rq.Principal().Tenant) {
		h.streams.remove(s)
		writeError(w, http.StatusForbidden, id, jsonrpc.CodeInvalidRequest, "Forbidden: unknown tenant")
		return
	}
	if hooks.detach {
		if d := detach(w, r); d != nil {
			started := h.loops.Go(func(owner context.Context) {
				stop := context.AfterFunc(owner, d.cancel)
				defer stop()
				defer d.close()
				h.streamLoop(d, d.ctx, s, hooks)
			})
			if !started { // the gateway is closing
				h.streams.remove(s)
				d.close()
			}
			return
		}
	}
	h.streamLoop(w, r.Context(), s, hooks)
}

// streamLoop serves the stream s on w until ctx ends (the client left),
// the gateway ends it, or a hook says stop.
func (h *Handler) streamLoop(w http.ResponseWriter, ctx context.Context, s *stream, hooks streamHooks) {
	defer h.streams.remove(s)
	out := newResponder(w)
	out.onSSE = h.metrics.SSEStreamOpened
	out.log = hooks.log
	out.startSSE()
	defer h.metrics.SSEStreamClosed()
	if hooks.replay != nil && !hooks.replay(ctx, out) {
		return
	}
	if hooks.first != nil && out.Event(hooks.first) != nil {
		return
	}
	var relayed <-chan []byte // nil, never ready, without a source
	var relay func([]byte) []byte
	if hooks.source != nil {
		var stop func()
		relayed, relay, stop = hooks.source(ctx)
		defer stop()
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	rc := http.NewResponseController(w)
	for {
		out.release() // nothing held while the stream waits
		select {
		case msg := <-s.ch:
			if hooks.shape != nil {
				if msg = hooks.shape(msg); msg == nil {
					continue
				}
			}
			if out.Event(msg) != nil {
				return
			}
		case msg := <-relayed:
			if msg = relay(msg); msg != nil && out.Event(msg) != nil {
				return
			}
		case <-tick.C:
			if _, err := w.Write([]byte(": keepalive\n\n")); err != nil {
				return
			}
			_ = rc.Flush()
			hooks.log.touch()
			if hooks.alive != nil && !hooks.alive(ctx) {
				return
			}
		case <-s.done:
			if s.drained.Load() {
				// Not ended: moved. A retry field and no response, so
				// that the client reconnects (2025-11-25
				// basic/transports, "Listening for Messages from the
				// Server": a server that closes the connection without
				// terminating the stream SHOULD send a retry field). A
				// subscriptions/listen stream gets no graceful closure
				// either: 2026-07-28 basic/patterns/subscriptions says a
				// close without it is a trigger to listen again, which a
				// replica leaving a fleet wants.
				_ = out.Retry(drainRetry)
			} else if hooks.ended != nil {
				_ = out.Event(hooks.ended)
			}
			return
		case <-ctx.Done():
			return
		}
	}
}

// serveStream serves a session's GET stream: the gateway's list_changed,
// and what dispatch relays from the session's upstream streams and the
// session bus (see dispatch.Server.Listen).
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request, rq *dispatch.Request) {
	h.runStream(w, r, rq, rq.Session.ID, jsonrpc.ID{}, "", h.getStreamHooks(rq, h.logTarget(r, rq, 'g', jsonrpc.ID{}).newLog(), nil))
}

// getStreamHooks are the hooks of a session's GET stream, logged by l
// and resumed by replay (either may be nil): it relays what dispatch
// hears for the session outside any request (dispatch.Server.Listen).
func (h *Handler) getStreamHooks(rq *dispatch.Request, l *streamLog, replay func(context.Context, *responder) bool) streamHooks {
	id := rq.Session.ID
	return streamHooks{
		log:    l,
		replay: replay,
		detach: true,
		source: func(ctx context.Context) (<-chan []byte, func([]byte) []byte, func()) { return h.srv.Listen(ctx, rq) },
		alive: func(ctx context.Context) bool {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := h.store.Get(ctx, id)
			return !errors.Is(err, session.ErrNotFound) // deleted, maybe on another replica
		},
	}
}
