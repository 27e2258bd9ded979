// Package gateway assembles the gateway from its parts: the stores,
// the MCP endpoint behind its middleware, the admin endpoints, and the HTTP
// servers that serve them. cmd/gateway parses flags and calls [Run]; tests
// build the same handler with [New].
package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/auth"
	"github.com/mcpgw/gateway/internal/backend"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/console"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/dispatch"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/observe"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/tenant"
	"github.com/mcpgw/gateway/internal/transport"
	"github.com/mcpgw/gateway/internal/vault"
)

// Options configure a Gateway.
type Options struct {
	// Logger, if nil, means no logging.
	Logger *slog.Logger
	// Version is announced in serverInfo.
	Version string
	// HTTPClient sends upstream requests; nil means each upstream gets its
	// own pooled client.
	HTTPClient *http.Client
	// IdPClient fetches issuers' discovery documents and keys; nil means
	// http.DefaultClient.
	IdPClient *http.Client
	// Listener, if not nil, is the MCP listener [Run] serves, instead of
	// one it opens on server.listen.
	Listener net.Listener
	// AdminListener, if not nil, is the admin listener Run serves,
	// instead of listening on server.admin_listen itself.
	AdminListener net.Listener
	// Getenv expands ${VAR} when [Run] reloads the config file and sets up
	// tracing from OTEL_* variables; nil means os.Getenv.
	Getenv func(string) string
	// TracerProvider, if not nil, receives the spans (tests use an
	// in-memory one); else Run sets one up from the config and OTEL_*.
	TracerProvider trace.TracerProvider
	// Audit, if not nil, receives the audit records; else Run opens the
	// configured audit output.
	Audit *audit.Logger
	// Now, if not nil, is the clock that decides quotas' periods (tests
	// move it to the next day); nil means time.Now.
	Now func() time.Time
}

// A Gateway is a configured gateway, ready to serve.
type Gateway struct {
	log     *slog.Logger
	limiter *telemetry.LogLimiter // log's handler
	opts    Options
	stores  *backend.Backend   // sessions, events, tasks, bus, budgets, vault
	server  *dispatch.Server   // the methods, the catalog, the upstreams
	edge    *transport.Handler // the MCP endpoint in front of server
	mux     http.Handler
	metrics *telemetry.Metrics

	live     atomic.Pointer[live] // swapped whole on reload
	draining atomic.Bool          // set by Run when it starts to shut down
	reload   reloadState
	watch    watchState // the config file's watch, started by Run
	console  *consoleState
}

// live is what a reload replaces: one config generation, the endpoint's
// snapshot of it and the auth chain in front of that snapshot. A request
// loads it once, when it enters /mcp, and keeps it: its tenant is checked
// and routed against the same config, whatever reloads happen meanwhile.
type live struct {
	cfg      *config.Config
	verifier *auth.Verifier // nil with auth.anonymous
	authn    http.Handler   // the auth middleware in front of the endpoint's snapshot of cfg
	metadata http.Handler   // RFC 9728 document; nil with auth.anonymous
	tokens   http.Handler   // a user's own upstream links (user_oauth), behind the same auth
}

