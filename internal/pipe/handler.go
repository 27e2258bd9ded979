package pipe

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
)

// Isolation says which sessions share a Conn.
type Isolation string

const (
	// PerTenant gives each tenant (Options.Tenant) a Conn of its own.
	PerTenant Isolation = "tenant"
	// Shared gives every session the same Conn.
	Shared Isolation = "shared"
	// PerSession gives each session a Conn of its own.
	PerSession Isolation = "session"
)

// Options configure a Handler.
type Options struct {
	// Name is the upstream's name, for errors and logs.
	Name string
	// Dial opens a Conn for tenant ("" for Shared isolation), on behalf of
	// initialize request r. It should return once the Conn is usable,
	// within ctx.
	Dial func(ctx context.Context, r *http.Request, tenant string) (Conn, error)
	// Isolation is PerTenant if empty.
	Isolation Isolation
	// Tenant returns the tenant a request is made for. Nil means "".
	Tenant func(r *http.Request) string
	// Principal returns who a request is made for (its issuer, subject
	// and tenant, as one string). What the server sends that belongs to
	// no request is delivered only where it cannot reach another principal
	// (see "Sessions over one connection" in the package doc). Nil means
	// who is unknown: each session is taken for a principal of its own
	// (and the shares of Conns count them all as one).
	Principal func(r *http.Request) string
	// MaxConns bounds the Conns of this Handler; 0 means no bound.
	MaxConns int
	// PrincipalConns and TenantConns bound the Conns of this Handler one
	// principal and one tenant start (see share.go); 0 means no bound but
	// MaxConns.
	PrincipalConns, TenantConns int
	// Limit, if set, bounds the Conns of every Handler sharing it.
	Limit *Limit
	// IdleTimeout stops a Conn with no request in flight and no GET
	// stream for that long. 0 means never.
	IdleTimeout time.Duration
	// MaxMessageBytes bounds one request body. Default 16 MiB.
	MaxMessageBytes int64
	// Logger, if nil, means no logging.
	Logger *slog.Logger
	// OnConn, if set, is called with +1 when a Conn starts and -1 when it
	// ends, with whether it ended by itself (crashed, exited) or was
	// stopped by the Handler.
	OnConn func(delta int, exited bool)
	// OnLimit, if set, is told when a session of tenant could not open
	// because a bound was reached: one of the Limit* names.
	OnLimit func(limit, tenant string)
	// OnRefused, if set, is told of each request of the server's that the
	// Handler refused because it could not tell whose it is (method, the
	// server's).
	OnRefused func(method string)
}

// The bounds OnLimit names.
const (
	LimitMaxConns       = "max_conns"       // Options.MaxConns
	LimitPrincipalConns = "principal_conns" // Options.PrincipalConns
	LimitTenantConns    = "tenant_conns"    // Options.TenantConns
	LimitTotal          = "total"           // Options.Limit
	LimitTotalPrincipal = "total_principal" // Options.Limit's principal share
	LimitTotalTenant    = "total_tenant"    // Options.Limit's tenant share
)

type headerKey struct{}

// RequestHeader returns the headers of the request a Send is made for, nil
// if none: a Conn that speaks HTTP sends the request's credentials on.
func RequestHeader(ctx context.Context) http.Header {
	h, _ := ctx.Value(headerKey{}).(http.Header)
	return h
}

const (
	// queueLen bounds the messages waiting for one request's or one GET
	// stream's reader; beyond it, notifications are dropped.
	queueLen = 64
	// maxSessions bounds the sessions of one Conn.
	maxSessions = 4096
	// sendTimeout bounds a write to a Conn that its request does not.
	sendTimeout = 30 * time.Second
	// backoffMin and backoffMax bound the wait before starting a Conn
	// again for a tenant whose last one ended within minLifetime.
	backoffMin  = 250 * time.Millisecond
	backoffMax  = 30 * time.Second
	minLifetime = 10 * time.Second
	// exitWait bounds the wait for a process's exit status once its
	// stdout closed.
	exitWait = time.Second
)

// A Handler serves Streamable HTTP over Conns. It is safe for concurrent
// use.
type Handler struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	conns    map[string]*uconn // by isolation key
	sessions map[string]*hsession
	backoff  map[string]*backoff // by tenant
	pool     pool                // Conns running or starting
	closed   bool
	refused  atomic.Int64 // requests of servers refused (route.go)

	wg   sync.WaitGroup // Conns' readers and the idle reaper
	stop chan struct{}
}

