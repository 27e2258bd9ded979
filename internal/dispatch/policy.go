package dispatch

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/policy"
)

// Policy rules beyond the tenant's (internal/policy, docs/policy.md): the
// engine compiled with each generation decides, for the principal, what
// the tenant's rules let it see (lists, filtered after the tenant's merged
// list) and each call (tools/call, prompts/get, resources/read, and the
// requests that name an item: completion/complete, resources/subscribe).
// A tool hidden by a list-phase rule is unknown at call time too, and a
// call refused by a call-phase rule is a tool result the model can act on
// (unless the rule says otherwise). Tenants and upstreams without rules
// cost one map lookup per request.

// policyPrincipal is the caller, to the rules.
func (rq *Request) policyPrincipal() *policy.Principal {
	p := rq.principal
	return &policy.Principal{Subject: p.Subject, Tenant: p.Tenant, ClientID: p.ClientID, Scopes: p.Scopes, Claims: p.Claims}
}

// hasPolicy reports whether rules apply to any of the tenant's upstreams.
func (rq *Request) hasPolicy() bool { return rq.st.Policy.HasRulesAny(rq.view.ID, rq.view.Upstreams) }

// filterPolicy returns items, the tenant's merged list of kind k, without
// what the principal's list-phase rules hide (see policy.Engine.Filter).
func (rq *Request) filterPolicy(ctx context.Context, method string, k catalog.Kind, items []catalog.Item) []catalog.Item {
	return rq.st.Policy.Filter(ctx, rq.view.ID, rq.policyPrincipal(), method, k, items, func(d *policy.Decision) {
		rq.h.obs.PolicyDecided(rq.view.ID, d)
	})
}

// decidePolicy asks the rules about a request of kind k naming the item
// upstream up calls orig, which the tenant sees as name; args are a
// call's arguments (after fixed ones are set), nil for a request that
// has none. phase is PhaseList for a request that only needs to know the
// item is visible (completion/complete, resources/subscribe). nil means
// go on. listed says the list phase was asked already (and allowed).
func (rq *Request) decidePolicy(ctx context.Context, c *call, phase policy.Phase, k catalog.Kind, up *upstreamRef, name, orig string, args json.RawMessage, listed bool) error {
	e := rq.st.Policy
	if e == nil || !e.HasRules(rq.view.ID, up.Cfg.Name) {
		return nil
	}
	start := time.Now()
	d := e.Decide(ctx, &policy.Input{Principal: rq.policyPrincipal(), Phase: phase, Method: c.method, Kind: k.Policy(),
		Upstream: up.Cfg.Name, Name: name, Original: orig, Arguments: args, ListDecided: listed})
	rq.h.obs.PolicyDecided(rq.view.ID, &d)
	if d.Err != nil {
		rq.h.log.DebugContext(ctx, "policy rule failed", "tenant", rq.view.ID, "rule", d.Rule(), "error", d.Err, "took", time.Since(start))
	}
	if d.Allow {
		return nil
	}
	return policy.Refuse(d, phase, k, name)
}
