package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/mcpgw/gateway/internal/bridge"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/listen"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/relay"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/tenant"
	"github.com/mcpgw/gateway/internal/upcall"
	"github.com/mcpgw/gateway/internal/upstream"
)

// relay forwards a client request to up and relays the answer: each
// Notification as it arrives, then the result (through rewrite, if set) or
// the upstream's error. Requests for input are bridged between the
// revisions (see internal/bridge).
func (rq *Request) relay(ctx context.Context, c *call, up *upstreamRef, params json.RawMessage, rewrite func(json.RawMessage) (json.RawMessage, error)) (json.RawMessage, error) {
	if err := rq.spend(ctx, c, up); err != nil {
		return nil, err
	}
	// A 2026-07-28 client's call may be parked for its retry: then the
	// upstream call outlives this request, and ends with the client gone
	// only while it is not parked.
	callCtx, parked := ctx, false
	if rq.adm.Stateless && c.m.input && rq.h.bridge.Relays() {
		us, err := rq.upstreamSession(ctx, up)
		if err != nil {
			return nil, err
		}
		if !upstream.IsModern(us) {
			// Only a retry carries these: most calls skip the parse.
			if bytes.Contains(params, []byte(`"requestState"`)) || bytes.Contains(params, []byte(`"inputResponses"`)) {
				if p, err := jsonx.ParseValidObject(params); err == nil {
					if state, ok := p.GetString("requestState"); ok {
						return rq.h.bridge.Resume(ctx, rq.caller(), c.bridged(), up.client, us, p, state, rewrite)
					}
					if p.Get("inputResponses") != nil {
						p.Delete("inputResponses")
						params = p.Bytes()
					}
				}
			}
			detached, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
			stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
			defer func() {
				if stop() && !parked {
					cancel(nil)
				}
			}()
			callCtx = detached
			c.cancelParked = cancel
		}
	}
	if rq.adm.Stateless && rq.adm.WantsLogs {
		rq.enableLogs(ctx, up)
	}
	c.hold = listen.NoHold
	if rq.adm.Stateless && c.m.input {
		// The upstream may ask on the shared session's GET stream (see
		// listen.Hub.HoldShared), which must be open first. A parked call's hold is
		// given back when its upstream call ends (upcall.Merged.Close).
		if us, err := rq.upstreamSession(ctx, up); err == nil {
			c.hold = rq.h.listen.HoldShared(rq.withCaller(ctx), listenUpstream(up), us, PrincipalKey(rq), rq.principal.Tenant, &rq.st.cfg.Limits)
			defer func() {
				if !parked {
					c.hold.Release()
				}
			}()
		}
	}
	// The principal's 2026-07-28 clients share its upstream sessions, and
	// each numbers its requests on its own: ids of the gateway's keep two
	// in flight apart. Nothing names them later (see Serve).
	id := upcall.ForwardID(c.id)
	if rq.adm.Stateless {
		id = rq.h.ids.Stateless()
	}
	for round := 1; ; round++ {
		res, us, err := rq.relayOnce(ctx, callCtx, c, up, id, params, &parked)
		if err != nil || parked {
			return res, err
		}
		if !rq.adm.Stateless && upstream.IsModern(us) && c.m.input && bridge.InputRequired(res) {
			// A 2026-07-28 upstream asks a session client for input.
			if round > bridge.MaxInputRounds {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "upstream %s asked for input more than %d times", up.cfg.Name, bridge.MaxInputRounds)
			}
			if params, err = rq.h.bridge.AskClient(ctx, rq.caller(), c.bridged(), up.client, params, res, rq.st.cfg.Sessions.MailboxMessages); err != nil {
				return nil, err
			}
			// A retry is a new request, with an id of its own (mrtr,
			// "Client Requirements" 3).
			id = jsonrpc.StringID("c." + c.id.String() + "/" + strconv.Itoa(round))
			continue
		}
		if rewrite != nil {
			return rewrite(res)
		}
		return res, nil
	}
}

