package catalog

import (
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/tenant"
)

// Per-tenant presentation (tenants[].upstreams[].present): a tenant may be
// shown a tool under an alias, with another description, and without the
// arguments the admin fixes for it. Listings are shared between tenants,
// so it is applied to each tenant's merged list, never to a Listing.
// Everything behind the name the client uses (policy, budgets, audit,
// metrics) still has the original.

// Present applies tenant view v's presentation to its merged tools. An
// alias takes its name from any other item that has it: that item is left
// out, and logged on log (nil: not logged), so the list and calls agree
// (a call of the name resolves to the alias's tool). It returns items
// itself, changed in place, when no alias applies.
func Present(v *tenant.View, items []Item, log *slog.Logger) []Item {
	if !v.Presents() {
		return items
	}
	aliased := false
	for i := range items {
		it := &items[i]
		p, ok := v.Presentation(it.Upstream, it.Original)
		if !ok {
			continue
		}
		name := it.Exposed
		if p.Alias != "" {
			name, aliased = p.Alias, true
		}
		it.Raw = PresentTool(it.Raw, name, p.Description, slices.Sorted(maps.Keys(p.FixedArguments)))
		it.Exposed = name
	}
	if !aliased {
		return items
	}
	kept := items[:0]
	for _, it := range items {
		if t, ok := v.Alias(it.Exposed); ok && (t.Upstream != it.Upstream || t.Original != it.Original) {
			if log != nil {
				log.Warn("tool hidden by a tenant's alias of the same name", "tenant", v.ID, "upstream", it.Upstream,
					"tool", strconv.QuoteToASCII(it.Original), "alias", it.Exposed)
			}
			continue
		}
		kept = append(kept, it)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].Exposed < kept[j].Exposed })
	return kept
}

// FixArguments returns args, the arguments of a tools/call of the tool the
// client names target (nil or null: none), with the arguments the admin
// fixed set on them. A call whose arguments are not an object, or that
// sets a fixed one itself, gets instead the text of the tool error a
// model can act on.
func FixArguments(target string, fixed map[string]string, args json.RawMessage) (json.RawMessage, string) {
	o := &jsonx.Object{}
	if len(args) > 0 && string(args) != "null" {
		var err error
		if o, err = jsonx.ParseValidObject(args); err != nil {
			return nil, "Invalid arguments for tool " + strconv.Quote(target) + ": arguments must be an object"
		}
	}
	for _, name := range slices.Sorted(maps.Keys(fixed)) {
		if o.Get(name) != nil || o.HasCaseVariant(name) {
			return nil, "Invalid arguments for tool " + strconv.Quote(target) + ": argument " + strconv.Quote(name) + " is set by the gateway and must not be given"
		}
		o.SetString(name, fixed[name])
	}
	return o.Bytes(), ""
}
