package dispatch

import (
	"context"
	"encoding/json"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/guard"
)

// Content guards (internal/guard, docs/guards.md): the engine compiled
// with each generation inspects a call's arguments (after policy, before
// validation and the upstream), its result (before the client gets it),
// and each definition of a tenant's lists. A tenant and upstream without
// guards cost one map lookup per call.

// guardArguments inspects a tools/call's arguments, after fixed ones are
// set: it returns the arguments to send (redacted, or as they were) or
// the block.
func (rq *Request) guardArguments(ctx context.Context, c *call, up *upstreamRef, orig string, args json.RawMessage) (json.RawMessage, error) {
	return rq.st.Guards.Inspect(ctx, guard.Arguments, guard.Input{
		Tenant: rq.view.ID, Subject: rq.principal.Subject, Upstream: up.Cfg.Name, Tool: orig, Method: c.method,
	}, args)
}

// guardResult inspects the result of a call of kind k (a tool's result,
// a prompt's messages, a resource's contents) before the client gets it.
func (rq *Request) guardResult(ctx context.Context, c *call, k catalog.Kind, up *upstreamRef, orig string, res json.RawMessage) (json.RawMessage, error) {
	tool, item := "", orig
	if k == catalog.Tools {
		tool, item = orig, ""
	}
	return rq.st.Guards.Inspect(ctx, guard.Results, guard.Input{
		Tenant: rq.view.ID, Subject: rq.principal.Subject, Upstream: up.Cfg.Name, Tool: tool, Item: item, Method: c.method,
	}, res)
}