// relayOnce sends one request of relay and relays what comes back until
// its result, which it returns with the upstream session it went on. A
// request for input it parks sets *parked and returns the input_required
// result.
func (rq *Request) relayOnce(ctx, callCtx context.Context, c *call, up *upstreamRef, id jsonrpc.ID, params json.RawMessage, parked *bool) (json.RawMessage, session.Upstream, error) {
	if !rq.adm.Stateless && c.m.input && rq.Session != nil && bytes.Contains(rq.Session.ClientCapabilities, []byte(`"roots"`)) {
		// The upstream may ask the client for its roots on its GET
		// stream, which must be open first (see listen.Hub.Await).
		rq.h.listen.Await(callCtx, rq.Session.ID, up.cfg.Name)
	}
	resp, err := rq.callWith(callCtx, up, id, c.method, params, c.upHeader)
	if err != nil {
		return nil, session.Upstream{}, relay.Error(up.cat.Prefix, err)
	}
	// What the call reads: its response, and the requests of the shared
	// GET stream that are the call's (listen.Hub.HoldShared, upcall.Merge).
	var stream bridge.Stream = resp
	if c.hold != nil && c.hold.Inbox != nil {
		stream = upcall.Merge(resp, c.hold.Inbox, c.hold.Release)
	}
	defer func() {
		if !*parked {
			stream.Close()
		}
	}()
	// A 2026-07-28 caller's call that may need a capability it did not
	// declare is answered 400 (see CapabilityError), which only a response
	// not yet begun can carry: its stream starts with the first event
	// relayed instead of with the upstream's.
	if resp.Streaming() && !(rq.adm.Stateless && c.m.input) {
		c.out.Stream()
	}
	for {
		msg, raw, err := stream.Next()
		if err != nil {
			return nil, resp.Session(), err
		}
		switch msg.Kind {
		case jsonrpc.KindNotification:
			rq.h.observe(up, msg)
			if msg.Method == protocol.NotifyCancelled {
				continue // about the upstream's own requests, of which we relay none
			}
			if msg.Method == protocol.NotifyResourceUpdated {
				// A 2026-07-28 caller hears of updates only on the
				// subscriptions/listen stream that subscribed
				// (basic/patterns/subscriptions): the principal's shared
				// upstream session subscribed to nothing of its.
				if rq.adm.Stateless {
					continue
				}
				if raw = rq.exposeUpdated(ctx, rq.view, up, msg, func(uri string) bool { return rq.holds(up, uri) }); raw == nil {
					continue
				}
			}
			if raw = rq.h.tasks.Note(ctx, rq.taskCaller(), up.cfg.Name, resp.Session(), msg, raw); raw == nil {
				continue // about a task the caller does not hold
			}
			if msg.Method == protocol.NotifyMessage && rq.adm.Stateless && !(rq.adm.WantsLogs && relay.WantsLog(rq.adm.LogLevel, msg)) {
				// 2026-07-28: no log messages for requests that did not
				// ask for them (_meta logLevel), nor below the level
				// they asked for.
				continue
			}
			if err := c.out.Event(raw); err != nil {
				return nil, resp.Session(), err // the client is gone
			}
		case jsonrpc.KindRequest:
			rq.h.tasks.UpstreamRequest(ctx, rq.taskCaller(), up.cfg.Name, resp.Session(), msg)
			who := rq.caller()
			_, _, lacks := rq.h.bridge.Lacks(who, msg)
			if c.cancelParked != nil && !lacks {
				res, err := rq.h.bridge.Park(ctx, who, c.bridged(), up.client, stream, msg, c.cancelParked, rq.st.cfg.Limits.ParkedCallsPerPrincipal)
				if le := (*bridge.LimitError)(nil); errors.As(err, &le) {
					rq.h.LimitHit(ctx, rq, telemetry.LimitParkedCalls, c.method)
				}
				if err != nil {
					return nil, resp.Session(), err
				}
				*parked = true
				return res, resp.Session(), nil
			}
			rq.h.bridge.UpstreamRequest(ctx, who, c.out, up.client, resp.Session(), msg)
			if need, sub, lacks := rq.h.bridge.Lacks(who, msg); rq.adm.Stateless && lacks {
				// The upstream was refused above and hears no more of the
				// call; the client is told what it lacks (2026-07-28
				// basic/index, "Per-request protocol fields").
				return nil, resp.Session(), &protocol.CapabilityError{Capability: need, Sub: sub}
			}
		case jsonrpc.KindResponse:
			return msg.Result, resp.Session(), nil
		case jsonrpc.KindErrorResponse:
			return nil, resp.Session(), relay.Error(up.cat.Prefix, msg.Error)
		}
	}
}

