package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
)

// The 2026-07-28 revision, on the same endpoint.
//
// A request in that revision carries its protocol version in
// params._meta["io.modelcontextprotocol/protocolVersion"] and in the
// MCP-Protocol-Version header; there is no initialize and no session. The
// gateway validates the mirrored headers against the body (2026-07-28
// basic/transports/streamable-http, "Server Validation"), then serves the
// request with the same method handlers as a session's, against a record
// it keeps for the caller itself: keyed by (issuer, subject, tenant), stored
// like a session (so every replica shares it, and it expires when idle),
// holding the upstream sessions opened for that principal with upstreams
// that speak the session-based revisions. It is never shared between
// principals and never accepted as an Mcp-Session-Id.

// statelessPrefix marks the records the gateway keeps for stateless
// callers; no session id handed to a client starts with it.
const statelessPrefix = "p-"

// metaOf returns params._meta as an object, or nil.
func metaOf(params json.RawMessage) *jsonx.Object {
	if len(params) == 0 {
		return nil
	}
	p, err := jsonx.ParseValidObject(params)
	if err != nil {
		return nil
	}
	raw := p.Get("_meta")
	if raw == nil {
		return nil
	}
	m, err := jsonx.ParseValidObject(raw)
	if err != nil {
		return nil
	}
	return m
}

// isStateless reports whether a message belongs to the stateless revision:
// its header or its _meta names a version that has no initialize. It
// returns the message's _meta (nil if none), parsed once for the request.
func isStateless(r *http.Request, msg *jsonrpc.Message) (*jsonx.Object, bool) {
	meta := metaOf(msg.Params)
	if v := r.Header.Get(protocol.HeaderProtocolVersion); v != "" && statelessVersion(v) {
		return meta, true
	}
	if msg.Kind == jsonrpc.KindRequest && msg.Method == "initialize" {
		return nil, false
	}
	if meta == nil {
		return nil, false
	}
	v, ok := meta.GetString(protocol.MetaProtocolVersion)
	return meta, ok && statelessVersion(v)
}

// statelessVersion reports whether a version a client sent is served by the
// stateless revision's rules: a date of 2026-07-28 or later (an unknown
// later one is answered UnsupportedProtocolVersion, with the versions to
// pick from). A string that is not a date names no revision; it goes by its
// bytes against "2026-07-28", where a client comparing version strings
// places it: a draft's "DRAFT-2026-v1" after, so that it too is told the
// versions to pick from, "1.0" before, to the session-based transport's 400.
func statelessVersion(s string) bool {
	if v, ok := protocol.ParseVersion(s); ok {
		return v.Stateless()
	}
	return s >= protocol.V2026_07_28.String()
}

// writeRPCError answers with a JSON-RPC error carrying data.
func writeRPCError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, msg string, data any) {
	e := &jsonrpc.Error{Code: code, Message: msg}
	if data != nil {
		e.Data, _ = json.Marshal(data)
	}
	writeJSON(w, status, jsonrpc.AppendError(nil, id, e))
}

