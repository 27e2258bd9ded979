package dispatch

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/mcpgw/gateway/internal/capset"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/policy"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/rpcerr"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/subscribe"
	"github.com/mcpgw/gateway/internal/tasks"
	"github.com/mcpgw/gateway/internal/upcall"
	"github.com/mcpgw/gateway/internal/upstream"
)

// A call is one client request being served.
type call struct {
	id     jsonrpc.ID
	method string
	m      *Method // its entry in the method table
	params json.RawMessage
	out    Out

	// Set by the method as it routes, for spans, metrics and the audit log.
	upstream  string // the owning upstream
	target    string // the exposed tool or prompt name, or resource URI
	original  string // the name or URI at the upstream
	arguments json.RawMessage

	// upHeader holds the Mcp-Param-* headers of a tools/call to a
	// 2026-07-28 upstream.
	upHeader http.Header
}

// A methodFunc serves one MCP method. It returns the result, or an error
// that rpcerr.Map turns into the response's error object. Notifications
// it relays on the way go straight to c.out.
type methodFunc func(ctx context.Context, rq *Request, c *call) (json.RawMessage, error)

// capabilities returns what the gateway announces of its capabilities,
// given ups: their union (see capset.Cache.Union), with tasks as
// taskCapabilities has them.
func (rq *Request) capabilities(ups []*upstreamRef) map[string]json.RawMessage {
	offers := make([]capset.Offer, len(ups))
	for i, up := range ups {
		caps := rq.caps(up)
		offers[i] = capset.Offer{Caps: caps, Subscribe: subscribe.Offered(caps)}
	}
	out := rq.h.capNames.Union(offers, rq.adm.Stateless)
	rq.taskCapabilities(ups, out)
	return out
}

// Dispatch serves one request of a session (2025-11-25 and older) through
// the method table. Notifications it relays go to out as they arrive. The
// response message is returned, or nil when it went to out or none must be
// sent (the client cancelled the request).
func (h *Server) Dispatch(ctx context.Context, rq *Request, msg *jsonrpc.Message, out Out) []byte {
	m := LookupMethod(msg.Method, false)
	if m == nil {
		return jsonrpc.AppendError(nil, msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s", msg.Method))
	}
	return h.Serve(ctx, rq, msg, out, m)
}

// Serve is Dispatch with the method's entry m, which the caller looked
// up (see LookupMethod).
func (h *Server) Serve(ctx context.Context, rq *Request, msg *jsonrpc.Message, out Out, m *Method) []byte {
	ctx = rq.withCaller(ctx)
	ctx, cancel := context.WithTimeout(ctx, rq.st.Cfg.Server.RequestTimeout.D())
	defer cancel()
	ctx, cancelCause := context.WithCancelCause(ctx)
	defer cancelCause(nil)
	if !rq.adm.Stateless {
		// A 2026-07-28 request is cancelled by closing its stream
		// (basic/patterns/cancellation, "Transport-Specific
		// Cancellation"), and its id is unique only to its own client,
		// not to the principal's record that several clients share.
		defer h.inflight.Add(rq.Session.ID, msg.ID, cancelCause)()
	}

	c := &call{id: msg.ID, method: msg.Method, m: m, params: msg.Params, out: out}
	res, err := m.handle(ctx, rq, c)
	if err != nil && out.Refuse(msg.ID, err) {
		return nil
	}
	if err != nil {
		if rpcerr.Cancelled(ctx, err) && out.Started() {
			// The client cancelled; it expects no response (2025-11-25
			// basic/utilities/cancellation). End the stream without one.
			return nil
		}
		e := rpcerr.Map(ctx, h.log, msg.Method, err)
		if rq.adm.Stateless && e.Code == protocol.CodeResourceNotFound {
			// 2026-07-28 changelog, minor change 6.
			e = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: e.Message, Data: e.Data}
		}
		if rq.adm.Stateless {
			if status := rpcerr.Status(e.Code); status != http.StatusOK && out.Refuse(msg.ID, &rpcerr.Answer{Err: e, Status: status}) {
				return nil
			}
		}
		return jsonrpc.AppendError(nil, msg.ID, e)
	}
	if rq.adm.Stateless {
		res = h.decorate(rq, m, res)
	}
	if !out.Collects() {
		out.Result(msg.ID, res)
		return nil
	}
	return jsonrpc.AppendResult(nil, msg.ID, res)
}