type backoff struct {
	fails     int
	notBefore time.Time
}

// NewHandler returns a Handler for opts. Call Close to stop its Conns.
func NewHandler(opts Options) *Handler {
	h := &Handler{
		opts:     opts,
		log:      opts.Logger,
		conns:    make(map[string]*uconn),
		sessions: make(map[string]*hsession),
		backoff:  make(map[string]*backoff),
		pool:     newPool(),
		stop:     make(chan struct{}),
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.opts.Isolation == "" {
		h.opts.Isolation = PerTenant
	}
	if h.opts.MaxMessageBytes <= 0 {
		h.opts.MaxMessageBytes = defaultMaxMessage
	}
	if opts.IdleTimeout > 0 {
		h.wg.Add(1)
		go h.reapIdle()
	}
	return h
}

// uconn is one Conn and what its sessions share.
type uconn struct {
	h         *Handler
	key       string
	tenant    string
	principal string // who started it, for the shares (share.go)
	conn      Conn
	start     time.Time
	released  chan struct{} // closed when it no longer counts in the bounds

	ready   chan struct{} // closed when dial returned
	dialErr error         // set before ready is closed

	initOnce sync.Once
	initDone chan struct{}
	initRes  json.RawMessage // the server's initialize result
	initErr  error

	nextID atomic.Int64
	dead   chan struct{} // closed when the reader ends
	why    error         // why, set before dead is closed

	mu       sync.Mutex
	pending  map[int64]*call
	progress map[string]*call // by the token sent to the server
	streams  map[*hsession]chan []byte
	sessions map[string]*hsession
	// principals counts the sessions of each principal: what belongs to
	// no request goes to every session only while there is one.
	principals map[string]int
	// subs counts the sessions subscribed to each URI: the server is
	// subscribed while one is (route.go).
	subs map[string]int
	// asked holds the requests of the server's in flight, by id, and the
	// session asked: only it may answer, and a cancellation goes to it.
	asked    map[string]*hsession
	lastUsed time.Time
	stopped  bool // stopped by the Handler, not by itself
	ended    bool // the reader took the calls in flight to fail them
}

// hsession is one client session on a uconn.
type hsession struct {
	id        string
	c         *uconn
	principal string
	mu        sync.Mutex
	inflight  map[string]int64 // the client's request id -> the Conn's
	lastUsed  time.Time
	// Guarded by c.mu:
	subs  map[string]struct{} // URIs subscribed
	asked int                 // requests of the server's it was asked
}

// call is one request in flight on a Conn.
type call struct {
	s     *hsession
	id    jsonrpc.ID      // the client's
	token json.RawMessage // the client's progress token, if any
	msgs  chan []byte     // notifications and requests for it
	final chan []byte     // its response, with the client's id
	// subscribe, if set, is the URI of a resources/subscribe: the session
	// holds it once the server accepted it.
	subscribe string
}

// ServeHTTP serves the MCP endpoint.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(protocol.HeaderSessionID)
	switch r.Method {
	case http.MethodPost:
		h.post(w, r, sid)
	case http.MethodGet:
		s := h.session(sid)
		if s == nil {
			http.Error(w, "Not Found: unknown session", http.StatusNotFound)
			return
		}
		h.listen(w, r, s)
	case http.MethodDelete:
		if s := h.session(sid); s != nil {
			h.endSession(s)
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

func (h *Handler) post(w http.ResponseWriter, r *http.Request, sid string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxMessageBytes))
	if err != nil {
		http.Error(w, "Bad Request: body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	if jsonrpc.IsBatch(body) {
		writeJSON(w, http.StatusBadRequest, "", jsonrpc.AppendError(nil, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "batches are not supported")))
		return
	}
	msg, err := jsonrpc.Decode(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, "", jsonrpc.AppendError(nil, jsonrpc.ID{}, jsonrpc.AsError(err)))
		return
	}
	if sid == "" {
		if msg.Kind == jsonrpc.KindRequest && msg.Method == "initialize" {
			h.initialize(w, r, msg)
			return
		}
		// Not JSON-RPC on purpose: a client probing for a newer revision
		// (server/discover) takes a plain 4xx as "legacy server".
		http.Error(w, "Bad Request: no session", http.StatusBadRequest)
		return
	}
	s := h.session(sid)
	if s == nil {
		http.Error(w, "Not Found: unknown session", http.StatusNotFound)
		return
	}
	c := s.c
	r = r.WithContext(context.WithValue(r.Context(), headerKey{}, r.Header))
	switch msg.Kind {
	case jsonrpc.KindRequest:
		if msg.Method == "initialize" {
			http.Error(w, "Bad Request: session already initialized", http.StatusBadRequest)
			return
		}
		var uri string
		if (msg.Method == "resources/subscribe" || msg.Method == "resources/unsubscribe") && h.subscription(w, s, msg, &uri) {
			return
		}
		h.request(w, r, s, msg, uri)
	case jsonrpc.KindNotification:
		switch msg.Method {
		case "notifications/initialized":
			// The Handler sent it when it initialized the Conn.
		case "notifications/cancelled":
			h.cancelled(r.Context(), s, msg)
		default:
			if err := c.send(r.Context(), body); err != nil {
				h.sendFailed(w, c, err)
				return
			}
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		// An answer to a request of the server's, whose id is the
		// server's own: only the session asked may give it.
		if !c.answered(s, msg.ID) {
			// Hidden and unknown look the same: accepted, and dropped.
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if err := c.send(r.Context(), body); err != nil {
			h.sendFailed(w, c, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}

// sendFailed answers a message that could not be written to c.
func (h *Handler) sendFailed(w http.ResponseWriter, c *uconn, err error) {
	select {
	case <-c.dead:
		http.Error(w, "Not Found: the session's server is gone", http.StatusNotFound)
	default:
		h.log.Warn("writing to upstream server", "error", err)
		http.Error(w, "Bad Gateway", http.StatusBadGateway)
	}
}

// initialize opens a session: on the Conn of its isolation key, started
// and initialized if needed.
func (h *Handler) initialize(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message) {
	tenant := ""
	if h.opts.Tenant != nil && h.opts.Isolation != Shared {
		tenant = h.opts.Tenant(r)
	}
	key := ""
	switch h.opts.Isolation {
	case PerTenant:
		key = "t:" + tenant
	case PerSession:
		key = "s:" + newID()
	}
	principal := ""
	if h.opts.Principal != nil {
		principal = h.opts.Principal(r)
	}
	c, status, err := h.conn(r.Context(), r, key, tenant, principal)
	if err != nil {
		h.log.Warn("starting upstream server", "tenant", tenant, "error", err)
		http.Error(w, http.StatusText(status)+": "+err.Error(), status)
		return
	}
	c.initOnce.Do(func() { c.init(r.Context(), msg.Params) })
	select {
	case <-c.initDone:
	case <-r.Context().Done():
		return
	}
	if c.initErr != nil {
		var re *jsonrpc.Error
		if errors.As(c.initErr, &re) {
			writeJSON(w, http.StatusOK, "", jsonrpc.AppendError(nil, msg.ID, re))
			return
		}
		http.Error(w, "Bad Gateway: "+c.initErr.Error(), http.StatusBadGateway)
		return
	}
	sid := newID()
	if h.opts.Principal == nil {
		// Who a session is for is unknown: it is nobody else's.
		principal = "session:" + sid
	}
	s := &hsession{id: sid, c: c, principal: principal, inflight: make(map[string]int64), lastUsed: time.Now(), subs: map[string]struct{}{}}
	if !c.addSession(s) {
		http.Error(w, "Not Found: the server is gone", http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, http.StatusOK, s.id, jsonrpc.AppendResult(nil, msg.ID, c.initRes))
}

// conn returns the live Conn of key, starting one if there is none.
func (h *Handler) conn(ctx context.Context, r *http.Request, key, tenant, principal string) (*uconn, int, error) {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, http.StatusServiceUnavailable, errors.New("shutting down")
		}
		if c := h.conns[key]; c != nil {
			h.mu.Unlock()
			select {
			case <-c.ready:
			case <-ctx.Done():
				return nil, http.StatusServiceUnavailable, context.Cause(ctx)
			}
			if c.dialErr != nil {
				return nil, http.StatusBadGateway, c.dialErr
			}
			select {
			case <-c.dead:
				// Its reader is removing it; try again.
				time.Sleep(10 * time.Millisecond)
				continue
			default:
				return c, 0, nil
			}
		}
		c := &uconn{h: h, key: key, tenant: tenant, principal: principal, ready: make(chan struct{}), initDone: make(chan struct{}),
			dead: make(chan struct{}), released: make(chan struct{}),
			pending: make(map[int64]*call), progress: make(map[string]*call), streams: make(map[*hsession]chan []byte),
			sessions: make(map[string]*hsession), principals: make(map[string]int), subs: make(map[string]int),
			asked: make(map[string]*hsession), lastUsed: time.Now()}
		limit, victim := h.pool.admit(c, h.opts.MaxConns, h.opts.PrincipalConns, h.opts.TenantConns)
		if limit == "" {
			if limit, victim = h.opts.Limit.admit(c); limit != "" {
				h.pool.remove(c)
				limit = map[string]string{limitPool: LimitTotal, limitPrincipal: LimitTotalPrincipal, limitTenant: LimitTotalTenant}[limit]
			}
		} else {
			limit = map[string]string{limitPool: LimitMaxConns, limitPrincipal: LimitPrincipalConns, limitTenant: LimitTenantConns}[limit]
		}
		if limit != "" {
			h.mu.Unlock()
			if victim != nil {
				// Make room, then try again: another newcomer may
				// take the room first, and then this one makes more.
				if err := h.evict(ctx, victim, limit); err != nil {
					return nil, http.StatusServiceUnavailable, err
				}
				continue
			}
			h.limited(limit, tenant)
			return nil, http.StatusServiceUnavailable, h.limitErr(limit)
		}
		h.conns[key] = c
		var wait time.Duration
		if b := h.backoff[tenant]; b != nil {
			wait = time.Until(b.notBefore)
		}
		h.mu.Unlock()
		err := c.dial(ctx, r, wait)
		if err != nil {
			h.mu.Lock()
			delete(h.conns, key)
			h.mu.Unlock()
			h.release(c)
			c.dialErr = err
			close(c.dead)
			close(c.ready)
			return nil, http.StatusBadGateway, err
		}
		close(c.ready)
		return c, 0, nil
	}
}

// evict stops victim, an idle Conn of this Handler or of another sharing
// the Limit, to make room for a newcomer refused by limit, and waits
// until it no longer counts in the bounds.
func (h *Handler) evict(ctx context.Context, victim *uconn, limit string) error {
	h.log.Info("stopping an idle upstream server to make room", "upstream", victim.h.opts.Name, "tenant", victim.tenant, "limit", limit)
	victim.h.stopConn(victim)
	select {
	case <-victim.released:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// release uncounts c from the bounds.
func (h *Handler) release(c *uconn) {
	h.mu.Lock()
	counted := h.pool.remove(c)
	h.mu.Unlock()
	if counted {
		h.opts.Limit.release(c)
		close(c.released)
	}
}

// limitErr is the error of a session refused by limit.
func (h *Handler) limitErr(limit string) error {
	switch limit {
	case LimitMaxConns:
		return fmt.Errorf("upstream %s runs its maximum of %d processes", h.opts.Name, h.opts.MaxConns)
	case LimitPrincipalConns:
		return fmt.Errorf("upstream %s runs its maximum of %d processes for one user, none of them idle", h.opts.Name, h.opts.PrincipalConns)
	case LimitTenantConns:
		return fmt.Errorf("upstream %s runs its maximum of %d processes for one tenant, none of them idle", h.opts.Name, h.opts.TenantConns)
	case LimitTotalPrincipal:
		return errors.New("the gateway runs its maximum of stdio processes for one user, none of them idle")
	case LimitTotalTenant:
		return errors.New("the gateway runs its maximum of stdio processes for one tenant, none of them idle")
	}
	return errors.New("the gateway runs its maximum of stdio processes, none of them idle")
}

// limited tells OnLimit.
func (h *Handler) limited(limit, tenant string) {
	if h.opts.OnLimit != nil {
		h.opts.OnLimit(limit, tenant)
	}
}

// dial waits out the backoff, opens the Conn and starts its reader.
func (c *uconn) dial(ctx context.Context, r *http.Request, wait time.Duration) error {
	h := c.h
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-h.stop:
			return errors.New("shutting down")
		}
	}
	conn, err := h.opts.Dial(ctx, r, c.tenant)
	if err != nil {
		return err
	}
	c.conn, c.start = conn, time.Now()
	if h.opts.OnConn != nil {
		h.opts.OnConn(1, false)
	}
	h.wg.Add(1)
	go c.read()
	return nil
}

// init initializes the Conn with params, the first initialize's, and sends
// notifications/initialized.
func (c *uconn) init(ctx context.Context, params json.RawMessage) {
	defer close(c.initDone)
	// Detached: other sessions may be waiting for this initialize.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	cl := &call{final: make(chan []byte, 1), msgs: make(chan []byte, queueLen)}
	id := c.register(cl, nil)
	if err := c.conn.Send(ctx, jsonrpc.AppendRequest(nil, jsonrpc.IntID(id), "initialize", params)); err != nil {
		c.unregister(id, cl)
		c.initErr = c.gone(err)
		c.h.stopConn(c)
		return
	}
	var raw []byte
	select {
	case raw = <-cl.final:
	case <-ctx.Done():
		c.unregister(id, cl)
		c.initErr = errors.New("no answer to initialize")
		c.h.stopConn(c)
		return
	}
	m, err := jsonrpc.Decode(raw)
	switch {
	case err != nil:
		c.initErr = err
	case m.Kind == jsonrpc.KindErrorResponse:
		c.initErr = m.Error
	default:
		c.initRes = m.Result
	}
	if c.initErr != nil {
		c.h.stopConn(c)
		return
	}
	if err := c.conn.Send(ctx, jsonrpc.AppendRequest(nil, jsonrpc.ID{}, "notifications/initialized", nil)); err != nil {
		c.initErr = c.gone(err)
		c.h.stopConn(c)
	}
}

// gone returns why the Conn ended if a write failed with err because it
// did (the process exited: its exit status says more than the write), else
// err.
func (c *uconn) gone(err error) error {
	t := time.NewTimer(exitWait + 100*time.Millisecond)
	defer t.Stop()
	select {
	case <-c.dead:
		if c.why != nil {
			return fmt.Errorf("the server is gone: %w", c.why)
		}
	case <-t.C:
	}
	return err
}

// register adds cl as in flight under a new id of the Conn's, and its
// progress token if it has one; it returns the id.
func (c *uconn) register(cl *call, token []byte) int64 {
	id := c.nextID.Add(1)
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		// The reader is done with the calls in flight: fail it here.
		c.fail(id, cl)
		return id
	}
	c.pending[id] = cl
	if token != nil {
		c.progress[string(token)] = cl
	}
	c.lastUsed = time.Now()
	c.mu.Unlock()
	return id
}

func (c *uconn) unregister(id int64, cl *call) {
	c.mu.Lock()
	delete(c.pending, id)
	for k, v := range c.progress {
		if v == cl {
			delete(c.progress, k)
		}
	}
	c.lastUsed = time.Now()
	c.mu.Unlock()
}

// fail answers cl, which the Conn will never answer, with an error naming
// the upstream.
func (c *uconn) fail(_ int64, cl *call) {
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	msg := "upstream " + c.h.opts.Name + ": the server is gone"
	switch {
	case stopped:
		msg = "upstream " + c.h.opts.Name + ": the server was stopped (idle, reload or shutdown)"
	case c.why != nil:
		msg += ": " + c.why.Error()
	}
	select {
	case cl.final <- jsonrpc.AppendError(nil, cl.id, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}):
	default:
	}
}

func (c *uconn) send(ctx context.Context, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	return c.conn.Send(ctx, msg)
}

// request sends a client's request on the Conn and streams what comes back
// for it.
func (h *Handler) request(w http.ResponseWriter, r *http.Request, s *hsession, msg *jsonrpc.Message, subscribe string) {
	c := s.c
	params := msg.Params
	var token, sent []byte
	if _, token = swapToken(params, nil); token != nil {
		// Tokens are the clients' own: two sessions may use the same.
		sent = []byte(`"` + newID() + `"`)
		params, _ = swapToken(params, sent)
	}
	cl := &call{s: s, id: msg.ID, token: token, msgs: make(chan []byte, queueLen), final: make(chan []byte, 1), subscribe: subscribe}
	id := c.register(cl, sent)
	defer c.unregister(id, cl)
	s.mu.Lock()
	s.inflight[string(msg.ID.Raw())] = id
	s.lastUsed = time.Now()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.inflight, string(msg.ID.Raw()))
		s.mu.Unlock()
	}()
	if err := c.send(r.Context(), jsonrpc.AppendRequest(nil, jsonrpc.IntID(id), msg.Method, params)); err != nil {
		h.sendFailed(w, c, err)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	for {
		select {
		case m := <-cl.msgs:
			if writeEvent(w, rc, m) != nil {
				h.abandon(c, id)
				return
			}
		case m := <-cl.final:
			// What was queued before the response goes first.
			for drained := false; !drained; {
				select {
				case q := <-cl.msgs:
					_ = writeEvent(w, rc, q)
				default:
					drained = true
				}
			}
			_ = writeEvent(w, rc, m)
			return
		case <-r.Context().Done():
			h.abandon(c, id)
			return
		}
	}
}

// abandon tells the server to stop working on request id of the Conn,
// whose client went away.
func (h *Handler) abandon(c *uconn, id int64) {
	select {
	case <-c.dead:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	params := []byte(`{"requestId":` + strconv.FormatInt(id, 10) + `,"reason":"the client went away"}`)
	if err := c.conn.Send(ctx, jsonrpc.AppendRequest(nil, jsonrpc.ID{}, "notifications/cancelled", params)); err != nil {
		h.log.Debug("cancelling upstream request", "error", err)
	}
}

// cancelled forwards a client's notifications/cancelled for one of its
// requests in flight, with the Conn's id for it.
func (h *Handler) cancelled(ctx context.Context, s *hsession, msg *jsonrpc.Message) {
	var p struct {
		RequestID jsonrpc.ID `json:"requestId"`
		Reason    string     `json:"reason,omitempty"`
	}
	if json.Unmarshal(msg.Params, &p) != nil || !p.RequestID.IsValid() {
		return
	}
	s.mu.Lock()
	id, ok := s.inflight[string(p.RequestID.Raw())]
	s.mu.Unlock()
	if !ok {
		return // answered already, or abandoned (and cancelled) by the Handler
	}
	reason, _ := json.Marshal(p.Reason)
	params := []byte(`{"requestId":` + strconv.FormatInt(id, 10) + `,"reason":` + string(reason) + `}`)
	_ = s.c.send(ctx, jsonrpc.AppendRequest(nil, jsonrpc.ID{}, "notifications/cancelled", params))
}

// listen serves a session's GET stream: what the server sends outside of
// any request.
func (h *Handler) listen(w http.ResponseWriter, r *http.Request, s *hsession) {
	c := s.c
	ch := make(chan []byte, queueLen)
	c.mu.Lock()
	if _, ok := c.streams[s]; ok {
		c.mu.Unlock()
		http.Error(w, "Conflict: the session has a stream already", http.StatusConflict)
		return
	}
	c.streams[s] = ch
	c.lastUsed = time.Now()
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.streams, s)
		c.lastUsed = time.Now()
		c.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	for {
		select {
		case m := <-ch:
			if writeEvent(w, rc, m) != nil {
				return
			}
		case <-c.dead:
			return
		case <-r.Context().Done():
			return
		case <-h.stop:
			return
		}
	}
}

// read routes what the server sends until the Conn ends, then removes the
// Conn and its sessions.
func (c *uconn) read() {
	defer c.h.wg.Done()
	var err error
	for {
		var raw []byte
		raw, err = c.conn.Recv()
		if err != nil {
			break
		}
		c.route(raw)
	}
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	if p, ok := c.conn.(*Process); ok {
		// stdout closes a moment before the exit status is known: wait
		// for it a little, it says more.
		t := time.NewTimer(exitWait)
		select {
		case <-p.Exited():
			err = p.ExitErr()
		case <-t.C:
		}
		t.Stop()
	}
	c.why = err
	if !stopped {
		c.h.log.Warn("upstream server ended", "upstream", c.h.opts.Name, "tenant", c.tenant, "error", err)
	}
	c.mu.Lock()
	c.ended = true
	pending := c.pending
	c.pending = map[int64]*call{}
	sessions := c.sessions
	c.sessions = map[string]*hsession{}
	c.mu.Unlock()
	// The Handler forgets the Conn, and its backoff is set, before anyone
	// hears that it ended: a client told so may initialize again at once.
	h := c.h
	h.mu.Lock()
	for id := range sessions {
		delete(h.sessions, id)
	}
	if h.conns[c.key] == c {
		delete(h.conns, c.key)
	}
	if !stopped {
		b := h.backoff[c.tenant]
		if time.Since(c.start) < minLifetime {
			if b == nil {
				b = &backoff{}
				h.backoff[c.tenant] = b
			}
			b.fails++
			d := min(backoffMin<<min(b.fails-1, 16), backoffMax)
			b.notBefore = time.Now().Add(d)
		} else {
			delete(h.backoff, c.tenant)
		}
	}
	h.mu.Unlock()
	close(c.dead)
	for id, cl := range pending {
		c.fail(id, cl)
	}
	// Close waits for what the Conn started (a Process's goroutines); the
	// Conn counts in the bounds until then.
	_ = c.conn.Close()
	h.release(c)
	if h.opts.OnConn != nil {
		h.opts.OnConn(-1, !stopped)
	}
}

// queue adds m to ch, or drops it when ch is full.
func queue(ch chan []byte, m []byte) {
	select {
	case ch <- m:
	default:
	}
}

func (h *Handler) session(id string) *hsession {
	if id == "" {
		return nil
	}
	h.mu.Lock()
	s := h.sessions[id]
	h.mu.Unlock()
	if s != nil {
		select {
		case <-s.c.dead:
			return nil
		default:
		}
	}
	return s
}

// stopConn stops c; its reader then removes it.
func (h *Handler) stopConn(c *uconn) {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	h.mu.Lock()
	if h.conns[c.key] == c {
		// No new session joins it.
		delete(h.conns, c.key)
	}
	h.mu.Unlock()
	_ = c.conn.Close()
}

// reapIdle stops the Conns idle for longer than IdleTimeout.
func (h *Handler) reapIdle() {
	defer h.wg.Done()
	every := min(max(h.opts.IdleTimeout/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		h.mu.Lock()
		var idle []*uconn
		for _, c := range h.conns {
			c.mu.Lock()
			if isClosed(c.ready) && c.dialErr == nil && len(c.pending) == 0 && len(c.streams) == 0 && time.Since(c.lastUsed) > h.opts.IdleTimeout {
				idle = append(idle, c)
			}
			c.mu.Unlock()
		}
		h.mu.Unlock()
		for _, c := range idle {
			h.log.Info("stopping idle upstream server", "upstream", h.opts.Name, "tenant", c.tenant)
			h.stopConn(c)
		}
	}
}

// Close stops every Conn, all at once, and waits for them and for every
// goroutine the Handler started. Requests still being served fail.
func (h *Handler) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		h.wg.Wait()
		return nil
	}
	h.closed = true
	close(h.stop)
	conns := make([]*uconn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			// One being dialed sees h.stop, or is stopped once dialed.
			<-c.ready
			if c.dialErr == nil {
				h.stopConn(c)
			}
		})
	}
	wg.Wait()
	h.wg.Wait()
	return nil
}

