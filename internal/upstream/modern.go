package upstream

// Upstreams of the 2026-07-28 revision ("modern", in the words of
// 2026-07-28 basic/versioning) have no initialize and no session: every
// request carries the protocol version, the client's identity and
// capabilities in params._meta, and mirrors its method and name in headers.
// The Client learns, once per upstream, which era the upstream is of, and
// then speaks its language: Open returns either a legacy session (after
// initialize) or a session.Upstream with no id whose ProtocolVersion is
// modernVersion (see IsModern), which the caller keeps and passes to Call
// like any other.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
)

// modernVersion is the revision without sessions the client speaks to
// upstreams that support it.
const modernVersion = protocol.LatestStateless

// IsModern reports whether s is a session with an upstream of a revision
// without sessions: s has no id, and every request carries its version.
func IsModern(s session.Upstream) bool {
	return protocol.Listed(s.ProtocolVersion, protocol.StatelessVersions)
}

// What the client knows of an upstream's era.
const (
	eraUnknown int32 = iota
	eraModern
	eraLegacy
)

// Open returns a session with the upstream in the revision it speaks. The
// first time, it probes with server/discover (basic/versioning, "Backward
// Compatibility with Initialization-Based Versions"): a result that lists
// modernVersion makes the upstream modern, and Open returns a session with
// no id and ProtocolVersion modernVersion; any answer that is not a
// recognized modern one makes it legacy, and Open initializes. The finding
// is kept ("a property of the server"), and forgotten when it fails: a
// failed Open, or a modern session the upstream no longer takes (see
// callStatusError), makes the next Open probe again.
func (c *Client) Open(ctx context.Context) (*InitResult, error) {
	return c.OpenAs(ctx, nil)
}

// OpenAs is Open for a client whose capabilities are caps: a session of
// the session-based revisions announces them at initialize (see
// [Client.InitializeAs]); a modern session has none to announce, its
// requests carry their client's. Nil caps are the configured ones.
func (c *Client) OpenAs(ctx context.Context, caps json.RawMessage) (*InitResult, error) {
	if c.era.Load() != eraLegacy {
		res, err := c.discover(ctx)
		switch {
		case err != nil:
			c.era.Store(eraUnknown)
			return nil, err
		case res != nil:
			c.era.Store(eraModern)
			return res, nil
		}
		c.era.Store(eraLegacy)
	}
	res, err := c.InitializeAs(ctx, caps)
	var e *Error
	if err != nil && c.auto != nil && !c.auto.sse.Load() && errors.As(err, &e) && e.Status >= 400 && e.Status <= 499 &&
		e.Status != http.StatusUnauthorized && e.Status != http.StatusForbidden && e.Status != http.StatusTooManyRequests {
		// transport auto: a 4xx to the POST of initialize is how a
		// 2024-11-05 HTTP+SSE server answers (basic/transports,
		// "Backwards Compatibility"); the client speaks that from now on.
		// Not a refusal of the credentials, or a rate limit: those are
		// what a Streamable HTTP server says too.
		c.log.Info("upstream speaks the 2024-11-05 HTTP+SSE transport", "status", e.Status)
		c.auto.sse.Store(true)
		res, err = c.InitializeAs(ctx, caps)
	}
	if err != nil {
		c.era.Store(eraUnknown)
	}
	return res, err
}

