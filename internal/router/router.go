// Package router is the gateway's MCP endpoint: the Streamable HTTP
// transport rules, the session lifecycle, and the method table that
// aggregates a tenant's upstreams behind one MCP server.
//
//	client ──POST/GET/DELETE /mcp──► Handler.ServeHTTP
//	                                   │ Origin, Accept, size, JSON-RPC envelope
//	                                   │ session: Mcp-Session-Id → session.Record
//	                                   │          (bound to the principal in ctx)
//	                                   ▼
//	                                 methods (a table, not a switch)
//	                                   │ lists: catalog (per-replica cache) merge
//	                                   │ calls: catalog resolve → owning upstream
//	                                   ▼
//	                                 upstream.Client ──► upstream MCP server
//
// # Sessions
//
// initialize creates a [session.Record] and opens one upstream session per
// upstream the tenant may use; their Mcp-Session-Ids live in the record, so
// any replica holding the same store can serve the next request. An upstream
// that forgot its session (404) is re-initialized transparently and the new
// id is stored with compare-and-swap.
//
// # Streams
//
// A request routed to one upstream is answered the way the upstream answers:
// a JSON body stays a JSON body, an SSE stream is relayed event by event as
// it arrives (progress, log messages, then the result). The client's request
// id never reaches the upstream; the upstream sees "c.<id>" and the response
// gets the client's id back, byte for byte.
//
// # Pass-through
//
// Params and results stay raw JSON; the router rewrites only the member it
// routes on (a name, a URI) and leaves every other byte alone.
package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/auth"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/tenant"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Options configure a Handler.
type Options struct {
	// Config is the initial configuration; it must be valid and have its
	// defaults applied.
	Config *config.Config
	// Store keeps session records. Required.
	Store session.Store
	// Logger, if nil, means no logging.
	Logger *slog.Logger
	// Version is the gateway's version, announced in serverInfo.
	Version string
	// HTTPClient sends upstream requests. If nil, each upstream gets its own.
	HTTPClient *http.Client
	// Metrics, if nil, means no metrics.
	Metrics *telemetry.Metrics
	// TracerProvider, if nil, means no spans; the client's trace context
	// still reaches the upstreams.
	TracerProvider trace.TracerProvider
	// Audit, if nil, means no audit log.
	Audit *audit.Logger
}

// Handler serves the MCP endpoint.
type Handler struct {
	state   atomic.Pointer[state]
	store   session.Store
	mailbox session.Mailbox // the store's, if it has one: see mrtr.go
	log     *slog.Logger
	version string
	httpc   *http.Client

	catalog  *catalog.Catalog
	watch    watchers
	streams  streams
	inflight inflight
	sf       singleflight.Group
	ids      atomic.Uint64
	idPrefix string // random, per process: see internalID

	metrics *telemetry.Metrics
	tracer  trace.Tracer
	audit   *audit.Logger

	healthMu sync.Mutex
	health   map[string]error // upstream → last request's error

	capsMu      sync.Mutex
	lastCaps    map[string]json.RawMessage // upstream → capabilities last seen
	capSets     sync.Map                   // capabilities JSON → names, see capSet
	capSetCount atomic.Int64

	own    owner   // goroutines that outlive a request: see owner.go
	parked parking // parked calls per principal: see mrtr.go
}

// state is one configuration snapshot and what was built from it. A request
// takes the snapshot it started with and keeps it to the end.
type state struct {
	cfg       *config.Config
	upstreams []*upstreamRef // config order
	byName    map[string]*upstreamRef
	origins   map[string]bool // accepted Origin values
	tenants   *tenant.Set
	merged    sync.Map // mergedKey → *mergedEntry: lists as each tenant sees them
	byTenant  sync.Map // tenant id → *tenantUpstreams
}

// upstreamRef is one configured upstream and its client.
type upstreamRef struct {
	cfg    config.Upstream
	cat    catalog.Upstream // what the catalog knows of it
	client *upstream.Client
}

// tenantUpstreams are the upstreams a tenant may use, in config order, and
// the same for the catalog; built once per config snapshot and tenant.
type tenantUpstreams struct {
	refs []*upstreamRef
	cats []*catalog.Upstream
}

