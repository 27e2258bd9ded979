package dispatch

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonx"
)

// Per-tenant presentation (tenants[].upstreams[].present): a tenant may be
// shown a tool under an alias, with another description, and without the
// arguments the admin fixes for it. Listings are shared between tenants,
// so it is applied to each tenant's merged list (cached per tenant in
// State.merged), never to a Listing. Everything behind the name the
// client uses (policy, budgets, audit, metrics) still has the original.

// present applies the tenant's presentation to its merged tools. An alias
// takes its name from any other item that has it: that item is left out,
// and logged, so the list and calls agree (see resolveTool).
func (rq *Request) present(items []catalog.Item) []catalog.Item {
	if !rq.view.Presents() {
		return items
	}
	aliased := false
	for i := range items {
		it := &items[i]
		p, ok := rq.view.Presentation(it.Upstream, it.Original)
		if !ok {
			continue
		}
		name := it.Exposed
		if p.Alias != "" {
			name, aliased = p.Alias, true
		}
		it.Raw = catalog.PresentTool(it.Raw, name, p.Description, slices.Sorted(maps.Keys(p.FixedArguments)))
		it.Exposed = name
	}
	if !aliased {
		return items
	}
	kept := items[:0]
	for _, it := range items {
		if t, ok := rq.view.Alias(it.Exposed); ok && (t.Upstream != it.Upstream || t.Original != it.Original) {
			rq.h.log.Warn("tool hidden by a tenant's alias of the same name", "tenant", rq.view.ID, "upstream", it.Upstream,
				"tool", strconv.QuoteToASCII(it.Original), "alias", it.Exposed)
			continue
		}
		kept = append(kept, it)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].Exposed < kept[j].Exposed })
	return kept
}

// resolveTool is resolve for a tool name as the tenant sees it: an alias
// resolves to its tool; a tool's exposed name, once the tenant has an
// alias for it, and any name an alias takes, are unknown. Hidden and
// unknown still look the same.
func (rq *Request) resolveTool(ctx context.Context, name string) (*upstreamRef, *catalog.Item, error) {
	if t, ok := rq.view.Alias(name); ok {
		ref := rq.st.byName[t.Upstream]
		if ref == nil {
			return nil, nil, &catalog.ResolveError{Kind: catalog.Tools, Name: name}
		}
		up, it, err := rq.resolve(ctx, catalog.Tools, catalog.Tools.Expose(ref.cat.Prefix, t.Original))
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
	if p, ok := rq.view.Presentation(up.cfg.Name, it.Original); ok && p.Alias != "" {
		return nil, nil, &catalog.ResolveError{Kind: catalog.Tools, Name: name}
	}
	return up, it, nil
}

// fixArguments sets the arguments the admin fixed for the tenant's calls
// of the tool upstream up calls orig, on p (the call's params). A call
// that sets one itself gets a tool failure, returned; nil means go on.
func (rq *Request) fixArguments(up *upstreamRef, orig string, p *jsonx.Object, c *call) error {
	pr, ok := rq.view.Presentation(up.cfg.Name, orig)
	if !ok || len(pr.FixedArguments) == 0 {
		return nil
	}
	args := &jsonx.Object{}
	if a := c.arguments; len(a) > 0 && string(a) != "null" {
		var err error
		if args, err = jsonx.ParseValidObject(a); err != nil {
			return failTool("Invalid arguments for tool " + strconv.Quote(c.target) + ": arguments must be an object")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pr.FixedArguments)) {
		if args.Get(name) != nil || args.HasCaseVariant(name) {
			return failTool("Invalid arguments for tool " + strconv.Quote(c.target) + ": argument " + strconv.Quote(name) + " is set by the gateway and must not be given")
		}
		args.SetString(name, pr.FixedArguments[name])
	}
	c.arguments = args.Bytes()
	p.Set("arguments", c.arguments)
	return nil
}
