package catalog

import (
	"context"
	"encoding/json"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/tenant"
)

// Resource URIs in what the gateway relays besides results (see uris.go):
// an upstream's notifications/resources/updated, and the requests an
// upstream sends its client.

// ExposeUpdated returns msg, a notifications/resources/updated of
// upstream up, with its uri in the gateway's namespace; or nil when the
// session it would go to may not hear of that resource: it holds no
// subscription the update belongs to (held, given the upstream's own
// URI), its tenant (view) may not see it, or its exposed URI does not
// resolve back to up's URI (an upstream naming a URI of another's
// namespace). The last two are the check a subscription makes
// ([Catalog.ResolveURI], among ups, the tenant's upstreams, with lk), so
// that what a session could not subscribe to, it never hears of.
func (c *Catalog) ExposeUpdated(ctx context.Context, msg *jsonrpc.Message, up *Upstream, view *tenant.View, held func(uri string) bool, ups []*Upstream, lk Lookup) []byte {
	p, err := jsonx.ParseValidObject(msg.Params)
	if err != nil {
		return nil
	}
	orig, ok := p.GetString("uri")
	if !ok || !held(orig) || !view.Decide(tenant.Resource, up.Name, orig).Allowed {
		return nil
	}
	exposed := ExposedURI(up.Prefix, orig)
	i, back, err := c.ResolveURI(ctx, Resources, exposed, ups, lk)
	if err != nil || ups[i].Name != up.Name || back != orig {
		return nil
	}
	p.SetString("uri", exposed)
	return jsonrpc.AppendRequest(nil, jsonrpc.ID{}, msg.Method, p.Bytes())
}

// ExposeUpstreamRequest returns params, those of a request method an
// upstream with prefix sends its client, with the resource URIs they hold
// exposed in the gateway's namespace: only sampling/createMessage's hold
// any (see [ExposeSamplingParams]).
func ExposeUpstreamRequest(method string, params json.RawMessage, prefix string) json.RawMessage {
	if method != protocol.MethodCreateMessage {
		return params
	}
	return ExposeSamplingParams(params, prefix)
}
