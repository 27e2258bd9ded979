package pipe

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
)

// Owned routes
//
// A Conn serves several sessions, maybe of several principals, and a stdio
// server cannot say for which session it sends what is not a response:
// over stdio there is no per-request stream (2025-11-25 basic/transports
// "stdio"). So what the server sends goes where the protocol says it
// belongs, and nowhere else:
//
//   - a response to the request of its id;
//   - a notification or request carrying a progress token to the request
//     that sent that token;
//   - a request (elicitation/create, sampling/createMessage, roots/list)
//     to the one session with requests in flight: when the requests in
//     flight are several sessions', or none, no one can tell whose it is,
//     and the server gets -32601 back (2025-11-25 basic/utilities: a
//     receiver answers a request it will not serve with an error, so the
//     server does not wait);
//   - notifications/resources/updated to the sessions that subscribed the
//     URI (server/resources "Subscriptions"), which the Handler learns from
//     their resources/subscribe and resources/unsubscribe;
//   - notifications/*/list_changed to every session: they carry nothing
//     but the news that a list changed;
//   - notifications/cancelled of a request of the server's to the session
//     asked;
//   - any other notification (notifications/message, ...) to every session
//     only while the Conn's sessions are all one principal's; else it is
//     dropped.
//
// Likewise only the session asked may answer a request of the server's.

const (
	// maxSubscriptions bounds the URIs one session subscribes; beyond it,
	// resources/subscribe fails.
	maxSubscriptions = 1024
	// maxAsked bounds the requests of the server's in flight on a Conn, and
	// maxAskedSession those one session was asked; beyond them, the server
	// gets an error back.
	maxAsked        = 1024
	maxAskedSession = 64
)

// route hands one message of the server's to whom it is for.
func (c *uconn) route(raw []byte) {
	m, err := jsonrpc.Decode(raw)
	if err != nil {
		return // a Conn returns valid messages only
	}
	switch m.Kind {
	case jsonrpc.KindResponse, jsonrpc.KindErrorResponse:
		c.routeResponse(m)
		return
	case jsonrpc.KindRequest:
		if m.Method == protocol.MethodPing {
			// The Handler is the server's one client: it answers.
			c.answer(jsonrpc.AppendResult(nil, m.ID, nil))
			return
		}
		c.routeRequest(m, raw)
		return
	}
	if m.Method == protocol.NotifyProgress {
		if tok := progressTokenOf(m.Params); tok != nil {
			c.mu.Lock()
			cl := c.progress[string(tok)]
			c.mu.Unlock()
			if cl != nil {
				m.Params = swapProgressToken(m.Params, cl.token)
				queue(cl.msgs, jsonrpc.Encode(m))
			}
			return
		}
	}
	c.routeNotification(m, raw)
}

func (c *uconn) routeResponse(m *jsonrpc.Message) {
	n, err := strconv.ParseInt(string(m.ID.Raw()), 10, 64)
	if err != nil {
		return
	}
	c.mu.Lock()
	cl := c.pending[n]
	delete(c.pending, n)
	if cl != nil && cl.subscribe != "" && m.Kind == jsonrpc.KindResponse {
		// Held before the response is delivered: an update sent right
		// after it reaches the session.
		c.hold(cl.s, cl.subscribe)
	}
	c.mu.Unlock()
	if cl == nil {
		return // cancelled, or not one of ours
	}
	m.ID = cl.id
	select {
	case cl.final <- jsonrpc.Encode(m):
	default:
	}
}

// routeRequest hands a request of the server's to the request in flight
// it belongs to, or refuses it.
func (c *uconn) routeRequest(m *jsonrpc.Message, raw []byte) {
	_, tok := swapToken(m.Params, nil)
	c.mu.Lock()
	var to *call
	if tok != nil {
		to = c.progress[string(tok)]
		if to != nil {
			m.Params, _ = swapToken(m.Params, to.token)
			raw = jsonrpc.Encode(m)
		}
	}
	if to == nil {
		to = c.onlySessionCall()
	}
	why := ""
	switch {
	case to == nil || to.s == nil:
		why = "no client session can be told to own it"
	case len(c.asked) >= maxAsked || to.s.asked >= maxAskedSession:
		why = "too many requests of the server's are waiting for an answer"
	default:
		c.asked[string(m.ID.Raw())] = to.s
		to.s.asked++
	}
	c.mu.Unlock()
	if why == "" {
		queue(to.msgs, raw)
		return
	}
	n := c.h.refused.Add(1)
	if n&(n-1) == 0 { // 1, 2, 4, ...: a flood does not flood the log
		c.h.log.Warn("refused a request of the upstream server", "tenant", c.tenant, "method", m.Method, "reason", why, "refused", n)
	}
	if c.h.opts.OnRefused != nil {
		c.h.opts.OnRefused(m.Method)
	}
	c.answer(jsonrpc.AppendError(nil, m.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "%s: %s", m.Method, why)))
}

