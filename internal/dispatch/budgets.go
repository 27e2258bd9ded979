package dispatch

import (
	"context"

	"github.com/mcpgw/gateway/internal/budget"
	"github.com/mcpgw/gateway/internal/observe"
	"github.com/mcpgw/gateway/internal/relay"
)

// Budgets on work (see package budget): rate limits and quotas are checked
// once per request, at the edge (the rules that name no upstream or tool,
// before the body is read: see Admit) or once the request is routed (in
// relay); an upstream's concurrency gate and circuit breaker are passed
// by every request sent to it (in callWith). A refusal is a tools/call
// result with isError, or a JSON-RPC error with the budget in its data, or
// at the edge an HTTP 429; each is counted and audited.

// plan returns the tenant's budgets.
func (rq *Request) plan() *budget.Plan { return rq.st.Plans.Tenant(rq.view.ID) }

func (rq *Request) budgetWho() budget.Who {
	return budget.Who{Tenant: rq.principal.Tenant, Issuer: rq.principal.Issuer, Subject: rq.principal.Subject}
}

// Admit checks the budgets that count every HTTP request of the caller's
// tenant. A refusal is recorded; the transport answers it with 429.
func (h *Server) Admit(ctx context.Context, rq *Request) *budget.Refusal {
	ref := h.budgets.Edge(ctx, rq.plan(), rq.budgetWho())
	if ref != nil {
		h.obs.BudgetRefused(ctx, rq.asker(), "", ref)
	}
	return ref
}

// spend checks the rate limits and quotas of a request routed to up.
func (rq *Request) spend(ctx context.Context, c *call, up *upstreamRef) error {
	tool := ""
	if c.m.target == observe.TargetTool {
		tool = c.original
	}
	if ref := rq.h.budgets.Call(ctx, rq.plan(), rq.budgetWho(), up.Cfg.Name, tool); ref != nil {
		return ref
	}
	return nil
}

// guard passes a request to up through its circuit breaker and
// concurrency gate (see budget.Pass). It returns what to call when the
// request ends, with its error.
func (rq *Request) guard(ctx context.Context, up *upstreamRef) (func(error), error) {
	done, err := budget.Pass(ctx, up.Gate, up.Breaker, rq.view.ID, PrincipalKey(rq))
	if err != nil {
		return nil, err
	}
	return func(err error) { done(relay.BreakerOutcome(err)) }, nil
}