// discover probes the upstream with server/discover. It returns the modern
// session, or nil and no error when the upstream is legacy (or modern but
// without modernVersion while it offers a legacy one), or an error when the
// upstream could not be reached or refused both eras.
func (c *Client) discover(ctx context.Context) (*InitResult, error) {
	const op = protocol.MethodDiscover
	ctx, stop := c.withTimeout(ctx)
	defer stop()
	s := session.Upstream{ProtocolVersion: modernVersion.String()}
	r, err := c.call(ctx, s, initializeID, op, jsonrpc.RawParams(c.discoverParams), false, nil)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 {
			return nil, err // down, or failing: neither era is known
		}
		if e.RPC != nil {
			return nil, c.modernRefusal(op, e.RPC)
		}
		return nil, nil // a legacy server's 4xx
	}
	defer r.Close()
	var final *jsonrpc.Message
	for final == nil {
		msg, _, err := r.Next()
		if err != nil {
			return nil, err
		}
		if msg.Kind == jsonrpc.KindResponse || msg.Kind == jsonrpc.KindErrorResponse {
			final = msg
		}
	}
	if final.Kind == jsonrpc.KindErrorResponse {
		return nil, c.modernRefusal(op, final.Error)
	}
	var res struct {
		SupportedVersions []string        `json:"supportedVersions"`
		Capabilities      json.RawMessage `json:"capabilities"`
		Instructions      string          `json:"instructions"`
		Meta              struct {
			// protocol.MetaServerInfo: a tag cannot name a constant.
			ServerInfo json.RawMessage `json:"io.modelcontextprotocol/serverInfo"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(final.Result, &res); err != nil {
		return nil, nil // not a DiscoverResult: not a modern server
	}
	if !slices.Contains(res.SupportedVersions, modernVersion.String()) {
		return nil, nil
	}
	caps := res.Capabilities
	if len(caps) == 0 || string(caps) == "null" {
		caps = json.RawMessage(`{}`)
	}
	return &InitResult{
		Session:      session.Upstream{ProtocolVersion: modernVersion.String(), Capabilities: caps},
		ServerInfo:   res.Meta.ServerInfo,
		Instructions: res.Instructions,
	}, nil
}

// modernRefusal interprets a JSON-RPC error to server/discover: nil (fall
// back to initialize) unless it is a modern error that rules out both eras.
func (c *Client) modernRefusal(op string, e *jsonrpc.Error) error {
	switch e.Code {
	case protocol.CodeUnsupportedProtocolVersion:
		// A modern server without our modern version: fine if it still
		// speaks a legacy one we speak too.
		var data struct {
			Supported []string `json:"supported"`
		}
		_ = json.Unmarshal(e.Data, &data)
		for _, v := range data.Supported {
			if protocol.Listed(v, protocol.SessionVersions) {
				return nil
			}
		}
		return c.error(op, 0, fmt.Errorf("upstream supports none of our protocol versions: %v", excerpt([]byte(strings.Join(data.Supported, ", ")), 80)))
	case protocol.CodeHeaderMismatch, protocol.CodeMissingClientCapability:
		// Codes only a modern server answers with (2026-07-28 schema).
		return c.error(op, 0, shortened(e))
	}
	return nil
}

// callStatusError is statusError for a Call on session s. A modern session
// answered with a 4xx that is no modern error means the upstream is not (or
// no longer) modern: the era is forgotten and the error is
// ErrSessionExpired, so that the caller opens a session again, which
// probes again.
func (c *Client) callStatusError(op string, resp *http.Response, s session.Upstream) *Error {
	e := c.statusError(op, resp, s.SessionID != "")
	if IsModern(s) && e.RPC == nil && e.Status >= 400 && e.Status <= 499 &&
		e.Status != http.StatusTooManyRequests && e.Status != http.StatusUnauthorized && e.Status != http.StatusForbidden {
		c.era.Store(eraUnknown)
		e.Err = fmt.Errorf("%w: the upstream no longer takes %s requests (%v)", ErrSessionExpired, modernVersion, e.Err)
	}
	return e
}

// WithModernMeta returns params (nil for none) with the per-request protocol
// fields of modernVersion set in its _meta: the version, client info (if
// any) and capabilities. Every other member of params and _meta stays as it
// is; protocol keys already there are replaced.
func WithModernMeta(params, info, caps json.RawMessage) json.RawMessage {
	p := &jsonx.Object{}
	if len(params) > 0 {
		if o, err := jsonx.ParseValidObject(params); err == nil {
			p = o
		}
	}
	setModernMeta(p, info, caps)
	return p.Bytes()
}

// WithModernMetaObject is WithModernMeta for params that are the object p:
// it returns a copy of p with those fields set in its _meta, whose
// encoding is what WithModernMeta returns for p's; p is not changed, and
// nothing but _meta is encoded.
func WithModernMetaObject(p *jsonx.Object, info, caps json.RawMessage) *jsonx.Object {
	q := p.Clone()
	setModernMeta(q, info, caps)
	return q
}

// setModernMeta sets the per-request protocol fields in p's _meta (see
// WithModernMeta).
func setModernMeta(p *jsonx.Object, info, caps json.RawMessage) {
	meta := p.ObjectOr("_meta")
	meta.SetString(protocol.MetaProtocolVersion, modernVersion.String())
	if len(info) > 0 {
		meta.Set(protocol.MetaClientInfo, info)
	}
	if len(caps) == 0 {
		caps = json.RawMessage(`{}`)
	}
	meta.Set(protocol.MetaClientCapabilities, caps)
	p.Set("_meta", meta.Bytes())
}

// setModernHeaders sets the headers a 2026-07-28 request mirrors from its
// body (basic/transports/streamable-http, "Standard Headers"), and the
// Mcp-Param-* headers of extra.
func setModernHeaders(h http.Header, method string, params jsonrpc.Params, extra http.Header) {
	h.Set(protocol.HeaderMethod, method)
	if key := protocol.NameKey(method); key != "" {
		o, ok := params.Object()
		if !ok {
			var err error
			if o, err = jsonx.ParseValidObject(params.Bytes()); err != nil {
				o = &jsonx.Object{}
			}
		}
		if v, ok := o.GetString(key); ok {
			h.Set(protocol.HeaderName, protocol.EncodeHeaderValue(v))
		}
	}
	for k, v := range extra {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), protocol.HeaderParamPrefix) {
			h[http.CanonicalHeaderKey(k)] = v
		}
	}
}

// Reply sends the gateway's answer to a request the upstream sent on
// session s (elicitation/create, say): a result, or the error e when e is
// not nil. The upstream should answer 202 Accepted; any 2xx is accepted.
func (c *Client) Reply(ctx context.Context, s session.Upstream, id jsonrpc.ID, result json.RawMessage, e *jsonrpc.Error) error {
	const op = "reply"
	ctx, stop := c.withTimeout(ctx)
	defer stop()
	var body []byte
	if e != nil {
		body = jsonrpc.AppendError(nil, id, e)
	} else {
		body = jsonrpc.AppendResult(nil, id, result)
	}
	return c.post(ctx, s, op, body)
}