// exposeUpdated returns a notifications/resources/updated of upstream up
// with its uri in the gateway's namespace, or nil when the session may not
// hear of that resource: it holds no subscription the update belongs to
// (held, given the upstream's own URI: see holds), its tenant
// (view) may not see it, or its exposed URI is not up's (an upstream
// naming a URI of another's namespace). The last two are the check a
// subscription makes (resolveURI), so that what a session could not
// subscribe to, it never hears of.
func (rq *Request) exposeUpdated(ctx context.Context, view *tenant.View, up *upstreamRef, msg *jsonrpc.Message, held func(uri string) bool) []byte {
	p, err := jsonx.ParseValidObject(msg.Params)
	if err != nil {
		return nil
	}
	orig, ok := p.GetString("uri")
	if !ok || !held(orig) || !view.Decide(tenant.Resource, up.cfg.Name, orig).Allowed {
		return nil
	}
	exposed := catalog.ExposedURI(up.cat.Prefix, orig)
	owner, back, err := rq.resolveURI(ctx, catalog.Resources, exposed)
	if err != nil || owner.cfg.Name != up.cfg.Name || back != orig {
		return nil
	}
	p.SetString("uri", exposed)
	return jsonrpc.AppendRequest(nil, jsonrpc.ID{}, msg.Method, p.Bytes())
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

// bridged is the call, to the bridge.
func (c *call) bridged() *bridge.Call {
	return &bridge.Call{Method: c.method, Target: c.target, Out: c.out}
}

// ClientResponse routes a session client's answer to a request the
// gateway forwarded to it (see bridge.Bridge.ClientResponse): back to the
// upstream that asked, on the session's own upstream session, when the
// tenant may use that upstream.
func (h *Server) ClientResponse(ctx context.Context, rq *Request, msg *jsonrpc.Message) {
	ctx = rq.withCaller(ctx)
	h.bridge.ClientResponse(ctx, rq.caller(), msg, func(name string) (bridge.Upstream, session.Upstream, bool) {
		up := rq.st.byName[name]
		if up == nil || !slices.Contains(rq.view.Upstreams, name) {
			return nil, session.Upstream{}, false
		}
		us, ok := rq.upstreamEntry(name)
		return up.client, us, ok
	})
}

// enableLogs makes a 2025-11-25 upstream log on the session a 2026-07-28
// request goes on: such an upstream sends log messages only once
// logging/setLevel set a level for the session, and 2026-07-28 has no
// such method but a level per request (changelog, major change 5). The
// principal's requests share that session, so its level is set to debug,
// once per session on each replica, and each request keeps the messages at
// or above its own level (see relay.WantsLog). A failure leaves the request
// without log messages, nothing else.
func (rq *Request) enableLogs(ctx context.Context, up *upstreamRef) {
	us, err := rq.upstreamSession(ctx, up)
	if err != nil || upstream.IsModern(us) || !rq.hasCap(up, "logging") {
		return
	}
	h := rq.h
	key := up.cfg.Name + "\x00" + us.SessionID
	if _, done := h.logsOn.Load(key); done {
		return
	}
	if _, err := rq.roundTrip(ctx, up, protocol.MethodSetLevel, json.RawMessage(`{"level":"debug"}`)); err != nil {
		h.log.Debug("logging/setLevel for a 2026-07-28 caller failed", "upstream", up.cfg.Name, "error", err)
		return
	}
	h.logsOn.put(key, struct{}{}, maxLogsOn) // emptied when full: a session is sent its level again
}

// maxLogsOn bounds the upstream sessions remembered as logging.
const maxLogsOn = 4096

// shapeUpstreamRequest is the bridge's Shape: the resource URIs inside an
// upstream's sampling request, exposed in the gateway's namespace (see
// catalog/uris.go).
func (h *Server) shapeUpstreamRequest(name, method string, params json.RawMessage) json.RawMessage {
	if method != protocol.MethodCreateMessage {
		return params
	}
	up := h.state.Load().byName[name]
	if up == nil {
		return params
	}
	return catalog.ExposeSamplingParams(params, up.cat.Prefix)
}
