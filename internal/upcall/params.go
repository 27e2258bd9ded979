package upcall

import (
	"encoding/json"
	"strings"

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