// New builds a gateway for cfg, which must be valid with defaults applied.
// Call Close when done.
func New(cfg *config.Config, opts Options) (*Gateway, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	metrics := telemetry.NewMetrics(prometheus.NewRegistry())
	// A failure every request meets (the store down) is logged once per
	// window, not once per request.
	limiter := telemetry.NewLogLimiter(log.Handler(), metrics)
	log = slog.New(limiter)
	var expire atomic.Pointer[dispatch.Server]
	cs, auditLog := newConsoleState(opts.Audit)
	opts.Audit = auditLog
	stores, err := backend.New(cfg, backend.Options{Logger: log, Metrics: metrics, OnExpire: func(rec *session.Record) {
		if h := expire.Load(); h != nil {
			h.Expire(rec)
		}
	}})
	if err != nil {
		return nil, err
	}
	srv, err := dispatch.New(dispatch.Options{
		Config: cfg, Backend: stores, Logger: log, Version: opts.Version, HTTPClient: opts.HTTPClient, AuthClient: opts.IdPClient, Now: opts.Now,
		Metrics: metrics, TracerProvider: opts.TracerProvider, Audit: opts.Audit,
	})
	if err != nil {
		stores.Close()
		return nil, err
	}
	expire.Store(srv)
	edge := transport.New(srv, transport.Options{Logger: log, Metrics: metrics, Events: stores.Events})
	g := &Gateway{log: log, limiter: limiter, opts: opts, stores: stores, server: srv, edge: edge, metrics: metrics, console: cs}
	v, err := g.verifierFor(cfg, nil)
	if err != nil {
		g.Close()
		return nil, err
	}
	g.live.Store(g.buildLive(cfg, v, edge.Current()))
	srv.Broker().SetVerifier(g.verifyLogin)
	g.reload.generation = 1
	g.reload.loaded = time.Now()
	metrics.ConfigLoaded()
	g.mux = g.newMux()
	return g, nil
}

// verifierFor returns the token verifier for cfg: prev's (with its caches
// and discovered keys) when the auth settings did not change, none with
// auth.anonymous. It is the part of a generation that can fail, so it is
// built before anything is swapped.
func (g *Gateway) verifierFor(cfg *config.Config, prev *live) (*auth.Verifier, error) {
	if cfg.Auth.Anonymous {
		return nil, nil
	}
	if prev != nil && prev.verifier != nil && reflect.DeepEqual(prev.cfg.Auth, cfg.Auth) && prev.cfg.Server.PublicURL == cfg.Server.PublicURL {
		return prev.verifier, nil
	}
	return auth.NewVerifier(cfg, auth.Options{HTTPClient: g.opts.IdPClient, Logger: g.log})
}

// buildLive builds the auth chain for cfg, verifying with v (nil with
// auth.anonymous), in front of rt, the endpoint's snapshot of the same cfg:
// the middleware's tenant check asks rt, so it accepts exactly the tenants
// rt routes.
func (g *Gateway) buildLive(cfg *config.Config, v *auth.Verifier, rt *transport.Snapshot) *live {
	l := &live{cfg: cfg, verifier: v}
	tokens := g.server.Broker().TokensHandler(userOf)
	if cfg.Auth.Anonymous {
		l.authn = auth.Anonymous(tenant.DefaultID)(rt)
		l.tokens = auth.Anonymous(tenant.DefaultID)(tokens)
		return l
	}
	mw := auth.Middleware(v, auth.MiddlewareOptions{
		ResourceMetadataURL: auth.MetadataURL(cfg.Server.PublicURL),
		RequiredScopes:      cfg.Auth.RequiredScopes,
		KnownTenant:         rt.KnownTenant,
		Logger:              g.log,
		OnFailure: func(reason string) {
			g.metrics.AuthFailure(reason)
			g.opts.Audit.Record(context.Background(), audit.Record{
				Time: time.Now(), Event: audit.EventAuthFailure, Decision: audit.DecisionDeny,
				Outcome: audit.OutcomeDenied, Reason: reason,
			})
		},
	})
	l.authn = mw(rt)
	l.tokens = mw(tokens)
	l.metadata = auth.MetadataHandler(cfg, scopesSupported(cfg))
	return l
}

// verifyLogin verifies a token of the gateway's own issuers, as /mcp
// does, for the sign-in of a consent page (vault.login).
func (g *Gateway) verifyLogin(ctx context.Context, token string) (vault.Principal, error) {
	l := g.live.Load()
	if l.verifier == nil {
		return vault.Principal{}, errors.New("no issuers (auth.anonymous)")
	}
	p, err := l.verifier.Verify(ctx, token)
	if err != nil {
		return vault.Principal{}, err
	}
	return vault.Principal{Issuer: p.Issuer, Subject: p.Subject, Tenant: p.Tenant}, nil
}

// userOf returns the verified caller of a request, as the vault names it.
func userOf(r *http.Request) (vault.Principal, bool) {
	p, ok := auth.PrincipalFrom(r.Context())
	if !ok {
		return vault.Principal{}, false
	}
	return vault.Principal{Issuer: p.Issuer, Subject: p.Subject, Tenant: p.Tenant}, true
}

