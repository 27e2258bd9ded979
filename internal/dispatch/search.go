package dispatch

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/toolsearch"
)

// Tool search (tenants[].tool_search, see internal/toolsearch): the
// tenant's tools list holds the gateway's two tools; a search ranks the
// tenant's merged list, whose index is made on the first search and kept
// with it, and a call of a found tool is served as a tools/call, under
// every rule a direct call is (policy, scopes, fixed arguments,
// validation, pins, budgets, audit).

// searchList encodes the tenant's tools list: its items, or with tool
// search, the gateway's two tools in their place or beside them.
func (rq *Request) searchList(items []catalog.Item) []byte {
	return toolsearch.List(rq.view.Search, items)
}

// searchCall serves a tools/call of one of the gateway's own tools; ok is
// false for any other name (or without tool search).
func (rq *Request) searchCall(ctx context.Context, c *call, name string, p *jsonx.Object) (res json.RawMessage, ok bool, err error) {
	ts := rq.view.Search
	if ts == nil || !toolsearch.IsOwn(name) {
		return nil, false, nil
	}
	c.target = name
	var args *jsonx.Object
	if a := p.Get("arguments"); len(a) > 0 && string(a) != "null" {
		if args, err = jsonx.ParseValidObject(a); err != nil {
			return nil, true, failTool("Invalid arguments for tool " + strconv.Quote(name) + ": arguments must be an object")
		}
	} else {
		args = &jsonx.Object{}
	}
	if name == toolsearch.SearchTool {
		c.original = name // for the audit log: no upstream's tool
		q, _ := args.GetString("query")
		if q == "" || len(q) > toolsearch.MaxQueryBytes {
			return nil, true, failTool("Invalid arguments for tool " + strconv.Quote(name) + ": query must be a string of 1 to " + strconv.Itoa(toolsearch.MaxQueryBytes) + " bytes")
		}
		limit := ts.MaxResults
		if l := args.Get("limit"); l != nil {
			if n, err := strconv.Atoi(string(l)); err == nil && n >= 1 && n <= limit {
				limit = n
			}
		}
		e := rq.merged(ctx, catalog.Tools)
		e.indexOnce.Do(func() { e.index = toolsearch.NewIndex(e.items) })
		found := e.index.Search(q, limit)
		if rq.hasPolicy() {
			found = rq.filterPolicy(ctx, protocol.MethodToolsList, catalog.Tools, found)
		}
		return toolsearch.Result(found), true, nil
	}
	target, _ := args.GetString("name")
	if target == "" || toolsearch.IsOwn(target) {
		return nil, true, failTool("Invalid arguments for tool " + strconv.Quote(name) + ": name must name one of your tools")
	}
	// A tools/call of target, with the caller's _meta: served as if the
	// client had sent it, under every rule.
	inner := &jsonx.Object{}
	inner.SetString("name", target)
	if a := args.Get("arguments"); a != nil {
		inner.Set("arguments", a)
	}
	if m := p.Get("_meta"); m != nil {
		inner.Set("_meta", m)
	}
	c.params = inner.Bytes()
	res, err = callTool(ctx, rq, c)
	return res, true, err
}