// Notification handles a notification from the client.
func (h *Server) Notification(ctx context.Context, rq *Request, msg *jsonrpc.Message) {
	ctx = rq.withCaller(ctx)
	switch msg.Method {
	case protocol.NotifyCancelled:
		p, err := jsonx.ParseValidObject(msg.Params)
		if err != nil {
			return
		}
		rid, err := jsonrpc.RawID(p.Get("requestId"))
		if err != nil {
			return
		}
		if h.inflight.Cancel(rq.Session.ID, rid, rpcerr.ErrCancelledByClient) {
			return // the request's relay tells its upstream
		}
		// Not served by this replica (or already done): tell every upstream
		// of the session; the one that has it cancels, the others ignore an
		// unknown id (2025-11-25 basic/utilities/cancellation).
		upcall.NotifyAll(ctx, rq.held.Snapshot(rq.Session), rq.notifier(nil), msg.Method, upcall.CancelledParams(rid))
	case protocol.NotifyRootsListChanged:
		// Each upstream session was announced roots.listChanged if the
		// client declared it (internal/announce); a piped upstream's shared
		// session was not.
		if !strings.Contains(rq.announced().Key(), "roots.listChanged") {
			return
		}
		perSession := func(up *upstreamRef, us session.Upstream) bool {
			return up.Client.PerSession() && !upstream.IsModern(us)
		}
		upcall.NotifyAll(ctx, rq.held.Snapshot(rq.Session), rq.notifier(perSession), msg.Method, nil)
	default:
		// notifications/initialized: the upstreams were initialized at
		// initialize already. Others have no upstream to go to.
	}
}

// routedParams parses params as an object and refuses case variants of the
// member the gateway routes on (see jsonx.Object.HasCaseVariant).
func routedParams(params json.RawMessage, key string) (*jsonx.Object, string, error) {
	p, err := jsonx.ParseValidObject(params)
	if err != nil {
		return nil, "", jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: must be an object")
	}
	if p.HasCaseVariant(key) {
		return nil, "", jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: ambiguous member %q", key)
	}
	v, ok := p.GetString(key)
	if !ok || v == "" {
		return nil, "", jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %s is required", key)
	}
	return p, v, nil
}

