package dispatch

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/instructions"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upcall"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Upstream sessions: each gateway session owns one session per upstream its
// tenant may use. They are opened at initialize, but for a stdio upstream's
// (see lazy); one that was not opened then (lazy, or the upstream was
// down) is opened on first use, and one the upstream forgot is opened
// again. Opening is deduplicated per replica with singleflight and across
// replicas by the store's compare-and-swap: the loser of a race ends the
// session it opened and uses the winner's.
//
// What initialize answers of an upstream not opened yet comes from what
// this replica last saw of it (caps, and package instructions' memory):
// its capabilities as an earlier session reported them, else unknown,
// which hasCap takes for offered; its instructions, else none.

// upstreams returns the tenant's upstreams, in config order. The slice is
// shared: it must not be modified.
func (rq *Request) upstreams() []*upstreamRef { return rq.tenantUpstreams().refs }

// tenantUpstreams returns the tenant's upstreams, made once per snapshot.
func (rq *Request) tenantUpstreams() *tenantUpstreams {
	if v, ok := rq.st.byTenant.Load(rq.view.ID); ok {
		return v.(*tenantUpstreams)
	}
	tu := &tenantUpstreams{}
	for _, name := range rq.view.Upstreams {
		if up := rq.st.ByName[name]; up != nil {
			tu.refs = append(tu.refs, up)
			tu.cats = append(tu.cats, &up.Cat)
		}
	}
	v, _ := rq.st.byTenant.LoadOrStore(rq.view.ID, tu)
	return v.(*tenantUpstreams)
}

// initClients returns the clients of those of ups whose sessions are
// opened at initialize: all but the lazy ones.
func (h *Server) initClients(ups []*upstreamRef) []*upstream.Client {
	cs := make([]*upstream.Client, 0, len(ups))
	for _, up := range ups {
		if !h.lazy(up) {
			cs = append(cs, up.Client)
		}
	}
	return cs
}

// noteInit notes how opening an upstream session at initialize went.
func (h *Server) noteInit(name string, err error) {
	h.noteUpstream(name, err)
	if err != nil && !credentials.CallerMustAct(err) {
		h.log.Warn("upstream initialize failed", "upstream", name, "error", err)
	}
}

// lazy reports whether the session with up is opened only by the first
// request that needs it, not at initialize: a stdio upstream's, whose
// session may start a process (each session's with isolation: session;
// else the first session of a tenant, or of all with isolation: shared,
// starts one), once this replica knows what it offers. A client that never
// lists nor calls starts none, nor does one that uses one of its tenant's
// stdio upstreams start the others. A list starts it unless the catalog
// holds that list already (shared within the tenant, see
// catalog.Upstream); then its first call does. The first session after
// the replica starts opens it at initialize, so that what the gateway
// announces (tasks, resources.subscribe) is what the server offers, not a
// guess.
func (h *Server) lazy(up *upstreamRef) bool {
	if !up.Cfg.IsStdio() {
		return false
	}
	_, known := h.seenCaps.Last(up.Cfg.Name)
	return known
}

// instructions returns the gateway's instructions for ups (see package
// instructions).
func (rq *Request) instructions(ups []*upstreamRef) string {
	in := make([]instructions.Upstream, len(ups))
	for i, up := range ups {
		in[i] = instructions.Upstream{Name: up.Cfg.Name, Prefix: up.Cat.Prefix, Config: up.Cfg.Instructions}
	}
	return rq.h.instructions.Merge(in)
}

// caps returns what is known of an upstream's capabilities: from this
// session's upstream session, else as last seen by this replica (on any
// session: an upstream not opened yet, see lazy, is announced so at
// initialize).
func (rq *Request) caps(up *upstreamRef) json.RawMessage {
	if us, ok := rq.held.Entry(rq.Session, up.Cfg.Name); ok {
		return us.Capabilities
	}
	caps, _ := rq.h.seenCaps.Last(up.Cfg.Name)
	return caps
}

