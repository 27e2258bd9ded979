package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcpgw/gateway/internal/dispatch"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/telemetry"
)

// metaOf returns params._meta as an object, or nil.
func metaOf(params json.RawMessage) *jsonx.Object {
	if len(params) == 0 {
		return nil
	}
	p, err := jsonx.ParseValidObject(params)
	if err != nil {
		return nil
	}
	m, _ := p.Object("_meta")
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
	if msg.Kind == jsonrpc.KindRequest && msg.Method == protocol.MethodInitialize {
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
func (h *Handler) serveStateless(w http.ResponseWriter, r *http.Request, rq *dispatch.Request, msg *jsonrpc.Message, meta *jsonx.Object) {
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
	// A request without a required per-request field is malformed, not a
	// header mismatch: -32602 with 400 (2026-07-28 basic/index, "Per-request
	// protocol fields"). A missing header is a mismatch (basic/transports/
	// streamable-http, "Server Validation"), and is checked first.
	malformed := func(format string, args ...any) {
		writeRPCError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeInvalidParams, "Invalid params: "+fmt.Sprintf(format, args...), nil)
	}
	switch {
	case header == "":
		mismatch("required header MCP-Protocol-Version is missing")
		return
	case meta == nil:
		malformed("params._meta is missing")
		return
	case !hasBody:
		malformed("params._meta[%q] is missing", protocol.MetaProtocolVersion)
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
	// Only now is the revision known whose fields are required: an empty
	// object declares no capability, an absent one is malformed.
	if caps := meta.Get(protocol.MetaClientCapabilities); len(caps) == 0 || caps[0] != '{' {
		malformed("params._meta[%q] is missing or not an object", protocol.MetaClientCapabilities)
		return
	}
	if m := r.Header.Get(protocol.HeaderMethod); m == "" {
		mismatch("required header Mcp-Method is missing")
		return
	} else if m != msg.Method {
		mismatch("Mcp-Method header value %q does not match body value %q", m, msg.Method)
		return
	}
	m := dispatch.LookupMethod(msg.Method, true)
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

	adm := dispatch.Admission{Version: body, Stateless: true, Header: r.Header, MetaCaps: meta.Get(protocol.MetaClientCapabilities)}
	if raw := meta.Get(protocol.MetaLogLevel); raw != nil {
		// 2026-07-28 server/utilities/logging, "Error Handling": an
		// unknown level is invalid params.
		level, err := jsonx.Unquote(raw)
		if err != nil || protocol.LogSeverity(level) < 0 {
			writeRPCError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeInvalidParams,
				fmt.Sprintf("Invalid params: _meta[%q] must be one of %s", protocol.MetaLogLevel, strings.Join(protocol.LogLevels, ", ")), nil)
			return
		}
		adm.WantsLogs, adm.LogLevel = true, level
	}
	rq.Admit(adm)
	// The same bound as an initialize's capabilities: they are parsed,
	// and their parse cached (see capSet), for each input request.
	if max := rq.State().Config().Limits.ClientCapabilitiesBytes; len(adm.MetaCaps) > max {
		h.srv.LimitHit(r.Context(), rq, telemetry.LimitClientCapabilities, msg.Method)
		writeRPCError(w, http.StatusOK, msg.ID, jsonrpc.CodeInvalidParams,
			fmt.Sprintf("Invalid params: _meta[%q] exceeds limits.client_capabilities_bytes (%d bytes)", protocol.MetaClientCapabilities, max), nil)
		return
	}
	if msg.Method != protocol.MethodDiscover {
		rec, err := h.srv.PrincipalRecord(r.Context(), rq)
		if err != nil {
			// Its Create is a session's: the same caps, the same answers.
			h.refuseCreate(w, r, rq, msg.ID, msg.Method, err)
			return
		}
		rq.Session = rec
	} else {
		rq.Session = &session.Record{ID: "discover"}
	}
	if m.Stream() {
		h.serveListen(w, r, rq, msg) // subscriptions/listen, the one stream
		return
	}
	h.serveRequest(w, r, rq, msg, m)
}

// serveListen serves subscriptions/listen: a long-lived response stream of
// the change notifications the client opted in to, for its tenant's view.
func (h *Handler) serveListen(w http.ResponseWriter, r *http.Request, rq *dispatch.Request, msg *jsonrpc.Message) {
	var params struct {
		Notifications struct {
			ToolsListChanged      bool            `json:"toolsListChanged"`
			PromptsListChanged    bool            `json:"promptsListChanged"`
			ResourcesListChanged  bool            `json:"resourcesListChanged"`
			ResourceSubscriptions []string        `json:"resourceSubscriptions"`
			TaskIDs               json.RawMessage `json:"taskIds"`
		} `json:"notifications"`
	}
	if len(msg.Params) > 0 && json.Unmarshal(msg.Params, &params) != nil {
		writeRPCError(w, http.StatusOK, msg.ID, jsonrpc.CodeInvalidParams, "Invalid params", nil)
		return
	}
	n := params.Notifications
	if n.TaskIDs != nil {
		// The Tasks extension's filter: a caller that did not declare the
		// extension is told so; one that did is agreed no task ids (task
		// notifications are not relayed: it polls tasks/get).
		if ce := rq.ListenTasksError(); ce != nil {
			e := ce.RPCError()
			writeJSON(w, http.StatusBadRequest, jsonrpc.AppendError(nil, msg.ID, e))
			return
		}
	}
	// Types the gateway does not relay are left out of the acknowledgment,
	// as the revision says for unsupported types.
	agreed := map[string]any{}
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
	var hooks streamHooks
	if len(n.ResourceSubscriptions) > 0 {
		uris, updates, stop := h.srv.SubscribeResources(r.Context(), rq, n.ResourceSubscriptions)
		defer stop()
		if len(uris) > 0 {
			agreed["resourceSubscriptions"] = uris
			hooks.source = func(context.Context) (<-chan []byte, func([]byte) []byte, func()) {
				return updates, func(raw []byte) []byte {
					m, err := jsonrpc.Decode(raw)
					if err != nil {
						return nil
					}
					var p struct {
						URI string `json:"uri"`
					}
					_ = json.Unmarshal(m.Params, &p)
					return tag(m.Method, map[string]any{"uri": p.URI})
				}, func() {}
			}
		}
	}
	wanted := map[string]string{
		protocol.NotifyToolsListChanged:     "toolsListChanged",
		protocol.NotifyPromptsListChanged:   "promptsListChanged",
		protocol.NotifyResourcesListChanged: "resourcesListChanged",
	}

	// A graceful closure, when the gateway ends the subscription, is a
	// response to the listen request.
	closed, _ := json.Marshal(map[string]any{"resultType": "complete", "_meta": map[string]json.RawMessage{protocol.MetaSubscriptionID: subID}})
	hooks.first = tag(protocol.NotifySubscriptionsAcknowledged, map[string]any{"notifications": agreed})
	hooks.shape = func(raw []byte) []byte {
		m, err := jsonrpc.Decode(raw)
		if err != nil || agreed[wanted[m.Method]] != true {
			return nil
		}
		return tag(m.Method, nil)
	}
	hooks.ended = jsonrpc.AppendResult(nil, msg.ID, closed)
	h.runStream(w, r, rq, "listen:"+session.NewID(), msg.ID, msg.Method, hooks)
}