// callTool serves tools/call: resolve the exposed name (or serve one of
// the gateway's own tools), check the call (Mcp-Param headers, scopes,
// fixed arguments, the arguments' schema), forward it with the upstream's
// own name, and relay the answer with its resource URIs exposed (a task
// it creates recorded as the caller's).
func callTool(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
	p, name, err := routedParams(c.params, "name")
	if err != nil {
		return nil, err
	}
	if res, ok, err := rq.searchCall(ctx, c, name, p); ok {
		return res, err
	}
	c.target = name
	up, it, err := rq.resolveTool(ctx, name)
	if err == nil {
		err = pinned(up, catalog.Tools, it, name)
	}
	if err == nil && rq.st.Guards.DefinitionBlocked(ctx, rq.view.ID, catalog.Tools, it) {
		err = &catalog.ResolveError{Kind: catalog.Tools, Name: name}
	}
	if err != nil {
		return nil, err
	}
	orig := it.Original
	c.upstream, c.original = up.Cfg.Name, orig
	// Hidden by the principal's rules: unknown, before any other check
	// could tell it exists.
	if err := rq.decidePolicy(ctx, c, policy.PhaseList, catalog.Tools, up, name, orig, nil, false); err != nil {
		return nil, err
	}
	c.arguments = p.Get("arguments")
	if rq.adm.Stateless {
		if msg := catalog.CheckParamHeaders(it.Headers, c.arguments, rq.adm.Header); msg != "" {
			return nil, &catalog.HeaderMismatchError{Msg: msg}
		}
	}
	if need := rq.view.RequiredScopes(up.Cfg.Name, orig); !rq.principal.HasScopes(need...) {
		return nil, &rpcerr.ScopeError{Scopes: append(slices.Clone(rq.st.Cfg.Auth.RequiredScopes), need...)}
	}
	// Before relay, which spends the budgets: a call refused here costs
	// the tenant nothing and never reaches the upstream.
	if err := rq.fixArguments(up, orig, p, c); err != nil {
		return nil, err
	}
	if err := rq.decidePolicy(ctx, c, policy.PhaseCall, catalog.Tools, up, name, orig, c.arguments, true); err != nil {
		return nil, err
	}
	if args, err := rq.guardArguments(ctx, c, up, orig, c.arguments); err != nil {
		return nil, err
	} else if len(args) != len(c.arguments) || string(args) != string(c.arguments) {
		// Redacted: what the upstream gets, and what is validated.
		c.arguments = args
		p.Set("arguments", args)
	}
	c.upHeader = catalog.ParamHeaderValues(it.Headers, c.arguments)
	if err := rq.checkArguments(up, it, c); err != nil {
		return nil, err
	}
	if rq.adm.Stateless {
		err := tasks.Augment(rq.taskCaller(), it.Raw, p, func() (session.Upstream, error) { return rq.hop(up).Session(ctx) })
		if err != nil {
			return nil, err
		}
	}
	p.SetString("name", orig)
	// p goes as it is, and is not touched again: its encoding is written
	// straight into the upstream request's body (see jsonrpc.Params),
	// which spares a copy of the arguments. The resource URIs inside the
	// result are exposed, so that the client
	// can read them back through the gateway (see catalog/uris.go for
	// every place the schema has one).
	prefix := up.Cat.Prefix
	return rq.relay(ctx, c, up, jsonrpc.ObjectParams(p), func(res json.RawMessage) (json.RawMessage, error) {
		if tasks.MayBeCreated(res) {
			us, _ := rq.held.Entry(rq.Session, up.Cfg.Name)
			if out, ok, err := rq.h.tasks.Created(ctx, taskRequest{rq, c}, rq.taskUpstream(up), us, res); ok {
				return out, err
			}
		}
		res, err := rq.checkResult(ctx, up, it, c, res, rpcerr.IsToolError(res))
		if err == nil {
			res, err = rq.guardResult(ctx, c, catalog.Tools, up, orig, res)
		}
		if err != nil {
			return nil, err
		}
		return catalog.ExposeToolResult(res, prefix), nil
	})
}

// getPrompt serves prompts/get: resolve the exposed name, forward it with
// the upstream's own name, relay the answer with its resource URIs
// exposed.
func getPrompt(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
	p, name, err := routedParams(c.params, "name")
	if err != nil {
		return nil, err
	}
	c.target = name
	up, it, err := rq.resolve(ctx, catalog.Prompts, name)
	if err == nil {
		err = pinned(up, catalog.Prompts, it, name)
	}
	if err == nil && rq.st.Guards.DefinitionBlocked(ctx, rq.view.ID, catalog.Prompts, it) {
		err = &catalog.ResolveError{Kind: catalog.Prompts, Name: name}
	}
	if err != nil {
		return nil, err
	}
	c.upstream, c.original = up.Cfg.Name, it.Original
	if err := rq.decidePolicy(ctx, c, policy.PhaseCall, catalog.Prompts, up, name, it.Original, p.Get("arguments"), false); err != nil {
		return nil, err
	}
	p.SetString("name", it.Original)
	prefix := up.Cat.Prefix
	orig := it.Original
	return rq.relay(ctx, c, up, jsonrpc.ObjectParams(p), func(res json.RawMessage) (json.RawMessage, error) {
		res, err := rq.guardResult(ctx, c, catalog.Prompts, up, orig, res)
		if err != nil {
			return nil, err
		}
		return catalog.ExposePromptResult(res, prefix), nil
	})
}

// pinned refuses, as unknown, an item of kind k listed before the pins of
// the snapshot in force (a walk that raced a reload): it is quarantined
// now, so as unknown as it is listed.
func pinned(up *upstreamRef, k catalog.Kind, it *catalog.Item, name string) error {
	if !catalog.PinAllows(up.Cfg.Pin, k, it) {
		return &catalog.ResolveError{Kind: k, Name: name}
	}
	return nil
}