// Config returns the configuration in force.
func (g *Gateway) Config() *config.Config { return g.live.Load().cfg }

// Handler returns the handler of the MCP listener.
func (g *Gateway) Handler() http.Handler { return g.mux }

// Close releases the gateway's resources: it stops the config watch, then
// the transport's and the server's goroutines, then the stores.
func (g *Gateway) Close() error {
	g.stopWatch()
	g.edge.Close() // the transport's own goroutines first: they write to the stores
	err := errors.Join(g.server.Close(), g.stores.Close())
	g.limiter.Close() // last: the closes above may log
	return err
}

// newMux wires the MCP endpoint: recover, request id, auth, then the transport;
// and, with issuers, the protected resource metadata (RFC 9728) at both the
// path-inserted and the root well-known URL.
func (g *Gateway) newMux() http.Handler {
	r := chi.NewRouter()
	r.Use(recoverer(g.log))
	r.Use(middleware.RequestID)
	r.With(telemetry.HTTPMiddleware(g.opts.TracerProvider, "/mcp")).Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.draining.Load() {
			// Served, but the connection is not kept: the client's next
			// request opens a new one, which a load balancer (or a
			// Service's proxy) that no longer lists this replica sends
			// elsewhere. net/http closes it after the response.
			w.Header().Set("Connection", "close")
		}
		// The request's one snapshot of the config: the deadline below,
		// the auth chain and the transport behind it all read this one.
		l := g.live.Load()
		// The body's read deadline starts here, before authentication:
		// a request refused with 401 leaves its body for net/http to
		// discard, and a client sending it slowly must not hold the
		// connection for that. net/http clears it when the body reaches
		// EOF, as the transport's read of it always does.
		if t := l.cfg.Server.ReadBodyTimeout.D(); t > 0 && r.Method == http.MethodPost {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(t))
		}
		l.authn.ServeHTTP(w, r)
	}))
	// The metadata paths depend on server.public_url, which a reload does
	// not change (it is the listener's identity).
	for _, p := range auth.MetadataPaths(g.Config().Server.PublicURL) {
		// Every method: the handler answers GET and HEAD, and CORS
		// preflights (browser-based hosts fetch the document).
		r.Handle(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if m := g.live.Load().metadata; m != nil {
				m.ServeHTTP(w, r)
				return
			}
			http.NotFound(w, r)
		}))
	}
	// The keys of the tokens the gateway signs for upstreams with auth
	// mode signed_identity (an empty set when none has).
	r.Handle("/.well-known/jwks.json", g.server.JWKS())
	// Per-user upstream OAuth (user_oauth): the consent page and the
	// authorization servers' callback, for browsers; a user's own links,
	// for the user's client, authenticated as /mcp is.
	consent := g.server.Broker().Handler()
	r.Handle(credentials.ConsentPath, consent)
	r.Handle(credentials.CallbackPath, consent)
	tokens := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.live.Load().tokens.ServeHTTP(w, r) })
	r.Handle(credentials.TokensPath, tokens)
	r.Handle(credentials.TokensPath+"/*", tokens)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 page not found: the MCP endpoint is /mcp", http.StatusNotFound)
	})
	return r
}

// recoverer turns a panic in a handler into a log line, never a crash.
// Before the response has started it answers 500 with a JSON-RPC internal
// error. After it has started (an SSE stream whose headers and first events
// are out) a status can no longer be sent, and writing an error into the
// stream would read as part of it: it aborts the connection with
// http.ErrAbortHandler instead, so the client sees a broken stream, not a
// complete one. A handler's own http.ErrAbortHandler goes on unlogged: that
// is how a handler aborts a stream.
//
// The handler gets a telemetry.ResponseWriter, which tells whether the
// response has started; the telemetry middleware inside reuses it.
func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rw := telemetry.WrapResponseWriter(w)
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				if rw.Started() {
					log.Error("panic serving request", "panic", fmt.Sprint(v), "path", r.URL.Path, "response", "aborted")
					panic(http.ErrAbortHandler)
				}
				log.Error("panic serving request", "panic", fmt.Sprint(v), "path", r.URL.Path)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write(jsonrpc.AppendError(nil, jsonrpc.ID{}, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error"}))
			}()
			next.ServeHTTP(rw, r)
		})
	}
}