// New returns a Handler for opts.
func New(opts Options) (*Handler, error) {
	if opts.Store == nil {
		return nil, errors.New("router: no session store")
	}
	if opts.Config == nil {
		return nil, errors.New("router: no config")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{
		store:    opts.Store,
		log:      log,
		version:  opts.Version,
		httpc:    opts.HTTPClient,
		lastCaps: make(map[string]json.RawMessage),
		idPrefix: session.NewID()[:12],
		metrics:  opts.Metrics,
		tracer:   telemetry.Tracer(opts.TracerProvider),
		audit:    opts.Audit,
	}
	h.mailbox, _ = opts.Store.(session.Mailbox)
	h.catalog = catalog.New(opts.Config.Server.ListCacheTTL.D(), log, opts.Metrics)
	h.catalog.Configure(opts.Config)
	h.catalog.OnChange = h.upstreamListChanged
	st := h.build(opts.Config, nil)
	h.state.Store(st)
	h.syncWatches(st)
	return h, nil
}

// build makes the state for cfg. An upstream whose config is unchanged
// from prev keeps its client (and so its connections).
func (h *Handler) build(cfg *config.Config, prev *state) *state {
	st := &state{cfg: cfg, byName: make(map[string]*upstreamRef), origins: make(map[string]bool), tenants: tenant.NewSet(cfg)}
	info, _ := json.Marshal(map[string]string{"name": "mcp-gateway", "version": h.version})
	for _, u := range cfg.Upstreams {
		if prev != nil {
			if old := prev.byName[u.Name]; old != nil && reflect.DeepEqual(old.cfg, u) {
				st.upstreams = append(st.upstreams, old)
				st.byName[u.Name] = old
				continue
			}
		}
		ref := &upstreamRef{cfg: u, cat: catalog.NewUpstream(&u)}
		ref.client = upstream.New(u, upstream.Options{
			HTTPClient: h.httpc,
			Logger:     h.log.With("upstream", u.Name),
			ClientInfo: info,
			// Requests for input are bridged to the clients that can
			// answer them, and refused for the others (see mrtr.go).
			Capabilities: json.RawMessage(`{"elicitation":{"form":{},"url":{}},"sampling":{},"roots":{}}`),
			Inject:       telemetry.InjectHeaders,
		})
		st.upstreams = append(st.upstreams, ref)
		st.byName[u.Name] = ref
	}
	for _, o := range cfg.Server.AllowedOrigins {
		st.origins[strings.ToLower(o)] = true
	}
	if u, err := url.Parse(cfg.Server.PublicURL); err == nil && u.Host != "" {
		st.origins[strings.ToLower(u.Scheme+"://"+u.Host)] = true
	}
	return st
}

// Close ends and waits for every goroutine the Handler started beyond a
// request (parked calls' pumps, watches, expiries, replaced clients'
// Close), then waits for the upstream clients' background work
// (cancellations, session terminations) and releases their connections.
// Requests still being served are the HTTP server's to drain first.
func (h *Handler) Close() error {
	h.stopWatches()
	h.own.close()
	h.catalog.Close()
	var errs []error
	for _, up := range h.state.Load().upstreams {
		errs = append(errs, up.client.Close())
	}
	return errors.Join(errs...)
}

// A Snapshot is one generation of the router's config, served as is:
// whatever reloads happen meanwhile, [Snapshot.KnownTenant] and
// [Snapshot.ServeHTTP] answer from that generation alone. The gateway
// builds each generation's auth chain around one, so that the tenant check
// at the edge and the routing behind it always see the same config, at the
// cost of the one atomic load that picks the chain.
type Snapshot struct {
	h  *Handler
	st *state
}

// Current returns the generation in force.
func (h *Handler) Current() *Snapshot { return &Snapshot{h: h, st: h.state.Load()} }

// KnownTenant reports whether the snapshot's config names tenant id.
func (s *Snapshot) KnownTenant(id string) bool { return s.st.tenants.Known(id) }

// ServeHTTP serves the MCP endpoint with the snapshot's config.
func (s *Snapshot) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.h.serve(w, r, s.st) }

// ServeHTTP implements http.Handler for the MCP endpoint, with the config
// in force when the request arrives. A caller that checks the request
// against the config first (as the auth middleware checks its tenant)
// serves it with the [Snapshot] it checked against instead.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.serve(w, r, h.state.Load()) }

