package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"

	"github.com/mcpgw/gateway/internal/bridge"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/listen"
	"github.com/mcpgw/gateway/internal/relay"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/tasks"
	"github.com/mcpgw/gateway/internal/tenant"
	"github.com/mcpgw/gateway/internal/upcall"
)

// relay forwards a client request to up and relays the answer (see
// relay.Relayer.Relay), once its budgets allow it.
func (rq *Request) relay(ctx context.Context, c *call, up *upstreamRef, params jsonrpc.Params, rewrite func(json.RawMessage) (json.RawMessage, error)) (json.RawMessage, error) {
	if err := rq.spend(ctx, c, up); err != nil {
		return nil, err
	}
	return rq.h.relayer.Relay(ctx, hop{rq, c, up}, &relay.Request{
		ID: c.id, Method: c.method, Target: c.target, Params: params, Input: c.m.input, Out: c.out,
		Stateless: rq.adm.Stateless, WantsLogs: rq.adm.WantsLogs, LogLevel: rq.adm.LogLevel,
		Upstream: up.Client, Prefix: up.Cat.Prefix,
		MailboxMessages: rq.st.Cfg.Sessions.MailboxMessages, ParkedCalls: rq.st.Cfg.Limits.ParkedCallsPerPrincipal,
		Rewrite: rewrite,
	})
}

// hop is request rq's call c to upstream up, to the relay.
type hop struct {
	rq *Request
	c  *call
	up *upstreamRef
}

func (x hop) Session(ctx context.Context) (session.Upstream, error) {
	return x.rq.hop(x.up).Session(ctx)
}

func (x hop) Call(ctx context.Context, id jsonrpc.ID, params jsonrpc.Params) (*upcall.Response, error) {
	return x.rq.callWith(ctx, x.up, id, x.c.method, params, x.c.upHeader)
}

func (x hop) Observe(msg *jsonrpc.Message) { x.rq.h.observe(x.up, msg) }

func (x hop) ExposeUpdated(ctx context.Context, msg *jsonrpc.Message) []byte {
	rq, up := x.rq, x.up
	return rq.exposeUpdated(ctx, rq.view, up, msg, func(uri string) bool { return rq.holds(up, uri) })
}

func (x hop) EnableLogs(ctx context.Context) { x.rq.enableLogs(ctx, x.up) }

func (x hop) HoldShared(ctx context.Context, us session.Upstream) *listen.Hold {
	rq := x.rq
	return rq.h.listen.HoldShared(rq.withCaller(ctx), listenUpstream(x.up), us, PrincipalKey(rq), rq.principal.Tenant, &rq.st.Cfg.Limits)
}

func (x hop) AwaitRoots(ctx context.Context) {
	if rq := x.rq; rq.Session != nil && bytes.Contains(rq.Session.ClientCapabilities, []byte(`"roots"`)) {
		rq.h.listen.Await(ctx, rq.Session.ID, x.up.Cfg.Name)
	}
}

func (x hop) Caller() *bridge.Caller   { return x.rq.caller() }
func (x hop) TaskCaller() tasks.Caller { return x.rq.taskCaller() }
func (x hop) LimitHit(ctx context.Context, limit string) {
	x.rq.h.LimitHit(ctx, x.rq, limit, x.c.method)
}

// exposeUpdated returns a notifications/resources/updated of upstream up
// with its uri in the gateway's namespace, or nil when the session may not
// hear of that resource (see catalog.Catalog.ExposeUpdated): held says
// whether it holds a subscription the update belongs to (see holds), view
// is its tenant's, and the exposed URI must resolve back to up's among the
// tenant's upstreams, as a subscription's does (resolveURI).
func (rq *Request) exposeUpdated(ctx context.Context, view *tenant.View, up *upstreamRef, msg *jsonrpc.Message, held func(uri string) bool) []byte {
	return rq.h.catalog.ExposeUpdated(ctx, msg, &up.Cat, view, held, rq.tenantUpstreams().cats, rq)
}

// caller is who rq is, to the bridge.
func (rq *Request) caller() *bridge.Caller {
	who := &bridge.Caller{Principal: PrincipalKey(rq), Tenant: rq.principal.Tenant, Stateless: rq.adm.Stateless}
	switch {
	case rq.adm.Stateless:
		who.Caps = rq.adm.MetaCaps
	case rq.Session != nil:
		who.Caps = rq.Session.ClientCapabilities
	}
	if rq.Session != nil {
		who.Session = rq.Session.ID
	}
	return who
}

// ClientResponse routes a session client's answer to a request the
// gateway forwarded to it (see bridge.Bridge.ClientResponse): back to the
// upstream that asked, on the session's own upstream session, when the
// tenant may use that upstream.
func (h *Server) ClientResponse(ctx context.Context, rq *Request, msg *jsonrpc.Message) {
	ctx = rq.withCaller(ctx)
	h.bridge.ClientResponse(ctx, rq.caller(), msg, func(name string) (bridge.Upstream, session.Upstream, bool) {
		up := rq.st.ByName[name]
		if up == nil || !slices.Contains(rq.view.Upstreams, name) {
			return nil, session.Upstream{}, false
		}
		us, ok := rq.held.Entry(rq.Session, name)
		return up.Client, us, ok
	})
}

// enableLogs makes a 2025-11-25 upstream log on the session a 2026-07-28
// request goes on (see upcall.Logging.Enable). A failure leaves the
// request without log messages, nothing else.
func (rq *Request) enableLogs(ctx context.Context, up *upstreamRef) {
	us, err := rq.hop(up).Session(ctx)
	if err != nil {
		return
	}
	err = rq.h.logging.Enable(ctx, up.Cfg.Name, us, rq.hasCap(up, "logging"), func(ctx context.Context, method string, params json.RawMessage) error {
		_, err := rq.roundTrip(ctx, up, method, params)
		return err
	})
	if err != nil {
		rq.h.log.Debug("logging/setLevel for a 2026-07-28 caller failed", "upstream", up.Cfg.Name, "error", err)
	}
}

// shapeUpstreamRequest is the bridge's Shape: the resource URIs inside an
// upstream's request, exposed in the gateway's namespace (see
// catalog.ExposeUpstreamRequest).
func (h *Server) shapeUpstreamRequest(name, method string, params json.RawMessage) json.RawMessage {
	if up := h.state.Load().ByName[name]; up != nil {
		return catalog.ExposeUpstreamRequest(method, params, up.Cat.Prefix)
	}
	return params
}
