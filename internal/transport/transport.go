package transport

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/mcpgw/gateway/internal/auth"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/dispatch"
	"github.com/mcpgw/gateway/internal/generation"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/own"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/rpcerr"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/share"
	"github.com/mcpgw/gateway/internal/telemetry"
)

// Options configure a Handler.
type Options struct {
	// Logger, if nil, means no logging.
	Logger *slog.Logger
	// Metrics, if nil, means no metrics.
	Metrics *telemetry.Metrics
	// Events, if set, logs the SSE events of session streams, which makes
	// them resumable (resume.go).
	Events session.EventLog
}

// Handler is the MCP endpoint.
type Handler struct {
	srv     *dispatch.Server
	store   session.Store
	log     *slog.Logger
	metrics *telemetry.Metrics
	streams streams

	events   session.EventLog // nil: streams are not resumable
	detached share.Counts     // calls going on after their client hung up
	calls    liveCalls
	loops    own.Group // the detached streams' (detach.go)
}

// New returns the endpoint of srv. It tells the streams it holds when an
// upstream's list changes.
func New(srv *dispatch.Server, opts Options) *Handler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{srv: srv, store: srv.Store(), log: log, metrics: opts.Metrics, events: opts.Events}
	srv.OnListChanged(h.upstreamListChanged)
	return h
}

// A Snapshot is one generation of the gateway's config, served as is:
// whatever reloads happen meanwhile, [Snapshot.KnownTenant] and
// [Snapshot.ServeHTTP] answer from that generation alone. The gateway
// builds each generation's auth chain around one, so that the tenant check
// at the edge and the routing behind it always see the same config, at the
// cost of the one atomic load that picks the chain.
type Snapshot struct {
	h  *Handler
	st *dispatch.State
}

// SetConfig makes generation gen (see dispatch.Server.Prepare) the
// configuration of every request that starts from now on (see
// dispatch.Server.SetConfig): publish, if not nil, gets the new
// generation before anything of the previous one is released. Then the
// sessions with an open GET stream whose tenant now sees something else
// are told so with list_changed notifications, and streams of tenants that
// no longer exist are ended. Calls must not overlap.
func (h *Handler) SetConfig(gen *generation.Prepared, publish func(*Snapshot)) {
	prev, next := h.srv.SetConfig(gen, func(st *dispatch.State) {
		if publish != nil {
			publish(&Snapshot{h: h, st: st})
		}
	})
	h.streams.each(func(s *stream) {
		if !next.Tenants().Known(s.tenant) {
			s.stop()
			return
		}
		if generation.TenantChanged(prev.State, next.State, s.tenant) {
			for _, k := range []catalog.Kind{catalog.Tools, catalog.Prompts, catalog.Resources} {
				s.send(catalog.ListChanged(k))
			}
		}
	})
}

// Drain ends this replica's server-to-client streams (GET streams and
// subscriptions/listen), each with an SSE retry field, so that their
// clients reconnect, through the load balancer, to another replica; streams
// that open afterwards end the same way at once. The gateway calls it when
// its drain delay is over, as it stops accepting connections: the load
// balancers have taken it out of rotation by then. Requests in flight are
// not affected.
func (h *Handler) Drain() { h.streams.drain() }

// Close stops and waits for what the Handler runs beyond a request (the
// renewal of running calls' event-log leases, the detached streams). The gateway calls it as it
// shuts down, once the HTTP servers are done with the requests.
func (h *Handler) Close() {
	h.calls.close()
	h.loops.Close()
}

// Current returns the generation in force.
func (h *Handler) Current() *Snapshot { return &Snapshot{h: h, st: h.srv.Current()} }

// KnownTenant reports whether the snapshot's config names tenant id.
func (s *Snapshot) KnownTenant(id string) bool { return s.st.Tenants().Known(id) }

// ServeHTTP serves the MCP endpoint with the snapshot's config.
func (s *Snapshot) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.h.serve(w, r, s.st) }