// AdminHandler serves the operator endpoints: /healthz (the process is
// alive), /readyz (it can serve: its dependencies answer, and it is not
// shutting down) and the operator console (see console.go).
func (g *Gateway) AdminHandler() http.Handler {
	r := chi.NewRouter()
	r.Handle("/metrics", g.metrics.Handler())
	cons := g.consoleHandler()
	r.Handle(console.Path, cons)
	r.Handle(console.Path+"/*", cons)
	if g.Config().Telemetry.Pprof {
		r.HandleFunc("/debug/pprof/*", pprof.Index)
		r.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		r.HandleFunc("/debug/pprof/profile", pprof.Profile)
		r.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		r.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	r.Get("/readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		problems := g.Ready(r.Context())
		if len(problems) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			for _, p := range problems {
				_, _ = io.WriteString(w, p+"\n")
			}
		} else {
			_, _ = io.WriteString(w, "ok\n")
		}
		// Detail, not a verdict: a failed reload leaves the last good
		// config serving.
		_, _ = io.WriteString(w, g.ReloadStatus()+"\n")
		// Detail too: an open circuit leaves one upstream out, and the
		// gateway serves the others.
		st := g.server.Current()
		for _, n := range st.CircuitNotes() {
			_, _ = io.WriteString(w, n+"\n")
		}
		// Detail too: a quarantined tool is hidden, the rest is served.
		for _, n := range observe.PinNotes(g.server.PinMismatches()) {
			_, _ = io.WriteString(w, n+"\n")
		}
		for _, n := range st.Guards.Notes() {
			_, _ = io.WriteString(w, n+"\n")
		}
	})
	return r
}

