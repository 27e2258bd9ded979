package dispatch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/gateway/internal/announce"
	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/auth"
	"github.com/mcpgw/gateway/internal/backend"
	"github.com/mcpgw/gateway/internal/bridge"
	"github.com/mcpgw/gateway/internal/budget"
	"github.com/mcpgw/gateway/internal/capset"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/generation"
	"github.com/mcpgw/gateway/internal/instructions"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/listen"
	"github.com/mcpgw/gateway/internal/observe"
	"github.com/mcpgw/gateway/internal/own"
	"github.com/mcpgw/gateway/internal/pipe"
	"github.com/mcpgw/gateway/internal/relay"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/subscribe"
	"github.com/mcpgw/gateway/internal/tasks"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/tenant"
	"github.com/mcpgw/gateway/internal/upcall"
	"github.com/mcpgw/gateway/internal/upstream"
	"github.com/mcpgw/gateway/internal/watch"
)

// Options configure a Server.
type Options struct {
	// Config is the initial configuration; it must be valid and have its
	// defaults applied.
	Config *config.Config
	// Backend holds the stores: session records, tasks, mailboxes, the
	// session bus, budget counters, the vault. Required; the caller
	// closes it after the Server.
	Backend *backend.Backend
	// Logger, if nil, means no logging.
	Logger *slog.Logger
	// Version is the gateway's version, announced in serverInfo.
	Version string
	// HTTPClient sends upstream requests. If nil, each upstream gets its own.
	HTTPClient *http.Client
	// AuthClient talks to the authorization servers of upstreams with
	// auth (token requests, discovery). If nil, a default client.
	AuthClient *http.Client
	// Metrics, if nil, means no metrics.
	Metrics *telemetry.Metrics
	// TracerProvider, if nil, means no spans; the client's trace context
	// still reaches the upstreams.
	TracerProvider trace.TracerProvider
	// Audit, if nil, means no audit log.
	Audit *audit.Logger
	// Now, if not nil, is the clock of quotas' periods; nil means
	// time.Now.
	Now func() time.Time
}

// A Server answers MCP methods for the transport: it holds what outlives
// one request (the config snapshot in force, the catalog, the upstream
// clients and the goroutines beyond a request).
type Server struct {
	state atomic.Pointer[State]
	// shared is what every generation is built with (generation.Build).
	shared  generation.Shared
	store   session.Store
	tasks   *tasks.Tasks
	log     *slog.Logger
	version string
	authc   *http.Client

	catalog *catalog.Catalog
	watch   *watch.Watches[*upstreamRef] // one stream per watched upstream
	// listChanged is the transport's hook for an upstream's changed
	// list (see OnListChanged).
	listChanged atomic.Pointer[func(st *State, upstream string, k catalog.Kind)]
	inflight    upcall.InFlight
	opener      *upcall.Opener // the sessions' upstream sessions: see upcall.Hop
	ids         *upcall.IDs    // of the requests the gateway sends upstream

	metrics *telemetry.Metrics
	tracer  trace.Tracer
	audit   *audit.Logger
	obs     *observe.Recorder // what a served request leaves: see pipeline.go

	health upcall.Health // upstream → last request's error

	seenCaps     capset.Seen         // upstream → capabilities last seen
	capNames     capset.Cache        // capabilities JSON → names
	instructions instructions.Memory // upstream → its instructions last seen
	announced    announce.Cache      // clients' capabilities → what upstreams are told
	logging      upcall.Logging      // upstream sessions set to log: see enableLogs

	listen *listen.Hub       // messages outside a request: the upstream streams, the bus
	subs   *subscribe.Keeper // session clients' resource subscriptions

	own own.Group // goroutines that outlive a request: see owner.go
	// expiries end expired sessions' upstream sessions (owner.go).
	expiries *upcall.Expiries
	bridge   *bridge.Bridge // requests for input between revisions
	relayer  *relay.Relayer // client requests relayed to upstreams: see relay.go

	budgets *budget.Engine // rate limits and quotas: see budgets.go

	broker *credentials.Broker // user_oauth: see useroauth.go
}