// ServeHTTP implements http.Handler for the MCP endpoint, with the config
// in force when the request arrives. A caller that checks the request
// against the config first (as the auth middleware checks its tenant)
// serves it with the [Snapshot] it checked against instead.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.serve(w, r, h.srv.Current()) }

// serve serves one request with st, the config it keeps to the end.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, st *dispatch.State) {
	// DNS-rebinding protection (2025-11-25 basic/transports, "Security
	// Warning"): an Origin, when present, must be one we accept.
	if o := r.Header.Get("Origin"); o != "" && !st.AllowsOrigin(o) {
		writeError(w, http.StatusForbidden, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Forbidden: origin not allowed")
		return
	}
	p, ok := auth.PrincipalFrom(r.Context())
	if !ok {
		// The auth middleware always installs a principal; reaching here
		// without one is a wiring bug, and failing closed is the answer.
		writeError(w, http.StatusUnauthorized, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Unauthorized")
		return
	}
	view, err := st.Tenants().Get(p.Tenant)
	if err != nil {
		writeError(w, http.StatusForbidden, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Forbidden: unknown tenant")
		return
	}
	rq := h.srv.NewRequest(st, p, view)
	if r.Method == http.MethodPost || r.Method == http.MethodGet {
		// The tenant's rate limits of every request, before the body is
		// read: a flood costs one check per request.
		if ref := h.srv.Admit(r.Context(), rq); ref != nil {
			w.Header().Set("Retry-After", strconv.Itoa(ref.RetryAfterSeconds()))
			writeError(w, http.StatusTooManyRequests, jsonrpc.ID{}, protocol.CodeBudgetExceeded, "Too Many Requests: "+ref.Error())
			return
		}
	}
	switch r.Method {
	case http.MethodPost:
		h.servePOST(w, r, rq)
	case http.MethodGet:
		h.serveGET(w, r, rq)
	case http.MethodDelete:
		h.serveDELETE(w, r, rq)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeError(w, http.StatusMethodNotAllowed, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Method Not Allowed")
	}
}

// accepts reports whether the Accept header lists mediaType, directly or by
// a wildcard.
func accepts(r *http.Request, mediaType string) bool {
	major, _, _ := strings.Cut(mediaType, "/")
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			if mt == mediaType || mt == "*/*" || mt == major+"/*" {
				return true
			}
		}
	}
	return false
}

func (h *Handler) servePOST(w http.ResponseWriter, r *http.Request, rq *dispatch.Request) {
	// 2025-11-25 basic/transports, "Sending Messages to the Server" 2.
	if !accepts(r, "application/json") || !accepts(r, "text/event-stream") {
		writeError(w, http.StatusNotAcceptable, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"Not Acceptable: Accept must list application/json and text/event-stream")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"Unsupported Media Type: Content-Type must be application/json")
		return
	}
	// Read the whole (small) body before doing anything with it: nothing is
	// streamed from the client to an upstream. A body relayed while it is
	// still arriving is closed by net/http once the upstream has answered,
	// and the relay's last read of it then drops the upstream connection
	// mid-response (Go issue 40747).
	// The body must arrive within server.read_body_timeout: the listener
	// set that read deadline before authentication (see gateway.newMux),
	// so that a body net/http discards after an early refusal is bounded
	// too. Nothing clears it here: net/http's server does when the body
	// reaches EOF, which readBody always reads to, so a streamed answer
	// outlives it.
	limit := rq.State().Config().Server.MaxBodyBytes
	body, err := readBody(w, r, limit)
	if err != nil {
		// The deadline stays: it bounds what net/http may read of the
		// rest of the body after the answer.
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			h.srv.LimitHit(r.Context(), rq, telemetry.LimitBodyBytes, "")
			w.Header().Set("Connection", "close") // the rest of the body is not read
			writeError(w, http.StatusRequestEntityTooLarge, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("Request Entity Too Large: body exceeds %d bytes", limit))
		case isTimeout(err):
			// The connection is left with an expired read deadline and
			// half a body in it: it cannot carry another request.
			h.srv.LimitHit(r.Context(), rq, telemetry.LimitReadBodyTimeout, "")
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestTimeout, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("Request Timeout: body not received within %s", rq.State().Config().Server.ReadBodyTimeout.D()))
		default:
			writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Bad Request: could not read body")
		}
		return
	}
	if jsonrpc.IsBatch(body) {
		if !h.loadSession(w, r, rq) {
			return
		}
		if v, _ := protocol.ParseVersion(rq.Admission().Version); v.AtLeast(protocol.V2025_06_18) {
			// The 2025-06-18 changelog removed JSON-RPC batching.
			writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				"Bad Request: JSON-RPC batches are not supported in protocol version "+rq.Admission().Version)
			return
		}
		h.serveBatch(w, r, rq, body)
		return
	}
	msg, err := jsonrpc.Decode(body)
	if err != nil {
		code := int64(jsonrpc.CodeInvalidRequest)
		if errors.Is(err, jsonrpc.ErrParse) {
			code = jsonrpc.CodeParseError
		}
		id := jsonrpc.ID{}
		if msg != nil && msg.ID.IsValid() {
			id = msg.ID
		}
		writeError(w, http.StatusBadRequest, id, code, err.Error())
		return
	}

	if meta, ok := isStateless(r, msg); ok {
		// 2026-07-28: no handshake, no session; an Mcp-Session-Id is
		// ignored (basic/transports/streamable-http, "Backward
		// Compatibility").
		h.serveStateless(w, r, rq, msg, meta)
		return
	}
	if msg.Kind == jsonrpc.KindRequest && msg.Method == protocol.MethodInitialize {
		if r.Header.Get(protocol.HeaderSessionID) != "" {
			writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeInvalidRequest,
				"Bad Request: initialize must not carry an Mcp-Session-Id")
			return
		}
		h.serveInitialize(w, r, rq, msg)
		return
	}
	if !h.loadSession(w, r, rq) {
		return
	}
	switch msg.Kind {
	case jsonrpc.KindNotification:
		h.srv.Notification(r.Context(), rq, msg)
		w.WriteHeader(http.StatusAccepted)
	case jsonrpc.KindResponse, jsonrpc.KindErrorResponse:
		// Answers to the upstreams' requests the gateway forwarded.
		h.srv.ClientResponse(r.Context(), rq, msg)
		w.WriteHeader(http.StatusAccepted)
	default:
		m := dispatch.LookupMethod(msg.Method, false)
		if m == nil {
			writeJSON(w, http.StatusOK, jsonrpc.AppendError(nil, msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s", msg.Method)))
			return
		}
		h.serveRequest(w, r, rq, msg, m)
	}
}

// bodyChunk is the most readBody allocates before bytes arrive: a body
// larger than it grows as it comes, so that a client announcing a large
// Content-Length and sending it slowly holds no more memory than it sent.
const bodyChunk = 64 << 10

// readBody reads a request body of at most limit bytes.
//
// A body of a known length up to bodyChunk is read into one buffer of that
// size, instead of growing one as io.ReadAll does: for a 10 KB call that is
// five allocations and copies fewer. A longer one starts at bodyChunk and
// doubles as bytes arrive, up to its Content-Length. Either way it reads
// up to the body's EOF.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if n := r.ContentLength; n > limit {
		// Refused before a byte is read or a buffer allocated.
		return nil, &http.MaxBytesError{Limit: limit}
	}
	rd := http.MaxBytesReader(w, r.Body, limit)
	n := r.ContentLength
	size := int64(512)
	if n >= 0 {
		size = min(n, bodyChunk)
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) == n {
				// All that the length announced is in; nothing may follow.
				var one [1]byte
				if m, err := rd.Read(one[:]); m > 0 {
					return nil, errors.New("body longer than its Content-Length")
				} else if err != nil && err != io.EOF {
					return nil, err
				}
				return buf, nil
			}
			next := max(int64(cap(buf))*2, 512)
			if n >= 0 {
				next = min(next, n)
			}
			// Exactly that much: append's growth could pass the length.
			grown := make([]byte, len(buf), min(next, limit+1))
			copy(grown, buf)
			buf = grown
		}
		m, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// isTimeout reports whether err is a read deadline that fired.
