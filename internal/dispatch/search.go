package dispatch

import (
	"context"
	"encoding/json"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/rpcerr"
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
	sc, failure := toolsearch.ParseCall(ts, name, p)
	if sc != nil && sc.Search {
		c.original = name // for the audit log: no upstream's tool
	}
	if failure != "" {
		return nil, true, rpcerr.FailTool(failure)
	}
	if sc.Search {
		e := rq.merged(ctx, catalog.Tools)
		index := e.Index(func(items []catalog.Item) any { return toolsearch.NewIndex(items) }).(*toolsearch.Index)
		found := index.Search(sc.Query, sc.Limit)
		if rq.hasPolicy() {
			found = rq.filterPolicy(ctx, protocol.MethodToolsList, catalog.Tools, found)
		}
		return toolsearch.Result(found), true, nil
	}
	c.params = sc.Params
	res, err = callTool(ctx, rq, c)
	return res, true, err
}
