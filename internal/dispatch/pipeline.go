package dispatch

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcpgw/gateway/internal/budget"
	"github.com/mcpgw/gateway/internal/guard"
	"github.com/mcpgw/gateway/internal/observe"
	"github.com/mcpgw/gateway/internal/policy"
	"github.com/mcpgw/gateway/internal/rpcerr"
)

// The request pipeline. A method's handler (its entry's serve) answers the
// method and nothing else; the steps every request takes around it are
// wrappers, each returning what the handler inside returned or an answer
// of its own:
//
//		answered(observed(consented(serve)))
//
//	  - consented turns a per-user credential's demand for consent into
//	    the answer the caller can act on (see consentAnswer);
//	  - observed records the request (see package observe): its span, the
//	    request and tool-call metrics, a budget's refusal, policy denials
//	    and the audit record;
//	  - answered turns a tools/call's tool failure, or a budget's refusal
//	    of it, into the result with isError: true a model can act on.
//
// Each method's chain is built once, with the table (Method.handle).
func pipeline(serve methodFunc) methodFunc { return answered(observed(consented(serve))) }

func consented(next methodFunc) methodFunc {
	return func(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
		res, err := next(ctx, rq, c)
		if r, e, ok := rq.h.consentAnswer(ctx, rq, c, err); ok {
			return r, e
		}
		return res, err
	}
}

func observed(next methodFunc) methodFunc {
	return func(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
		ctx, o := rq.h.obs.Start(ctx, rq.observing(c))
		defer o.End()
		res, err := next(ctx, rq, c)
		o.Record(ctx, observe.Route{Upstream: c.upstream, Exposed: c.target, Original: c.original, Arguments: c.arguments}, res, err)
		return res, err
	}
}

func answered(next methodFunc) methodFunc {
	return func(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
		res, err := next(ctx, rq, c)
		if err == nil {
			return res, nil
		}
		if f := (*rpcerr.ToolFailure)(nil); errors.As(err, &f) {
			return rpcerr.ToolError(f.Text), nil
		}
		if gb := (*guard.BlockError)(nil); c.m.target == observe.TargetTool && errors.As(err, &gb) {
			return rpcerr.ToolError(gb.Error()), nil
		}
		if pr := (*policy.Refusal)(nil); c.m.target == observe.TargetTool && errors.As(err, &pr) && pr.Unknown == nil && pr.Decision.AsResult {
			return rpcerr.ToolError(pr.Message()), nil
		}
		if ref := (*budget.Refusal)(nil); c.m.target == observe.TargetTool && errors.As(err, &ref) {
			// A model can act on it (2025-11-25 server/tools, "Error
			// Handling"): wait, or do without.
			return ref.ToolResult(), nil
		}
		return res, err
	}
}

// observing is c as the recorder sees it when it starts (see observed).
func (rq *Request) observing(c *call) observe.Call {
	return observe.Call{
		Caller: rq.asker(), Method: c.method, ID: c.id, Params: c.params,
		Target: c.m.target, Audited: c.m.audited, Upstream: rq.auditUpstream,
	}
}

// asker is who asks, for the recorder.
func (rq *Request) asker() observe.Caller {
	who := observe.Caller{
		Tenant: rq.principal.Tenant, Subject: rq.principal.Subject, ClientID: rq.principal.ClientID,
		ProtocolVersion: rq.adm.Version,
	}
	if rq.Session != nil {
		who.SessionID = rq.Session.ID
	}
	return who
}

// auditUpstream is what the audit record of a request routed to the
// upstream name says of it.
func (rq *Request) auditUpstream(name string) (observe.Upstream, bool) {
	up := rq.st.ByName[name]
	if up == nil {
		return observe.Upstream{}, false
	}
	return observe.Upstream{AuditArguments: up.Cfg.AuditArguments, Credentials: rq.mode(up)}, true
}
