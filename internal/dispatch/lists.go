package dispatch

import (
	"context"
	"encoding/json"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
)

// The list methods: a tenant's merged listing of every upstream it uses,
// kept while the listings it was made from are (merged), served on one
// page.

// listMethod serves one of the four list methods from the catalog.
func listMethod(k catalog.Kind) methodFunc {
	return func(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
		if len(c.params) > 0 {
			p, err := jsonx.ParseValidObject(c.params)
			if err != nil {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: must be an object")
			}
			// The gateway returns each list whole, on one page, so no cursor
			// of ours exists to be passed back.
			if cur, ok := p.GetString("cursor"); ok && cur != "" {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: invalid cursor")
			}
		}
		e := rq.merged(ctx, k)
		if rq.hasPolicy() {
			// The principal's rules, on the tenant's list.
			if items := rq.filterPolicy(ctx, c.method, k, e.Items); len(items) != len(e.Items) {
				if k == catalog.Tools {
					return rq.searchList(items), nil
				}
				return catalog.Encode(k, items), nil
			}
		}
		return e.Body, nil
	}
}

// merged returns the list of kind k as the tenant sees it, from the
// snapshot's cache while the listings it was made from are current.
func (rq *Request) merged(ctx context.Context, k catalog.Kind) *catalog.Merged {
	info := k.Info()
	tu := rq.tenantUpstreams()
	var ups []*catalog.Upstream
	for i, up := range tu.refs {
		// An upstream whose circuit is open is left out: its items
		// could not be used.
		if rq.hasCap(up, info.Capability) && !up.Breaker.Open() {
			ups = append(ups, tu.cats[i])
		}
	}
	ls := rq.h.catalog.Listings(ctx, k, ups, rq.listScope, rq)
	// The merged, filtered and encoded list depends only on the
	// config snapshot, the tenant, and the listings merged: reuse it
	// while none of them changed.
	if e := rq.st.merged.Get(rq.view.ID, k, ups, ls); e != nil {
		return e
	}
	items := rq.st.Guards.Definitions(ctx, rq.view.ID, k, rq.h.catalog.Merge(k, ups, ls, rq))
	var body []byte
	if k == catalog.Tools {
		for i := range items {
			if a, ok := rq.view.Annotations(items[i].Upstream, items[i].Original); ok {
				items[i].Raw = catalog.AssertAnnotations(items[i].Raw, a)
			}
		}
		items = rq.present(items)
		body = rq.searchList(items)
	} else {
		body = catalog.Encode(k, items)
	}
	return rq.st.merged.Put(rq.view.ID, k, ups, ls, body, items)
}