// Ready returns what keeps the gateway from serving, one line each; none
// when it is ready.
func (g *Gateway) Ready(ctx context.Context) []string {
	if g.draining.Load() {
		// Nothing else matters, and nothing else is asked: a load
		// balancer must stop sending here from this answer on.
		return []string{"draining: shutting down"}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var problems []string
	if ping := g.stores.Ping; ping != nil {
		if err := ping(ctx); err != nil {
			problems = append(problems, "session store: "+err.Error())
		}
	}
	if v := g.live.Load().verifier; v != nil {
		if err := v.Ready(ctx); err != nil {
			problems = append(problems, err.Error())
		}
	}
	// At least one upstream usable: when every upstream's last request
	// failed, the gateway can serve nothing.
	problems = append(problems, g.server.UpstreamProblems()...)
	return problems
}

// scopesSupported lists every scope the gateway may ask for: the global
// ones and each tool's, sorted.
func scopesSupported(cfg *config.Config) []string {
	set := map[string]bool{}
	for _, s := range cfg.Auth.RequiredScopes {
		set[s] = true
	}
	for _, t := range cfg.Tenants {
		for _, u := range t.Upstreams {
			for _, scopes := range u.RequiredScopes {
				for _, s := range scopes {
					set[s] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Run serves cfg until ctx is done, then shuts down gracefully. ready, if
// not nil, is called with the MCP listener's address once it accepts
// connections.
func Run(ctx context.Context, cfg *config.Config, opts Options, ready func(addr string)) error {
	getenv := getenvOr(opts.Getenv)
	if opts.TracerProvider == nil {
		tp, shutdown, err := telemetry.SetupTracing(ctx, cfg.Telemetry.Tracing, opts.Version, getenv)
		if err != nil {
			return fmt.Errorf("tracing: %w", err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = shutdown(sctx)
		}()
		opts.TracerProvider = tp
	}
	if opts.Audit == nil {
		a, closer, err := audit.Open(cfg.Telemetry.Audit, os.Stderr, os.Stdout)
		if err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
		defer closer.Close()
		opts.Audit = a
	}
	g, err := New(cfg, opts)
	if err != nil {
		return err
	}
	defer g.Close() // stops and waits for the config watch too
	log := g.log
	if cfg.Path != "" {
		g.startWatch(cfg.Path, getenv, reloadInterval)
	}

	ln := opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Server.Listen); err != nil {
			return err
		}
	}
	srv := &http.Server{
		Handler:           g.Handler(),
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout.D(),
		// No WriteTimeout: responses stream. Each request is bounded by
		// server.request_timeout inside the handler instead. No
		// ReadTimeout either: it would be fixed at start, and span the
		// headers; the transport sets server.read_body_timeout on each POST
		// from its live config, when it starts reading the body.
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    stdlog.New(httpErrorLog{log}, "", 0),
	}
	servers := []*http.Server{srv}
	listeners := []net.Listener{ln}
	if aln := opts.AdminListener; aln != nil || cfg.Server.AdminListen != "" {
		if aln == nil {
			if aln, err = net.Listen("tcp", cfg.Server.AdminListen); err != nil {
				ln.Close()
				return fmt.Errorf("admin listener: %w", err)
			}
		}
		servers = append(servers, &http.Server{Handler: g.AdminHandler(), ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, aln)
		log.Info("admin listening on http://" + aln.Addr().String())
	}

	errc := make(chan error, len(servers))
	for i, s := range servers {
		go func() { errc <- s.Serve(listeners[i]) }()
	}
	addr := ln.Addr().String()
	if ready != nil {
		ready(addr)
	}
	log.Info("listening on http://"+addr+"/mcp", "upstreams", len(cfg.Upstreams), "session_store", cfg.Sessions.Store)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	g.drain(srv, servers[1:], serveErr != nil)
	return serveErr
}

// drain shuts the servers down, the MCP server mcp first, then others (the
// admin server), in the order a load balancer in front needs (see
// docs/operations.md, "Shutdown"):
//
//  1. /readyz answers 503 at once, and responses on the MCP listener close
//     their connections; the MCP listener keeps accepting for
//     server.drain_delay (none if failed: a listener broke), the time
//     load balancers need to take the replica out of rotation;
//  2. then the server-to-client streams are told to reconnect elsewhere,
//     the MCP listener closes, and requests in flight get what is left of
//     server.shutdown_grace, counted from the start, to finish; those
//     still running then are cut;
//  3. last, the admin listener closes, so that /readyz says 503 to the end.
func (g *Gateway) drain(mcp *http.Server, others []*http.Server, failed bool) {
	start := time.Now()
	g.draining.Store(true)
	s := g.Config().Server
	delay := time.Duration(0)
	if s.DrainDelay != nil && !failed {
		delay = s.DrainDelay.D()
	}
	g.log.Info("shutting down", "drain_delay", delay, "shutdown_grace", cmp.Or(s.ShutdownGrace.D(), config.DefaultShutdownGrace))
	time.Sleep(delay)
	g.edge.Drain()
	grace := cmp.Or(s.ShutdownGrace.D(), config.DefaultShutdownGrace)
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(grace))
	defer cancel()
	if err := mcp.Shutdown(ctx); err != nil {
		g.log.Warn("shutdown grace over: cutting the requests still in flight", "shutdown_grace", grace)
		_ = mcp.Close()
	}
	for _, o := range others {
		// Its requests are short (probes, scrapes), or a pprof profile
		// that need not outlive the process.
		octx, ocancel := context.WithTimeout(context.Background(), time.Second)
		_ = o.Shutdown(octx)
		ocancel()
		_ = o.Close()
	}
	g.log.Info("shut down", "duration", time.Since(start).Round(time.Millisecond))
}

// httpErrorLog is net/http's error log (a TLS handshake that failed, a
// malformed request): a warning per line, under one fixed message, the line
// in "error". The log limiter then keys them together, and no line, which
// names a remote address, becomes a metric label.
type httpErrorLog struct{ log *slog.Logger }

func (w httpErrorLog) Write(p []byte) (int, error) {
	w.log.Warn("http server", "error", strings.TrimSpace(string(p)))
	return len(p), nil
}