// hasCap reports whether the upstream is known to offer capability name. An
// upstream whose capabilities are unknown (never reached) is assumed to
// offer it, so that it is tried.
func (rq *Request) hasCap(up *upstreamRef, name string) bool {
	caps := rq.caps(up)
	if caps == nil {
		return true
	}
	return rq.h.capNames.Names(caps)[name]
}

// modern reports whether the session's upstream session with up is of the
// 2026-07-28 revision.
func (rq *Request) modern(up *upstreamRef) bool {
	us, _ := rq.held.Entry(rq.Session, up.Cfg.Name)
	return upstream.IsModern(us)
}

// hop is how the request reaches up: on the session's upstream session,
// opened on first use with the capabilities announced to the session's
// upstreams.
func (rq *Request) hop(up *upstreamRef) upcall.Hop {
	return upcall.Hop{Held: &rq.held, Record: rq.Session, Opener: rq.h.opener, Client: up.Client,
		Caps: func() json.RawMessage { return rq.announced().Caps() }}
}

// callWith sends one request to up on the session's upstream session,
// opening or re-opening the upstream session as needed, with the
// Mcp-Param-* headers of a tools/call for a 2026-07-28 upstream (see
// upcall.Hop.Call). It runs in a client span whose context travels
// upstream in the headers and in params._meta; the span ends, and the
// upstream request is counted, when the response is closed. It is admitted by
// the upstream's gate and breaker (guard), and its outcome noted for
// readiness (noteUpstream).
func (rq *Request) callWith(ctx context.Context, up *upstreamRef, id jsonrpc.ID, method string, params jsonrpc.Params, hdr http.Header) (*upcall.Response, error) {
	h := rq.h
	return rq.hop(up).Call(ctx, upcall.Call{
		Tracer: h.tracer, Metrics: h.metrics, Tenant: rq.view.ID,
		ID: id, Method: method, Params: params, Header: hdr,
		Shape: rq.upstreamParams,
		Guard: func(ctx context.Context) (func(error), error) { return rq.guard(ctx, up) },
		Note:  func(err error) { h.noteUpstream(up.Cfg.Name, err) },
		Log:   h.log,
	})
}

// upstreamParams shapes a client's params for the revision the upstream
// session speaks (see upcall.ShapeParams).
func (rq *Request) upstreamParams(us session.Upstream, params jsonrpc.Params) jsonrpc.Params {
	if rq.adm.Stateless || rq.Session == nil {
		return upcall.ShapeParams(us, params, rq.adm.Stateless, nil, nil)
	}
	return upcall.ShapeParams(us, params, false, rq.Session.ClientInfo, rq.Session.ClientCapabilities)
}

// noteUpstream records how the last request to an upstream went, for
// readiness: a gateway none of whose upstreams answers is not ready.
func (h *Server) noteUpstream(name string, err error) {
	if credentials.CallerMustAct(err) {
		return // says nothing of the upstream: see credentials.CallerMustAct
	}
	h.health.Note(name, err)
}

// UpstreamProblems returns, when every upstream that was tried failed on
// its last request, one line per upstream; nil when at least one upstream
// answers (or none was tried yet).
func (h *Server) UpstreamProblems() []string {
	st := h.state.Load()
	names := make([]string, len(st.Upstreams))
	for i, up := range st.Upstreams {
		names[i] = up.Cfg.Name
	}
	return h.health.Problems(names)
}