// readResource serves resources/read; the contents' URIs are rewritten to
// their exposed form, so the client sees the URI it asked for.
func readResource(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
	p, uri, err := routedParams(c.params, "uri")
	if err != nil {
		return nil, err
	}
	c.target = uri
	up, orig, err := rq.resolveURI(ctx, catalog.Resources, uri)
	if err != nil {
		return nil, err
	}
	c.upstream, c.original = up.Cfg.Name, orig
	if err := rq.decidePolicy(ctx, c, policy.PhaseCall, catalog.Resources, up, uri, orig, nil, false); err != nil {
		return nil, err
	}
	p.SetString("uri", orig)
	return rq.relay(ctx, c, up, jsonrpc.ObjectParams(p), func(res json.RawMessage) (json.RawMessage, error) {
		res, err := rq.guardResult(ctx, c, catalog.Resources, up, orig, res)
		if err != nil {
			return nil, err
		}
		return catalog.ExposeReadResult(res, up.Cat.Prefix)
	})
}

// complete serves completion/complete, routed by its ref.
func complete(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
	p, err := jsonx.ParseValidObject(c.params)
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: must be an object")
	}
	ref := p.Get("ref")
	if ref == nil || p.HasCaseVariant("ref") {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: ref is required")
	}
	refType, err := jsonx.ParseValidObject(ref)
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: ref must be an object")
	}
	// The ref names a prompt or a resource template: resolved as the
	// tenant sees it, checked as visible, sent with the upstream's own.
	var k catalog.Kind
	var key string
	switch typ, _ := refType.GetString("type"); typ {
	case "ref/prompt":
		k, key = catalog.Prompts, "name"
	case "ref/resource":
		k, key = catalog.Templates, "uri"
	default:
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: unknown ref type %q", typ)
	}
	r, name, err := routedParams(ref, key)
	if err != nil {
		return nil, err
	}
	var up *upstreamRef
	var orig string
	if k == catalog.Prompts {
		var it *catalog.Item
		if up, it, err = rq.resolve(ctx, k, name); err == nil {
			orig = it.Original
		}
	} else {
		up, orig, err = rq.resolveURI(ctx, k, name)
	}
	if err != nil {
		return nil, err
	}
	if err := rq.decidePolicy(ctx, c, policy.PhaseList, k, up, name, orig, nil, false); err != nil {
		return nil, err
	}
	r.SetString(key, orig)
	p.Set("ref", r.Bytes())
	return rq.relay(ctx, c, up, jsonrpc.ObjectParams(p), nil)
}

// setLevel fans logging/setLevel out to every upstream that logs.
func setLevel(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
	var ups []*upstreamRef
	for _, up := range rq.upstreams() {
		// 2026-07-28 removed logging/setLevel (changelog, major change 5):
		// such an upstream is not sent it.
		if rq.hasCap(up, "logging") && !rq.modern(up) {
			ups = append(ups, up)
		}
	}
	errs := make([]error, len(ups))
	var wg sync.WaitGroup
	for i, up := range ups {
		wg.Go(func() {
			_, errs[i] = rq.roundTrip(ctx, up, c.method, c.params)
			if errs[i] != nil {
				rq.h.log.Warn("logging/setLevel failed", "upstream", up.Cfg.Name, "error", errs[i])
				return
			}
			// Log messages come on the upstream's GET stream (see
			// listen.go).
			rq.markListen(ctx, up)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil {
			return json.RawMessage(`{}`), nil
		}
	}
	if len(errs) > 0 {
		return nil, errs[0] // every upstream refused: most likely a bad level
	}
	return json.RawMessage(`{}`), nil
}

// notifier returns the upstream to send a notification on one of the
// session's upstream sessions, to upcall.NotifyAll: any upstream of the
// snapshot, or those only may allows when it is set.
func (rq *Request) notifier(may func(*upstreamRef, session.Upstream) bool) func(string, session.Upstream) (upcall.Notifier, bool) {
	return func(name string, us session.Upstream) (upcall.Notifier, bool) {
		up := rq.st.ByName[name]
		if up == nil || may != nil && !may(up, us) {
			return nil, false
		}
		return up.Client, true
	}
}