// serve serves one request with st, the config it keeps to the end.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, st *state) {
	// DNS-rebinding protection (2025-11-25 basic/transports, "Security
	// Warning"): an Origin, when present, must be one we accept.
	if o := r.Header.Get("Origin"); o != "" && !st.origins[strings.ToLower(o)] {
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
	view, err := st.tenants.Get(p.Tenant)
	if err != nil {
		writeError(w, http.StatusForbidden, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Forbidden: unknown tenant")
		return
	}
	rq := &request{h: h, st: st, principal: p, view: view}
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

// request is the per-request context the method handlers share. It is the
// same whichever protocol revision the request came in with.
type request struct {
	h         *Handler
	st        *state
	principal *auth.Principal
	view      *tenant.View
	version   string // protocol version in effect

	// stateless is set for requests of the 2026-07-28 revision; sess is
	// then the record the gateway keeps for the principal. wantsLogs says
	// such a request asked for log messages (_meta logLevel).
	stateless, wantsLogs bool
	header               http.Header     // the request's, for Mcp-Param-* checks
	metaCaps             json.RawMessage // a stateless request's client capabilities

	// mu guards sess.Upstreams, which requests fanned out to several
	// upstreams update concurrently.
	mu   sync.Mutex
	sess *session.Record // nil until initialize stored it
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

func (h *Handler) servePOST(w http.ResponseWriter, r *http.Request, rq *request) {
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
	limit := rq.st.cfg.Server.MaxBodyBytes
	body, err := readBody(w, r, limit)
	if err != nil {
		// The deadline stays: it bounds what net/http may read of the
		// rest of the body after the answer.
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			h.limitHit(r.Context(), rq, telemetry.LimitBodyBytes, "")
			w.Header().Set("Connection", "close") // the rest of the body is not read
			writeError(w, http.StatusRequestEntityTooLarge, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("Request Entity Too Large: body exceeds %d bytes", limit))
		case isTimeout(err):
			// The connection is left with an expired read deadline and
			// half a body in it: it cannot carry another request.
			h.limitHit(r.Context(), rq, telemetry.LimitReadBodyTimeout, "")
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestTimeout, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("Request Timeout: body not received within %s", rq.st.cfg.Server.ReadBodyTimeout.D()))
		default:
			writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Bad Request: could not read body")
		}
		return
	}
	if jsonrpc.IsBatch(body) {
		if !h.loadSession(w, r, rq) {
			return
		}
		if v, _ := protocol.ParseVersion(rq.version); v.AtLeast(protocol.V2025_06_18) {
			// The 2025-06-18 changelog removed JSON-RPC batching.
			writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				"Bad Request: JSON-RPC batches are not supported in protocol version "+rq.version)
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
	if msg.Kind == jsonrpc.KindRequest && msg.Method == "initialize" {
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
		h.notification(r.Context(), rq, msg)
		w.WriteHeader(http.StatusAccepted)
	case jsonrpc.KindResponse, jsonrpc.KindErrorResponse:
		// Answers to the upstreams' requests the gateway forwarded.
		h.clientResponse(r.Context(), rq, msg)
		w.WriteHeader(http.StatusAccepted)
	default:
		h.serveRequest(w, r, rq, msg)
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
func (h *Handler) loadSession(w http.ResponseWriter, r *http.Request, rq *request) bool {
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
	if strings.HasPrefix(id, statelessPrefix) {
		// The gateway's own records of stateless callers are not
		// sessions a client may name.
		err = session.ErrNotFound
	} else {
		rec, err = h.store.Get(r.Context(), id)
	}
	if err == nil && !boundTo(rec, rq.principal) {
		// A session presented by someone else is, to them, a session that
		// does not exist: same status, same message.
		err = session.ErrNotFound
	}
	if errors.Is(err, session.ErrNotFound) {
		writeError(w, http.StatusNotFound, jsonrpc.ID{}, protocol.CodeSessionNotFound, "Not Found: session not found")
		return false
	}
	if err != nil {
		h.log.Error("session store", "error", err)
		writeError(w, http.StatusServiceUnavailable, jsonrpc.ID{}, jsonrpc.CodeInternalError, "Service Unavailable: session store unavailable")
		return false
	}
	rq.sess = rec
	// The negotiated version identifies the protocol, whatever the header
	// says (an absent header only means 2025-03-26 when nothing else tells).
	rq.version = rec.ProtocolVersion
	if rq.version == "" {
		rq.version = protocol.Assumed.String()
	}
	return true
}

func boundTo(rec *session.Record, p *auth.Principal) bool {
	return rec.Principal.Issuer == p.Issuer && rec.Principal.Subject == p.Subject && rec.Principal.Tenant == p.Tenant
}

func (h *Handler) serveGET(w http.ResponseWriter, r *http.Request, rq *request) {
	if !accepts(r, "text/event-stream") {
		writeError(w, http.StatusNotAcceptable, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			"Not Acceptable: Accept must list text/event-stream")
		return
	}
	if !h.loadSession(w, r, rq) {
		return
	}
	h.serveStream(w, r, rq)
}

func (h *Handler) serveDELETE(w http.ResponseWriter, r *http.Request, rq *request) {
	if !h.loadSession(w, r, rq) {
		return
	}
	if err := h.store.Delete(r.Context(), rq.sess.ID); err != nil {
		h.log.Error("session store", "error", err)
		writeError(w, http.StatusServiceUnavailable, jsonrpc.ID{}, jsonrpc.CodeInternalError, "Service Unavailable: session store unavailable")
		return
	}
	h.streams.end(rq.sess.ID)
	h.catalog.EndSession(rq.sess.ID)
	h.terminateUpstreams(r.Context(), rq.st, rq.sess)
	w.WriteHeader(http.StatusNoContent)
}

// terminateTimeout bounds the termination of one session's upstream
// sessions.
const terminateTimeout = 5 * time.Second

// terminateUpstreams ends a gateway session's upstream sessions, all at once
// (one goroutine per upstream, waited for) and bounded in time, whatever
// happens to ctx.
func (h *Handler) terminateUpstreams(ctx context.Context, st *state, rec *session.Record) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), terminateTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for name, us := range rec.Upstreams {
		up := st.byName[name]
		if up == nil || us.SessionID == "" {
			continue
		}
		wg.Go(func() {
			if err := up.client.Terminate(ctx, us); err != nil {
				h.log.Warn("terminating upstream session", "upstream", name, "error", err)
			}
		})
	}
	wg.Wait()
}
