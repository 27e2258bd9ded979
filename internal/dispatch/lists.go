package dispatch

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/toolsearch"
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
			if items := rq.filterPolicy(ctx, c.method, k, e.items); len(items) != len(e.items) {
				if k == catalog.Tools {
					return rq.searchList(items), nil
				}
				return catalog.Encode(k, items), nil
			}
		}
		return e.body, nil
	}
}

// merged returns the list of kind k as the tenant sees it, from the
// snapshot's cache while the listings it was made from are current.
func (rq *Request) merged(ctx context.Context, k catalog.Kind) *mergedEntry {
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
	ls := make([]*catalog.Listing, len(ups))
	var wg sync.WaitGroup
	for i, up := range ups {
		if l := rq.h.catalog.Fresh(up, k, rq.listScope(up)); l != nil {
			ls[i] = l // the common case: no goroutine, no upstream
			continue
		}
		wg.Go(func() {
			l, err := rq.Listing(ctx, up, k)
			if err != nil {
				// One failing upstream never breaks the others.
				rq.h.log.Warn("listing failed", "upstream", up.Name, "rpc_method", info.ListMethod, "error", err)
				return
			}
			ls[i] = l
		})
	}
	wg.Wait()
	// The merged, filtered and encoded list depends only on the
	// config snapshot, the tenant, and the listings merged: reuse it
	// while none of them changed.
	key := mergedKey{tenant: rq.view.ID, kind: k}
	if v, ok := rq.st.merged.Load(key); ok {
		if e := v.(*mergedEntry); e.matches(ups, ls) {
			return e
		}
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
	e := &mergedEntry{ups: ups, ls: ls, body: body, items: items}
	rq.st.merged.Store(key, e)
	return e
}

// mergedKey names a merged list in a config snapshot.
type mergedKey struct {
	tenant string
	kind   catalog.Kind
}

// mergedEntry is a merged list and what it was made from. Its body is
// shared by every response that uses it and must not be modified.
type mergedEntry struct {
	ups  []*catalog.Upstream
	ls   []*catalog.Listing
	body []byte
	// items are the tenant's items, as it sees them (without the tool
	// search's own tools); index is their search index, made on the
	// first search.
	items     []catalog.Item
	indexOnce sync.Once
	index     *toolsearch.Index
}

func (e *mergedEntry) matches(ups []*catalog.Upstream, ls []*catalog.Listing) bool {
	return slices.Equal(e.ups, ups) && slices.Equal(e.ls, ls)
}
