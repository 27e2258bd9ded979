package dispatch

import (
	"context"
	"errors"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/rpcerr"
)

// Per-tenant presentation (tenants[].upstreams[].present): see
// catalog.Present. Everything behind the name the client uses (policy,
// budgets, audit, metrics) still has the original.

// present applies the tenant's presentation to its merged tools.
func (rq *Request) present(items []catalog.Item) []catalog.Item {
	return catalog.Present(rq.view, items, rq.h.log)
}

// resolveTool is resolve for a tool name as the tenant sees it: an alias
// resolves to its tool; a tool's exposed name, once the tenant has an
// alias for it, and any name an alias takes, are unknown. Hidden and
// unknown still look the same.
func (rq *Request) resolveTool(ctx context.Context, name string) (*upstreamRef, *catalog.Item, error) {
	if t, ok := rq.view.Alias(name); ok {
		ref := rq.st.ByName[t.Upstream]
		if ref == nil {
			return nil, nil, &catalog.ResolveError{Kind: catalog.Tools, Name: name}
		}
		up, it, err := rq.resolve(ctx, catalog.Tools, catalog.Tools.Expose(ref.Cat.Prefix, t.Original))
		var re *catalog.ResolveError
		switch {
		case errors.As(err, &re):
			// Reported under the name the client used.
			return nil, nil, &catalog.ResolveError{Kind: catalog.Tools, Name: name, Conflict: re.Conflict,
				DeniedBy: re.DeniedBy, DeniedName: re.DeniedName}
		case err != nil:
			return nil, nil, err
		case up != ref:
			return nil, nil, &catalog.ResolveError{Kind: catalog.Tools, Name: name}
		}
		return up, it, nil
	}
	up, it, err := rq.resolve(ctx, catalog.Tools, name)
	if err != nil {
		return nil, nil, err
	}
	if p, ok := rq.view.Presentation(up.Cfg.Name, it.Original); ok && p.Alias != "" {
		return nil, nil, &catalog.ResolveError{Kind: catalog.Tools, Name: name}
	}
	return up, it, nil
}

// fixArguments sets the arguments the admin fixed for the tenant's calls
// of the tool upstream up calls orig, on p (the call's params). A call
// that sets one itself gets a tool failure, returned; nil means go on.
func (rq *Request) fixArguments(up *upstreamRef, orig string, p *jsonx.Object, c *call) error {
	pr, ok := rq.view.Presentation(up.Cfg.Name, orig)
	if !ok || len(pr.FixedArguments) == 0 {
		return nil
	}
	args, failure := catalog.FixArguments(c.target, pr.FixedArguments, c.arguments)
	if failure != "" {
		return rpcerr.FailTool(failure)
	}
	c.arguments = args
	p.Set("arguments", c.arguments)
	return nil
}
