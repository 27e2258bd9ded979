package router

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
)

// Server-to-client streams.
//
// A session may hold one GET stream (2025-11-25 basic/transports,
// "Listening for Messages from the Server"). The gateway sends on it what it
// originates itself: list_changed notifications when a config reload or an
// upstream's new list changes what the session's tenant sees. A second GET
// for the same session replaces the first, so that no message is ever sent
// on two streams. Streams are per replica; each replica notifies the streams
// it holds, and every replica reloads the same config.

// heartbeat is how often an idle stream carries an SSE comment, which keeps
// intermediaries from timing it out and lets the gateway notice a session
// that was deleted on another replica.
const heartbeat = 25 * time.Second

// streamBuffer bounds the messages queued for a slow stream; beyond it,
// list_changed notifications are dropped, which loses nothing, since one
// queued notification of a kind already tells the client to list again.
const streamBuffer = 16

type stream struct {
	sessionID string
	tenant    string
	ch        chan []byte
	done      chan struct{} // closed when replaced or closed by the gateway
	once      sync.Once
}

func (s *stream) stop() { s.once.Do(func() { close(s.done) }) }

type streams struct {
	mu        sync.Mutex
	bySession map[string]*stream
}

// open registers a new stream for a session, ending the one it replaces.
func (ss *streams) open(sessionID, tenant string) *stream {
	s := &stream{sessionID: sessionID, tenant: tenant, ch: make(chan []byte, streamBuffer), done: make(chan struct{})}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.bySession == nil {
		ss.bySession = make(map[string]*stream)
	}
	if old := ss.bySession[sessionID]; old != nil {
		old.stop()
	}
	ss.bySession[sessionID] = s
	return s
}

// remove unregisters s if it is still the session's stream.
func (ss *streams) remove(s *stream) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.bySession[s.sessionID] == s {
		delete(ss.bySession, s.sessionID)
	}
}

// end ends the stream of a session, if this replica holds one.
func (ss *streams) end(sessionID string) {
	ss.mu.Lock()
	s := ss.bySession[sessionID]
	delete(ss.bySession, sessionID)
	ss.mu.Unlock()
	if s != nil {
		s.stop()
	}
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

// count returns how many streams are open, for metrics.
func (ss *streams) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.bySession)
}

// listChangedMethod names, by kind, the notification that its list changed.
var listChangedMethod = [...]string{
	kindTools:     "notifications/tools/list_changed",
	kindPrompts:   "notifications/prompts/list_changed",
	kindResources: "notifications/resources/list_changed",
	kindTemplates: "notifications/resources/list_changed",
}

// listChanged returns the notification that the given kind's list changed.
func listChanged(k kind) []byte {
	return jsonrpc.AppendRequest(nil, jsonrpc.ID{}, listChangedMethod[k], nil)
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
}

// runStream registers a stream under key for tenant and serves it as SSE
// until the client leaves, the gateway ends it, or a hook says stop. The GET
// stream of a session and a subscriptions/listen stream both run here.
func (h *Handler) runStream(w http.ResponseWriter, r *http.Request, key, tenant string, hooks streamHooks) {
	s := h.streams.open(key, tenant)
	defer h.streams.remove(s)
	out := newResponder(w)
	out.onSSE = h.metrics.SSEStreamOpened
	out.startSSE()
	defer h.metrics.SSEStreamClosed()
	if hooks.first != nil && out.event(hooks.first) != nil {
		return
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	rc := http.NewResponseController(w)
	for {
		select {
		case msg := <-s.ch:
			if hooks.shape != nil {
				if msg = hooks.shape(msg); msg == nil {
					continue
				}
			}
			if out.event(msg) != nil {
				return
			}
		case <-tick.C:
			if _, err := w.Write([]byte(": keepalive\n\n")); err != nil {
				return
			}
			_ = rc.Flush()
			if hooks.alive != nil && !hooks.alive(r.Context()) {
				return
			}
		case <-s.done:
			if hooks.ended != nil {
				_ = out.event(hooks.ended)
			}
			return
		case <-r.Context().Done():
			return
		}
	}
}

// serveStream serves a session's GET stream.
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request, rq *request) {
	id := rq.sess.ID
	h.runStream(w, r, id, rq.principal.Tenant, streamHooks{
		alive: func(ctx context.Context) bool {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := h.store.Get(ctx, id)
			return !errors.Is(err, session.ErrNotFound) // deleted, maybe on another replica
		},
	})
}
