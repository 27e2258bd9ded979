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

// listChanged returns the notification that the given kind's list changed.
func listChanged(k kind) []byte {
	m := map[kind]string{
		kindTools:     "notifications/tools/list_changed",
		kindPrompts:   "notifications/prompts/list_changed",
		kindResources: "notifications/resources/list_changed",
		kindTemplates: "notifications/resources/list_changed",
	}[k]
	return jsonrpc.AppendRequest(nil, jsonrpc.ID{}, m, nil)
}

// serveStream serves an open GET stream until the client leaves, the
// session ends, or the stream is replaced.
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request, rq *request) {
	s := h.streams.open(rq.sess.ID, rq.principal.Tenant)
	defer h.streams.remove(s)
	out := newResponder(w)
	out.onSSE = h.metrics.SSEStreamOpened
	out.startSSE()
	defer h.metrics.SSEStreamClosed()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	rc := http.NewResponseController(w)
	for {
		select {
		case msg := <-s.ch:
			if out.event(msg) != nil {
				return
			}
		case <-tick.C:
			if _, err := w.Write([]byte(": keepalive\n\n")); err != nil {
				return
			}
			_ = rc.Flush()
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			_, err := h.store.Get(ctx, s.sessionID)
			cancel()
			if errors.Is(err, session.ErrNotFound) {
				return // deleted, maybe on another replica
			}
		case <-s.done:
			return
		case <-r.Context().Done():
			return
		}
	}
}