// Drain waits until no request is in flight on any Conn, or ctx is done:
// before Close, so that a reload lets the calls it finds finish.
func (h *Handler) Drain(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		h.mu.Lock()
		busy := false
		for _, c := range h.conns {
			c.mu.Lock()
			busy = busy || len(c.pending) > 0
			c.mu.Unlock()
		}
		h.mu.Unlock()
		if !busy {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Conns returns how many Conns run.
func (h *Handler) Conns() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pool.n
}

// swapToken returns params with its _meta.progressToken replaced by tok
// (when tok is not nil), and the token it had (nil if none).
func swapToken(params json.RawMessage, tok []byte) (json.RawMessage, []byte) {
	if !bytes.Contains(params, []byte(`"progressToken"`)) {
		return params, nil
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return params, nil
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(p["_meta"], &meta) != nil || meta["progressToken"] == nil {
		return params, nil
	}
	old := meta["progressToken"]
	if tok == nil {
		return params, old
	}
	meta["progressToken"] = tok
	p["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(p)
	if err != nil {
		return params, old
	}
	return out, old
}

// progressTokenOf returns the progressToken of a notifications/progress's
// params, nil if none.
func progressTokenOf(params json.RawMessage) []byte {
	var p struct {
		Token json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.Token) == 0 {
		return nil
	}
	return p.Token
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// swapProgressToken returns the params of a notifications/progress with
// progressToken replaced by tok.
func swapProgressToken(params json.RawMessage, tok []byte) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return params
	}
	p["progressToken"] = tok
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, sid string, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	if sid != "" {
		w.Header().Set(protocol.HeaderSessionID, sid)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeEvent(w io.Writer, rc *http.ResponseController, m []byte) error {
	buf := make([]byte, 0, len(m)+24)
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, m...)
	buf = append(buf, "\n\n"...)
	if _, err := w.Write(buf); err != nil {
		return err
	}
	_ = rc.Flush()
	return nil
}

// newID returns a random session id: 128 bits, URL-safe.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