func isTimeout(err error) bool {
	var ne net.Error // os.ErrDeadlineExceeded is one
	return errors.As(err, &ne) && ne.Timeout()
}

// loadSession checks the session and version headers of a non-initialize
// request and loads the session into rq. It writes the error response and
// returns false when the request must stop.
func (h *Handler) loadSession(w http.ResponseWriter, r *http.Request, rq *dispatch.Request) bool {
	id := r.Header.Get(protocol.HeaderSessionID)
	if id == "" {
		// 2025-11-25 basic/transports, "Session Management" 2.
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"Bad Request: Mcp-Session-Id header is required")
		return false
	}
	if v := r.Header.Get(protocol.HeaderProtocolVersion); v != "" && !protocol.Listed(v, protocol.SessionVersions) {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("Bad Request: unsupported MCP-Protocol-Version %q (supported: %s)", v, protocol.Join(protocol.SessionVersions, ", ")))
		return false
	}
	var rec *session.Record
	var err error
	if strings.HasPrefix(id, dispatch.StatelessPrefix) {
		// The gateway's own records of stateless callers are not
		// sessions a client may name.
		err = session.ErrNotFound
	} else {
		rec, err = h.store.Get(r.Context(), id)
	}
	if err == nil && !dispatch.BoundTo(rec, rq.Principal()) {
		// A session presented by someone else is, to them, a session that
		// does not exist: same status, same message.
		err = session.ErrNotFound
	}
	if errors.Is(err, session.ErrNotFound) {
		writeError(w, http.StatusNotFound, jsonrpc.ID{}, protocol.CodeSessionNotFound, "Not Found: session not found")
		return false
	}
	if err != nil {
		h.storeFailed(r, "session store", err)
		writeError(w, http.StatusServiceUnavailable, jsonrpc.ID{}, jsonrpc.CodeInternalError, "Service Unavailable: session store unavailable")
		return false
	}
	rq.Session = rec
	// The negotiated version identifies the protocol, whatever the header
	// says (an absent header only means 2025-03-26 when nothing else tells).
	version := rec.ProtocolVersion
	if version == "" {
		version = protocol.Assumed.String()
	}
	rq.Admit(dispatch.Admission{Version: version})
	return true
}

