package dispatch

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/tasks"
)

// Tasks are kept and served by internal/tasks; here is what it needs of a
// request (taskRequest) and the table's handlers that hand tasks/* to it.

// taskMethod serves tasks/get, tasks/result, tasks/cancel and
// tasks/update.
func taskMethod(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
	p, gid, err := routedParams(c.params, "taskId")
	if err != nil {
		return nil, err
	}
	name, res, err := rq.h.tasks.Serve(ctx, taskRequest{rq, c}, c.method, p, gid)
	if name != "" {
		c.upstream = name
	}
	return res, err
}

// listTasks serves tasks/list.
func listTasks(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
	return rq.h.tasks.List(ctx, taskRequest{rq, c}, c.params)
}

// taskCaller is who rq is, to internal/tasks.
func (rq *Request) taskCaller() tasks.Caller {
	p := rq.principal
	return tasks.Caller{
		Principal: session.Principal{Issuer: p.Issuer, Subject: p.Subject, Tenant: p.Tenant},
		Stateless: rq.adm.Stateless, MetaCaps: rq.adm.MetaCaps,
		Settings: tasks.SettingsOf(rq.st.Cfg.Sessions.Tasks, rq.st.Cfg.Server.RequestTimeout.D()),
	}
}

// taskUpstream is up, to internal/tasks.
func (rq *Request) taskUpstream(up *upstreamRef) *tasks.Upstream {
	return &tasks.Upstream{
		Name: up.Cfg.Name, Prefix: up.Cat.Prefix, Client: up.Client,
		Guard: func(ctx context.Context) (func(error), error) { return rq.guard(ctx, up) },
	}
}

// taskCapabilities adds what the gateway offers of tasks to out, given
// ups (see tasks.Capabilities).
func (rq *Request) taskCapabilities(ups []*upstreamRef, out map[string]json.RawMessage) {
	offers := make([]tasks.Offer, len(ups))
	for i, up := range ups {
		offers[i] = tasks.Offer{Caps: rq.caps(up), Modern: rq.modern(up)}
	}
	tasks.Capabilities(rq.adm.Stateless, offers, out)
}

// ListenTasksError is the error of a 2026-07-28 subscriptions/listen that
// asks for task notifications without declaring the Tasks extension; nil
// when it declared it.
func (rq *Request) ListenTasksError() *protocol.CapabilityError {
	return tasks.ListenError(rq.adm.MetaCaps)
}

// A taskRequest is the client request c of rq, as internal/tasks sees it.
type taskRequest struct {
	rq *Request
	c  *call
}

func (tr taskRequest) Caller() tasks.Caller { return tr.rq.taskCaller() }

func (tr taskRequest) Upstream(name string) (*tasks.Upstream, bool) {
	rq := tr.rq
	up := rq.st.ByName[name]
	if up == nil || !slices.Contains(rq.view.Upstreams, name) {
		return nil, false
	}
	return rq.taskUpstream(up), true
}

func (tr taskRequest) UseSession(name string, us session.Upstream) {
	cur, _ := tr.rq.held.Entry(tr.rq.Session, name)
	if cur.SessionID != us.SessionID || cur.ProtocolVersion != us.ProtocolVersion {
		us.Capabilities = cur.Capabilities
		tr.rq.held.Set(tr.rq.Session, name, us)
	}
}

func (tr taskRequest) Relay(ctx context.Context, method string, up *tasks.Upstream, params json.RawMessage) (json.RawMessage, error) {
	c := tr.c
	if method != c.method {
		rc := *c
		rc.method = method
		c = &rc
	}
	c.upstream = up.Name
	return tr.rq.relay(ctx, c, tr.rq.st.ByName[up.Name], jsonrpc.RawParams(params), nil)
}

func (tr taskRequest) Lacks(msg *jsonrpc.Message) bool {
	_, _, lacks := tr.rq.h.bridge.Lacks(tr.rq.caller(), msg)
	return lacks
}

func (tr taskRequest) LimitHit(ctx context.Context, limit string) {
	tr.rq.h.LimitHit(ctx, tr.rq, limit, tr.c.method)
}
