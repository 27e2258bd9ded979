package upcall

import (
	"encoding/json"
	"strings"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Params shapes a client's params for the revision upstream session us
// speaks. The protocol's _meta keys describe a hop: a 2025-11-25 upstream
// gets none of them (one that knows 2026-07-28 would take them for a
// request of that revision); a 2026-07-28 upstream gets the client's own
// when the client speaks that revision too (stateless), else the gateway
// fills them in from the client's session, clientInfo and caps
// (2026-07-28 basic/versioning: every request carries its version, client
// info and capabilities).
func Params(us session.Upstream, params json.RawMessage, stateless bool, clientInfo, caps json.RawMessage) json.RawMessage {
	if !upstream.IsModern(us) {
		if stateless {
			return stripProtocolMeta(params)
		}
		return params
	}
	if stateless {
		return params
	}
	return upstream.WithModernMeta(params, clientInfo, caps)
}

// ShapeParams is Params for params that may be an object (see
// jsonrpc.Params): byte for byte what Params makes of their encoding. An
// object stays an object, not encoded here, so that it is encoded once,
// into the request's body: as it is when Params passes it as it is, a
// copy with its _meta filled in for a 2026-07-28 upstream. It is encoded
// first only when a 2025-11-25 upstream is to hear none of the protocol's
// _meta keys and it has some.
func ShapeParams(us session.Upstream, params jsonrpc.Params, stateless bool, clientInfo, caps json.RawMessage) jsonrpc.Params {
	o, ok := params.Object()
	if !ok {
		return jsonrpc.RawParams(Params(us, params.Bytes(), stateless, clientInfo, caps))
	}
	switch modern := upstream.IsModern(us); {
	case modern && !stateless:
		return jsonrpc.ObjectParams(upstream.WithModernMetaObject(o, clientInfo, caps))
	case !modern && stateless && o.Mentions(protocol.MetaPrefix):
		return jsonrpc.RawParams(Params(us, o.Bytes(), stateless, clientInfo, caps))
	}
	// As is: Params returns these params unchanged, and
	// stripProtocolMeta leaves them when their encoding does not contain
	// the prefix.
	return params
}

// stripProtocolMeta removes the protocol's own _meta keys from params: they
// describe the client's hop to the gateway, not the gateway's hop to an
// upstream, which speaks its own revision (a 2025-11-25 upstream that knows
// 2026-07-28 would take them for a request of that revision). Every other
// byte of params and _meta stays.
func stripProtocolMeta(params json.RawMessage) json.RawMessage {
	if len(params) == 0 || !strings.Contains(string(params), protocol.MetaPrefix) {
		return params
	}
	p, err := jsonx.ParseValidObject(params)
	if err != nil {
		return params
	}
	meta, ok := p.Object("_meta")
	if !ok {
		return params
	}
	kept := meta.Members[:0]
	for _, m := range meta.Members {
		if !strings.HasPrefix(m.Name, protocol.MetaPrefix) {
			kept = append(kept, m)
		}
	}
	meta.Members = kept
	if len(kept) == 0 {
		p.Delete("_meta")
	} else {
		p.Set("_meta", meta.Bytes())
	}
	return p.Bytes()
}