func (h *Handler) serveGET(w http.ResponseWriter, r *http.Request, rq *dispatch.Request) {
	if !accepts(r, "text/event-stream") {
		writeError(w, http.StatusNotAcceptable, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"Not Acceptable: Accept must list text/event-stream")
		return
	}
	if !h.loadSession(w, r, rq) {
		return
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" && h.events != nil {
		h.serveResume(w, r, rq, id)
		return
	}
	h.serveStream(w, r, rq)
}

func (h *Handler) serveDELETE(w http.ResponseWriter, r *http.Request, rq *dispatch.Request) {
	if !h.loadSession(w, r, rq) {
		return
	}
	if err := h.store.Delete(r.Context(), rq.Session.ID); err != nil {
		h.storeFailed(r, "session store", err)
		writeError(w, http.StatusServiceUnavailable, jsonrpc.ID{}, jsonrpc.CodeInternalError, "Service Unavailable: session store unavailable")
		return
	}
	h.streams.end(rq.Session.ID)
	if h.events != nil {
		if err := h.events.End(r.Context(), rq.Session.ID); err != nil {
			h.storeFailed(r, "event log", err) // the logs expire by themselves
		}
	}
	h.srv.EndSession(r.Context(), rq)
	w.WriteHeader(http.StatusNoContent)
}

// storeFailed logs a failure of the session store, unless it only says
// that the client went away.
func (h *Handler) storeFailed(r *http.Request, msg string, err error) {
	if rpcerr.ClientGone(r.Context(), err) {
		h.log.Debug(msg+": client gone", "error", err)
		return
	}
	h.log.Error(msg, "error", err)
}