// serveStateless serves one message of the stateless revision.
func (h *Handler) serveStateless(w http.ResponseWriter, r *http.Request, rq *request, msg *jsonrpc.Message, meta *jsonx.Object) {
	if msg.Kind != jsonrpc.KindRequest {
		// Cancellation of a stateless request is the client closing its
		// stream (2026-07-28 basic/patterns/cancellation); there are no
		// server-to-client requests to answer.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	mismatch := func(format string, args ...any) {
		writeRPCError(w, http.StatusBadRequest, msg.ID, protocol.CodeHeaderMismatch, "Header mismatch: "+fmt.Sprintf(format, args...), nil)
	}
	header := r.Header.Get(protocol.HeaderProtocolVersion)
	var body string
	var hasBody bool
	if meta != nil {
		body, hasBody = meta.GetString(protocol.MetaProtocolVersion)
	}
	switch {
	case header == "":
		mismatch("required header MCP-Protocol-Version is missing")
		return
	case !hasBody:
		mismatch("params._meta[%q] is missing", protocol.MetaProtocolVersion)
		return
	case header != body:
		mismatch("MCP-Protocol-Version header value %q does not match body value %q", header, body)
		return
	}
	if !protocol.Listed(body, protocol.StatelessVersions) {
		writeRPCError(w, http.StatusBadRequest, msg.ID, protocol.CodeUnsupportedProtocolVersion, "Unsupported protocol version",
			map[string]any{"supported": protocol.Versions, "requested": body})
		return
	}
	if m := r.Header.Get(protocol.HeaderMethod); m == "" {
		mismatch("required header Mcp-Method is missing")
		return
	} else if m != msg.Method {
		mismatch("Mcp-Method header value %q does not match body value %q", m, msg.Method)
		return
	}
	m := lookupMethod(msg.Method, true)
	if m == nil {
		// 2026-07-28 basic/transports/streamable-http, "Protocol Version
		// Header": an unknown method is a 404 with -32601.
		writeRPCError(w, http.StatusNotFound, msg.ID, jsonrpc.CodeMethodNotFound, "Method not found: "+msg.Method, nil)
		return
	}
	if key := protocol.NameKey(msg.Method); key != "" {
		var bodyName string
		if p, err := jsonx.ParseValidObject(msg.Params); err == nil {
			bodyName, _ = p.GetString(key)
		}
		hv, ok := r.Header[protocol.HeaderName]
		if !ok || len(hv) != 1 {
			mismatch("required header Mcp-Name is missing")
			return
		}
		name, err := protocol.DecodeHeaderValue(hv[0])
		if err != nil {
			mismatch("Mcp-Name header value is not valid: %v", err)
			return
		}
		if name != bodyName {
			mismatch("Mcp-Name header value %q does not match body value %q", name, bodyName)
			return
		}
	}

	rq.version = body
	rq.stateless = true
	rq.header = r.Header
	if meta != nil {
		rq.metaCaps = meta.Get(protocol.MetaClientCapabilities)
		// The same bound as an initialize's capabilities: they are parsed,
		// and their parse cached (see capSet), for each input request.
		if max := rq.st.cfg.Limits.ClientCapabilitiesBytes; len(rq.metaCaps) > max {
			h.limitHit(r.Context(), rq, telemetry.LimitClientCapabilities, msg.Method)
			writeRPCError(w, http.StatusOK, msg.ID, jsonrpc.CodeInvalidParams,
				fmt.Sprintf("Invalid params: _meta[%q] exceeds limits.client_capabilities_bytes (%d bytes)", protocol.MetaClientCapabilities, max), nil)
			return
		}
	}
	if msg.Method != "server/discover" {
		rec, err := h.principalRecord(r.Context(), rq)
		if err != nil {
			// Its Create is a session's: the same caps, the same answers.
			h.refuseCreate(w, r, rq, msg.ID, msg.Method, err)
			return
		}
		rq.sess = rec
	} else {
		rq.sess = &session.Record{ID: "discover"}
	}
	if meta != nil && meta.Get(protocol.MetaLogLevel) != nil {
		rq.wantsLogs = true
	}
	if m.serve == nil {
		h.serveListen(w, r, rq, msg) // subscriptions/listen, the one stream
		return
	}
	out := newResponder(w)
	out.onSSE = h.metrics.SSEStreamOpened
	out.deferHeaders()
	defer out.finish()
	defer func() {
		if out.sse {
			h.metrics.SSEStreamClosed()
		}
	}()
	final := h.dispatchWith(r.Context(), rq, msg, out, m)
	if final != nil {
		out.final(http.StatusOK, final)
	}
}

// principalKey names the request's principal: issuer, subject and tenant.
func principalKey(rq *request) string {
	p := rq.principal
	return p.Issuer + "\x00" + p.Subject + "\x00" + p.Tenant
}

// principalRecord returns the record the gateway keeps for a stateless
// caller, creating it on first use. Its id derives from the principal, so
// every replica finds the same one.
func (h *Handler) principalRecord(ctx context.Context, rq *request) (*session.Record, error) {
	p := rq.principal
	sum := sha256.Sum256([]byte(principalKey(rq)))
	id := statelessPrefix + hex.EncodeToString(sum[:16])
	rec, err := h.store.Get(ctx, id)
	if err == nil {
		if !boundTo(rec, p) {
			return nil, errors.New("stateless record bound to another principal")
		}
		return rec, nil
	}
	if !errors.Is(err, session.ErrNotFound) {
		return nil, err
	}
	now := time.Now()
	rec = &session.Record{
		ID: id, ProtocolVersion: protocol.LatestStateless.String(), Created: now, LastSeen: now,
		Principal: session.Principal{Issuer: p.Issuer, Subject: p.Subject, Tenant: p.Tenant},
	}
	switch err := h.store.Create(ctx, rec); {
	case err == nil:
		return rec, nil
	case errors.Is(err, session.ErrExists):
		return h.store.Get(ctx, id) // another replica, or request, made it
	default:
		return nil, err
	}
}

