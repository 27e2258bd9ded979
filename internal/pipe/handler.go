package pipe

import (
	"context"
	"encoding/json"
	"errors"
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
	// Logger, if nil, means no logging. It is expected to name the
	// upstream (the gateway's names it, with the key "upstream"): the
	// handler adds the tenant, not the upstream.
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
	stats    counts              // see Stats
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
		if msg.Kind == jsonrpc.KindRequest && msg.Method == protocol.MethodInitialize {
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
		if msg.Method == protocol.MethodInitialize {
			http.Error(w, "Bad Request: session already initialized", http.StatusBadRequest)
			return
		}
		var uri string
		if (msg.Method == protocol.MethodResourcesSubscribe || msg.Method == protocol.MethodResourcesUnsubscribe) && h.subscription(w, s, msg, &uri) {
			return
		}
		h.request(w, r, s, msg, uri)
	case jsonrpc.KindNotification:
		switch msg.Method {
		case protocol.NotifyInitialized:
			// The Handler sent it when it initialized the Conn.
		case protocol.NotifyCancelled:
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
	if err := c.conn.Send(ctx, jsonrpc.AppendRequest(nil, jsonrpc.ID{}, protocol.NotifyCancelled, params)); err != nil {
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
	_ = s.c.send(ctx, jsonrpc.AppendRequest(nil, jsonrpc.ID{}, protocol.NotifyCancelled, params))
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
		c.h.log.Warn("upstream server ended", "tenant", c.tenant, "error", err)
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
		h.stats.noteExit(c.tenant)
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
