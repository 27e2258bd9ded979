package dispatch

import (
	"context"
	"encoding/json"

	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
)

// The 2026-07-28 revision, on the same endpoint.
//
// A request in that revision carries its protocol version in
// params._meta["io.modelcontextprotocol/protocolVersion"] and in the
// MCP-Protocol-Version header; there is no initialize and no session. The
// gateway validates the mirrored headers against the body (2026-07-28
// basic/transports/streamable-http, "Server Validation"), then serves the
// request with the same method handlers as a session's, against a record
// it keeps for the caller itself: keyed by (issuer, subject, tenant) and the
// client capabilities the request declared (see internal/announce), stored
// like a session (so every replica shares it, and it expires when idle),
// holding the upstream sessions opened for that principal with upstreams
// that speak the session-based revisions. It is never shared between
// principals and never accepted as an Mcp-Session-Id.

// StatelessPrefix marks the records the gateway keeps for stateless
// callers; no session id handed to a client starts with it.
const StatelessPrefix = "p-"

// PrincipalKey names the request's principal: issuer, subject and tenant.
func PrincipalKey(rq *Request) string {
	p := rq.principal
	return p.Issuer + "\x00" + p.Subject + "\x00" + p.Tenant
}

// PrincipalRecord returns the record the gateway keeps for a stateless
// caller, creating it on first use. Its id derives from the principal and
// from the capabilities the request declared, as far as the gateway
// announces them to upstreams (see internal/announce): the upstream sessions it
// holds were announced that set, and a request that declared another
// must not use them. Every replica finds the same one.
func (h *Server) PrincipalRecord(ctx context.Context, rq *Request) (*session.Record, error) {
	p := rq.principal
	return session.PrincipalRecord(ctx, h.store, StatelessPrefix, PrincipalKey(rq)+"\x00"+rq.announced().Key(),
		session.Principal{Issuer: p.Issuer, Subject: p.Subject, Tenant: p.Tenant}, protocol.LatestStateless.String())
}

// decorate adds what every 2026-07-28 result carries (see
// protocol.DecorateResult): the gateway's identity, and, for a method
// whose results are cacheable, how long: lists and reads are filtered per
// tenant, so they are private.
func (h *Server) decorate(rq *Request, m *Method, res json.RawMessage) json.RawMessage {
	info, _ := json.Marshal(map[string]string{"name": "mcp-gateway", "version": h.version})
	var c protocol.Caching
	if m.cache != cacheNone {
		c.Scope = protocol.CachePrivate
		if m.cache == cacheList {
			c.TTL = rq.st.Cfg.Server.ListCacheTTL.D()
		}
	}
	return protocol.DecorateResult(res, info, c)
}

// discover answers server/discover for the caller's tenant.
func discover(ctx context.Context, rq *Request, c *call) (json.RawMessage, error) {
	ups := rq.upstreams()
	caps := rq.capabilities(ups)
	delete(caps, "logging") // per-request _meta in this revision
	res := map[string]any{
		"supportedVersions": protocol.Versions,
		"capabilities":      caps,
	}
	// Those of the upstreams this replica has reached: a stateless caller
	// opens none of its upstream sessions to discover.
	if in := rq.instructions(ups); in != "" {
		res["instructions"] = in
	}
	return json.Marshal(res)
}