// A State is one configuration snapshot (a generation.State) and what
// dispatch caches of it. A request takes the snapshot it started with and
// keeps it to the end.
type State struct {
	*generation.State
	merged   catalog.MergedCache // lists as each tenant sees them
	byTenant sync.Map            // tenant id → *tenantUpstreams
}

// upstreamRef is one configured upstream and its client.
type upstreamRef = generation.Upstream

// tenantUpstreams are the upstreams a tenant may use, in config order, and
// the same for the catalog; built once per config snapshot and tenant.
type tenantUpstreams struct {
	refs []*upstreamRef
	cats []*catalog.Upstream
}

// New returns a Server for opts.
func New(opts Options) (*Server, error) {
	if opts.Backend == nil {
		return nil, errors.New("dispatch: no backend")
	}
	if opts.Config == nil {
		return nil, errors.New("dispatch: no config")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Server{
		store:   opts.Backend.Sessions,
		log:     log,
		version: cmp.Or(opts.Version, "dev"), // Implementation.version is required
		authc:   opts.AuthClient,
		ids:     upcall.NewIDs(session.NewID()[:12]),
		metrics: opts.Metrics,
		tracer:  telemetry.Tracer(opts.TracerProvider),
		audit:   opts.Audit,
		obs:     observe.New(opts.Metrics, telemetry.Tracer(opts.TracerProvider), opts.Audit, log),
	}
	h.opener = upcall.NewOpener(h.store, func(name string, res *upstream.InitResult) {
		h.seenCaps.Remember(name, res.Session.Capabilities)
		h.instructions.Remember(name, res.Instructions)
	}, log)
	h.budgets = budget.NewEngine(opts.Backend.Budgets, log, opts.Now)
	h.budgets.OnQuota = opts.Metrics.QuotaUsed
	h.expiries = upcall.NewExpiries(&h.own, func(rec *session.Record) { h.terminateUpstreams(context.Background(), h.state.Load(), rec) }, log)
	h.listen = listen.New(listen.Options{Bus: opts.Backend.Bus, Go: h.own.Go, Metrics: opts.Metrics, Logger: log})
	h.subs = subscribe.NewKeeper(h.store, h.listen, log)
	h.watch = watch.New(log, func(up *upstreamRef) *upstream.Client { return up.Client }, watchHooks{h})
	h.tasks = tasks.New(opts.Backend.Tasks, log, h.ids.Internal)
	h.bridge = bridge.New(bridge.Options{
		Mailbox: opts.Backend.Mailbox, Logger: log, Metrics: opts.Metrics, Caps: h.capNames.Names, Own: &h.own, Shape: h.shapeUpstreamRequest,
		Observe: func(name string, msg *jsonrpc.Message) {
			if ks := catalog.ChangedKinds(msg.Method); ks != nil {
				h.catalog.Stale(name, ks...)
			}
		},
	})
	h.relayer = &relay.Relayer{Bridge: h.bridge, Tasks: h.tasks, IDs: h.ids}
	var err error
	if h.broker, err = newBroker(opts.Config, opts.Backend.Vault, h); err != nil {
		return nil, err
	}
	guards := budget.NewGuards()
	guards.Notify = h.obs.CircuitChanged
	h.shared = generation.Shared{
		Version: h.version, Guards: guards, Broker: h.broker,
		Processes:  pipe.NewLimit(0), // set from the config by each generation
		HTTPClient: opts.HTTPClient, AuthClient: opts.AuthClient, Metrics: opts.Metrics, Log: log,
	}
	gen, err := h.Prepare(opts.Config)
	if err != nil {
		return nil, err
	}
	h.catalog = catalog.New(opts.Config.Server.ListCacheTTL.D(), log, opts.Metrics)
	h.catalog.Configure(opts.Config)
	h.catalog.OnChange = h.upstreamListChanged
	h.catalog.OnPin = h.obs.PinMismatch
	st := &State{State: generation.Build(gen, nil, &h.shared)}
	h.state.Store(st)
	h.syncWatches(st)
	return h, nil
}

// Close ends and waits for every goroutine the Server started beyond a
// request (parked calls' pumps, watches, expiries, replaced clients'
// Close), then waits for the upstream clients' background work
// (cancellations, session terminations) and releases their connections.
// Requests still being served are the HTTP server's to drain first.
func (h *Server) Close() error {
	h.watch.Close()
	h.own.Close()
	h.catalog.Close()
	return h.state.Load().Close()
}

// OnListChanged sets fn as what happens when an upstream's list of kind k
// changed: the transport tells the sessions whose tenant sees it. fn gets
// the snapshot in force.
func (h *Server) OnListChanged(fn func(st *State, upstream string, k catalog.Kind)) {
	h.listChanged.Store(&fn)
}

// upstreamListChanged is the catalog's hook (see OnListChanged).
func (h *Server) upstreamListChanged(upstream string, k catalog.Kind) {
	if fn := h.listChanged.Load(); fn != nil {
		(*fn)(h.state.Load(), upstream, k)
	}
}

// Current returns the config snapshot in force.
func (h *Server) Current() *State { return h.state.Load() }

// Store returns the session store.
func (h *Server) Store() session.Store { return h.store }

// A Request is the per-request context the method handlers share. It is the
// same whichever protocol revision the request came in with.
type Request struct {
	h         *Server
	st        *State
	principal *auth.Principal
	view      *tenant.View

	// adm is what the transport learned of the request, set once (Admit)
	// before it is served.
	adm Admission

	// who is whom the upstream requests are made for, once known (see
	// withCaller).
	who *credentials.Caller

	// held guards Session.Upstreams, which requests fanned out to several
	// upstreams, and a GET stream's listeners, change concurrently: it is
	// read and changed only through it (see upcall.Hop).
	held    upcall.Held
	Session *session.Record // nil until initialize stored it
}

// An Admission is what the transport learns of a request before it is
// served: given once, with Request.Admit, and read-only from then on.
type Admission struct {
	Version string // protocol version in effect
	// Stateless is set for requests of the 2026-07-28 revision; the
	// request's Session is then the record the gateway keeps for the
	// principal. WantsLogs says such a request asked for log messages
	// (_meta logLevel).
	Stateless, WantsLogs bool
	// LogLevel is the least severe level of log message such a request
	// asked for.
	LogLevel string
	Header   http.Header     // the request's, for Mcp-Param-* checks
	MetaCaps json.RawMessage // a stateless request's client capabilities
}

// Admit gives the request what the transport learned of it. The
// transport calls it once, before anything serves the request.
func (rq *Request) Admit(a Admission) { rq.adm = a }

// Admission returns what the transport learned of the request.
func (rq *Request) Admission() Admission { return rq.adm }

// Stateless reports whether the request is of the 2026-07-28 revision.
func (rq *Request) Stateless() bool { return rq.adm.Stateless }

// NewRequest returns the request of principal p, of tenant view v, served
// with config snapshot st.
func (h *Server) NewRequest(st *State, p *auth.Principal, v *tenant.View) *Request {
	return &Request{h: h, st: st, principal: p, view: v}
}

// State returns the config snapshot the request is served with.
func (rq *Request) State() *State { return rq.st }

// Principal returns the caller.
func (rq *Request) Principal() *auth.Principal { return rq.principal }

// BoundTo reports whether rec belongs to principal p: the same issuer,
// subject and tenant.
func BoundTo(rec *session.Record, p *auth.Principal) bool {
	return rec.Principal.Issuer == p.Issuer && rec.Principal.Subject == p.Subject && rec.Principal.Tenant == p.Tenant
}

// terminateUpstreams ends a gateway session's upstream sessions, all at
// once and bounded in time, whatever happens to ctx (see upcall.Terminate).
func (h *Server) terminateUpstreams(ctx context.Context, st *State, rec *session.Record) {
	upcall.Terminate(recordCaller(ctx, st, rec.Principal), rec.Upstreams, func(name string) *upstream.Client {
		if up := st.ByName[name]; up != nil {
			return up.Client
		}
		return nil
	}, h.log)
}