// onlySessionCall returns the oldest request in flight if every request in
// flight is one session's, nil otherwise. c.mu is held.
func (c *uconn) onlySessionCall() *call {
	var only *call
	var id int64
	for n, cl := range c.pending {
		if cl.s == nil || only != nil && cl.s != only.s {
			return nil // the Handler's own initialize, or two sessions
		}
		if only == nil || n < id {
			only, id = cl, n
		}
	}
	return only
}

func (c *uconn) routeNotification(m *jsonrpc.Message, raw []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch m.Method {
	case protocol.NotifyResourceUpdated:
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(m.Params, &p) != nil || c.subs[p.URI] == 0 {
			return
		}
		for _, s := range c.sessions {
			if _, ok := s.subs[p.URI]; ok {
				c.toSession(s, raw)
			}
		}
	case protocol.NotifyToolsListChanged, protocol.NotifyPromptsListChanged, protocol.NotifyResourcesListChanged:
		for _, ch := range c.streams {
			queue(ch, raw)
		}
	case protocol.NotifyCancelled:
		var p struct {
			RequestID jsonrpc.ID `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) != nil || !p.RequestID.IsValid() {
			return
		}
		s := c.asked[string(p.RequestID.Raw())]
		if s == nil {
			return
		}
		delete(c.asked, string(p.RequestID.Raw()))
		s.asked--
		c.toSession(s, raw)
	default:
		if len(c.principals) > 1 {
			return // it could reach another principal
		}
		if only := c.onlySessionCall(); only != nil {
			queue(only.msgs, raw)
			return
		}
		for _, ch := range c.streams {
			queue(ch, raw)
		}
	}
}

// toSession queues raw on s's GET stream, or on its oldest request in
// flight if it has no GET stream. c.mu is held.
func (c *uconn) toSession(s *hsession, raw []byte) {
	if ch := c.streams[s]; ch != nil {
		queue(ch, raw)
		return
	}
	var to *call
	var id int64
	for n, cl := range c.pending {
		if cl.s == s && (to == nil || n < id) {
			to, id = cl, n
		}
	}
	if to != nil {
		queue(to.msgs, raw)
	}
}

// answer writes the Handler's own answer to a request of the server's.
func (c *uconn) answer(msg []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = c.conn.Send(ctx, msg)
	cancel()
}

// answered reports whether s may send the server its answer to the
// server's request id, and forgets the request if so.
func (c *uconn) answered(s *hsession, id jsonrpc.ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.asked[string(id.Raw())] != s {
		return false
	}
	delete(c.asked, string(id.Raw()))
	s.asked--
	return true
}

// hold adds uri to s's subscriptions, if s is still on c. c.mu is held.
func (c *uconn) hold(s *hsession, uri string) {
	if c.sessions[s.id] != s || len(s.subs) >= maxSubscriptions {
		return
	}
	if _, ok := s.subs[uri]; !ok {
		s.subs[uri] = struct{}{}
		c.subs[uri]++
	}
}

// drop removes uri from s's subscriptions and reports whether no session
// of c holds it any more. c.mu is held.
func (c *uconn) drop(s *hsession, uri string) (last bool) {
	if _, ok := s.subs[uri]; !ok {
		return false
	}
	delete(s.subs, uri)
	if c.subs[uri]--; c.subs[uri] > 0 {
		return false
	}
	delete(c.subs, uri)
	return true
}

// subscription serves a session's resources/subscribe or
// resources/unsubscribe where it need not reach the server: the server is
// subscribed once for all the sessions of the Conn, and unsubscribed when
// the last of them unsubscribes or ends. It reports whether it answered;
// if not, the request goes to the server, and *uri is set for a subscribe
// to hold once the server accepted it.
func (h *Handler) subscription(w http.ResponseWriter, s *hsession, msg *jsonrpc.Message, uri *string) bool {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(msg.Params, &p) != nil || p.URI == "" {
		return false // the server says what is wrong with it
	}
	c := s.c
	c.mu.Lock()
	_, held := s.subs[p.URI]
	answered := true
	var refuse bool
	switch msg.Method {
	case protocol.MethodResourcesSubscribe:
		switch {
		case held:
		case len(s.subs) >= maxSubscriptions:
			refuse = true
		case c.subs[p.URI] > 0:
			c.hold(s, p.URI)
		default:
			answered, *uri = false, p.URI
		}
	case protocol.MethodResourcesUnsubscribe:
		// A URI the session did not subscribe is not its to unsubscribe:
		// other sessions may hold it.
		answered = !c.drop(s, p.URI)
	}
	c.mu.Unlock()
	switch {
	case refuse:
		writeJSON(w, http.StatusOK, "", jsonrpc.AppendError(nil, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "a session subscribes at most %d resources", maxSubscriptions)))
	case answered:
		writeJSON(w, http.StatusOK, "", jsonrpc.AppendResult(nil, msg.ID, json.RawMessage(`{}`)))
	}
	return answered || refuse
}

// addSession adds s to c, forgetting its least recently used session if c
// has maxSessions; it reports false if c is gone.
func (c *uconn) addSession(s *hsession) bool {
	c.mu.Lock()
	select {
	case <-c.dead:
		c.mu.Unlock()
		return false
	default:
	}
	var old *hsession
	var unsub []string
	if len(c.sessions) >= maxSessions {
		for _, o := range c.sessions {
			o.mu.Lock()
			if old == nil || o.lastUsed.Before(old.lastUsed) {
				old = o
			}
			o.mu.Unlock()
		}
		unsub = c.removeSession(old)
	}
	c.sessions[s.id] = s
	c.principals[s.principal]++
	c.mu.Unlock()
	// The Handler's mutex comes before a Conn's: taken once c's is let go.
	h := c.h
	h.mu.Lock()
	if old != nil {
		delete(h.sessions, old.id)
	}
	h.sessions[s.id] = s
	h.mu.Unlock()
	c.unsubscribe(unsub)
	return true
}

// removeSession forgets s on c and returns the URIs no session of c holds
// any more. c.mu is held.
func (c *uconn) removeSession(s *hsession) (unsub []string) {
	if c.sessions[s.id] != s {
		return nil
	}
	delete(c.sessions, s.id)
	if c.principals[s.principal]--; c.principals[s.principal] <= 0 {
		delete(c.principals, s.principal)
	}
	for uri := range s.subs {
		if c.drop(s, uri) {
			unsub = append(unsub, uri)
		}
	}
	for id, o := range c.asked {
		if o == s {
			delete(c.asked, id)
		}
	}
	s.asked = 0
	return unsub
}

// unsubscribe tells the server that no session holds uris any more. Its
// answers are nobody's: their ids are in no table, and route drops them.
func (c *uconn) unsubscribe(uris []string) {
	for _, uri := range uris {
		params, _ := json.Marshal(map[string]string{"uri": uri})
		id := c.nextID.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.conn.Send(ctx, jsonrpc.AppendRequest(nil, jsonrpc.IntID(id), protocol.MethodResourcesUnsubscribe, params))
		cancel()
		if err != nil {
			return // the Conn is gone, and its subscriptions with it
		}
	}
}

// endSession forgets s; a PerSession Conn stops with it.
func (h *Handler) endSession(s *hsession) {
	h.mu.Lock()
	delete(h.sessions, s.id)
	h.mu.Unlock()
	c := s.c
	c.mu.Lock()
	unsub := c.removeSession(s)
	empty := len(c.sessions) == 0
	c.mu.Unlock()
	if empty && h.opts.Isolation == PerSession {
		h.stopConn(c)
		return
	}
	c.unsubscribe(unsub)
}