// decorate adds what every 2026-07-28 result carries: resultType, the
// gateway's identity in _meta, and, for cacheable results, ttlMs and
// cacheScope. Lists and reads are filtered per tenant, so they are private.
func (h *Handler) decorate(rq *request, m *method, res json.RawMessage) json.RawMessage {
	o, err := jsonx.ParseValidObject(res)
	if err != nil {
		return res
	}
	if o.Get("resultType") == nil {
		o.Set("resultType", json.RawMessage(`"complete"`))
	}
	meta := &jsonx.Object{}
	if raw := o.Get("_meta"); raw != nil {
		if m, err := jsonx.ParseValidObject(raw); err == nil {
			meta = m
		}
	}
	info, _ := json.Marshal(map[string]string{"name": "mcp-gateway", "version": h.version})
	meta.Set(protocol.MetaServerInfo, info)
	o.Set("_meta", meta.Bytes())
	if m.cache != cacheNone {
		var ttl int64
		if m.cache == cacheList {
			ttl = rq.st.cfg.Server.ListCacheTTL.D().Milliseconds()
		}
		o.Set("ttlMs", []byte(strconv.FormatInt(ttl, 10)))
		o.Set("cacheScope", json.RawMessage(`"private"`))
	}
	return o.Bytes()
}

// discover answers server/discover for the caller's tenant.
func discover(ctx context.Context, rq *request, c *call) (json.RawMessage, error) {
	caps := rq.capabilities(rq.upstreams())
	delete(caps, "logging") // per-request _meta in this revision
	return json.Marshal(map[string]any{
		"supportedVersions": protocol.Versions,
		"capabilities":      caps,
	})
}

// serveListen serves subscriptions/listen: a long-lived response stream of
// the change notifications the client opted in to, for its tenant's view.
func (h *Handler) serveListen(w http.ResponseWriter, r *http.Request, rq *request, msg *jsonrpc.Message) {
	var params struct {
		Notifications struct {
			ToolsListChanged      bool     `json:"toolsListChanged"`
			PromptsListChanged    bool     `json:"promptsListChanged"`
			ResourcesListChanged  bool     `json:"resourcesListChanged"`
			ResourceSubscriptions []string `json:"resourceSubscriptions"`
		} `json:"notifications"`
	}
	if len(msg.Params) > 0 && json.Unmarshal(msg.Params, &params) != nil {
		writeRPCError(w, http.StatusOK, msg.ID, jsonrpc.CodeInvalidParams, "Invalid params", nil)
		return
	}
	n := params.Notifications
	// Resource update subscriptions are not relayed: they are left out of
	// the acknowledgment, as the revision says for unsupported types.
	agreed := map[string]bool{}
	if n.ToolsListChanged {
		agreed["toolsListChanged"] = true
	}
	if n.PromptsListChanged {
		agreed["promptsListChanged"] = true
	}
	if n.ResourcesListChanged {
		agreed["resourcesListChanged"] = true
	}
	subID := json.RawMessage(msg.ID.Raw())
	tag := func(method string, extra map[string]any) []byte {
		p := map[string]any{"_meta": map[string]json.RawMessage{protocol.MetaSubscriptionID: subID}}
		for k, v := range extra {
			p[k] = v
		}
		b, _ := json.Marshal(p)
		return jsonrpc.AppendRequest(nil, jsonrpc.ID{}, method, b)
	}
	wanted := map[string]string{
		"notifications/tools/list_changed":     "toolsListChanged",
		"notifications/prompts/list_changed":   "promptsListChanged",
		"notifications/resources/list_changed": "resourcesListChanged",
	}

	// A graceful closure, when the gateway ends the subscription, is a
	// response to the listen request.
	closed, _ := json.Marshal(map[string]any{"resultType": "complete", "_meta": map[string]json.RawMessage{protocol.MetaSubscriptionID: subID}})
	h.runStream(w, r, rq, "listen:"+session.NewID(), msg.ID, msg.Method, streamHooks{
		first: tag("notifications/subscriptions/acknowledged", map[string]any{"notifications": agreed}),
		shape: func(raw []byte) []byte {
			m, err := jsonrpc.Decode(raw)
			if err != nil || !agreed[wanted[m.Method]] {
				return nil
			}
			return tag(m.Method, nil)
		},
		ended: jsonrpc.AppendResult(nil, msg.ID, closed),
	})
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
	raw := p.Get("_meta")
	if raw == nil {
		return params
	}
	meta, err := jsonx.ParseValidObject(raw)
	if err != nil {
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