// roundTrip sends a request the gateway itself needs answered and returns
// the result, ignoring any notifications on the way.
func (rq *Request) roundTrip(ctx context.Context, up *upstreamRef, method string, params json.RawMessage) (json.RawMessage, error) {
	resp, err := rq.callWith(ctx, up, rq.h.ids.Internal(), method, jsonrpc.RawParams(params), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Close()
	return upcall.ResultOf(resp.Next, func(msg *jsonrpc.Message) { rq.h.observe(up, msg) })
}

// fetchList returns all items of kind k from up, following nextCursor
// within b, on the request's own upstream session.
func (rq *Request) fetchList(ctx context.Context, up *upstreamRef, k catalog.Kind, b catalog.Bounds) ([]json.RawMessage, bool, error) {
	return catalog.Paginate(up.Cfg.Name, k, b, func(params json.RawMessage) (json.RawMessage, error) {
		return rq.roundTrip(ctx, up, k.Info().ListMethod, params)
	})
}

// listScope is the scope of the request's listings of up: the identity it
// reaches up with, and its gateway session (for a stateless request, the
// principal's record), whose own listings serve upstreams with lists per
// session.
func (rq *Request) listScope(up *catalog.Upstream) catalog.Scope {
	sc := catalog.Scope{Tenant: rq.view.ID}
	if rq.Session != nil {
		sc.Session = rq.Session.ID
	}
	ref := rq.st.ByName[up.Name]
	if rq.st.PerRequest && ref != nil {
		sc.Partition = rq.partition(ref)
	}
	// Listings fetched on sessions announced different capabilities may
	// differ (see internal/announce).
	if key := rq.announced().Key(); key != "" && (ref == nil || ref.Client.PerSession()) {
		sc.Partition = key + "\x00" + sc.Partition
	}
	return sc
}

// observe reacts to a notification an upstream sent: a list change marks
// the catalog's listings of that kind stale. It returns the kinds whose
// listings were cached, as catalog.Stale does.
func (h *Server) observe(up *upstreamRef, msg *jsonrpc.Message) (had, partitioned []catalog.Kind) {
	if ks := catalog.ChangedKinds(msg.Method); ks != nil {
		return h.catalog.Stale(up.Cfg.Name, ks...)
	}
	return nil, nil
}

// Listing implements catalog.Lookup: up's listing of kind k through the
// catalog, the shared one, or, for an upstream whose lists are per session
// (or private), the one fetched under this session's own upstream session
// and never served to another.
func (rq *Request) Listing(ctx context.Context, up *catalog.Upstream, k catalog.Kind) (*catalog.Listing, error) {
	scope := rq.listScope(up)
	if l := rq.h.catalog.Fresh(up, k, scope); l != nil {
		return l, nil // every call's path: no closure, no allocation
	}
	ref := rq.st.ByName[up.Name]
	return rq.h.catalog.Get(ctx, up, k, scope, func(ctx context.Context, b catalog.Bounds) ([]json.RawMessage, bool, error) {
		return rq.fetchList(ctx, ref, k, b)
	})
}

// Visible implements catalog.Lookup with the tenant's policy: whether it
// may see, and so use, the item of kind k that up calls name (see
// tenant.View.Decide).
func (rq *Request) Visible(k catalog.Kind, up *catalog.Upstream, name string) bool {
	return rq.view.Decide(k.Policy(), up.Name, name).Allowed
}

// resolve finds the upstream exposing name (a tool or prompt name, or a
// resource URI in the listing of kind k) and its listed item.
func (rq *Request) resolve(ctx context.Context, k catalog.Kind, name string) (*upstreamRef, *catalog.Item, error) {
	tu := rq.tenantUpstreams()
	i, it, err := rq.h.catalog.Resolve(ctx, k, name, tu.cats, rq)
	if err != nil {
		return nil, nil, err
	}
	return tu.refs[i], it, nil
}

// resolveURI finds the upstream serving a resource URI (or a URI template,
// for completions) and the URI it has there.
func (rq *Request) resolveURI(ctx context.Context, k catalog.Kind, uri string) (*upstreamRef, string, error) {
	tu := rq.tenantUpstreams()
	i, orig, err := rq.h.catalog.ResolveURI(ctx, k, uri, tu.cats, rq)
	if err != nil {
		return nil, "", err
	}
	return tu.refs[i], orig, nil
}
