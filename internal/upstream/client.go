// Package upstream is the gateway's client side: one Client per configured
// upstream MCP server, speaking Streamable HTTP (protocol 2025-11-25 and
// older) to it.
//
// A Client is shared by every gateway session; the per-session part (the
// upstream's Mcp-Session-Id and negotiated version) is a [session.Upstream]
// value the caller keeps and passes in. Credentials come only from the
// upstream's config: nothing of the client's request (its token above all)
// ever reaches an upstream, because this package never sees it.
//
// Everything an upstream sends is untrusted input: sizes are bounded, every
// request is bounded by the upstream's timeout, and the upstream's HTTP
// status codes are interpreted here and never relayed to the gateway's
// clients as they are.
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/session"
)

// ErrSessionExpired means the upstream no longer knows the session: it
// answered 404 to a request carrying an Mcp-Session-Id. The caller should
// initialize a new upstream session and retry.
var ErrSessionExpired = errors.New("upstream session expired")

// Options configure a Client. The zero value is usable.
type Options struct {
	// HTTPClient sends the requests. If nil, a client with a dedicated,
	// keep-alive transport is used. Its Timeout should be zero: the upstream's
	// own timeout is applied per request.
	HTTPClient *http.Client
	// Logger, if nil, means no logging.
	Logger *slog.Logger
	// ClientInfo is the Implementation the gateway announces in initialize.
	ClientInfo json.RawMessage
	// Capabilities are the gateway's own client capabilities announced in
	// initialize. Nil means {}.
	Capabilities json.RawMessage
	// MaxMessageBytes bounds one message (a JSON body or one SSE event) read
	// from the upstream. Default 16 MiB.
	MaxMessageBytes int64
}

// InitResult is what an upstream answered to initialize.
type InitResult struct {
	Session      session.Upstream
	ServerInfo   json.RawMessage
	Instructions string
}

// Error is a failure talking to one upstream. Its message names the upstream
// but never its URL or credentials.
type Error struct {
	Upstream string
	Op       string // the JSON-RPC method, or "terminate"
	// Status is the HTTP status the upstream answered, 0 if none.
	Status int
	Err    error
}

func (e *Error) Error() string { return "upstream " + e.Upstream + ": " + e.Op + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

var _ = context.Background
var _ = config.Upstream{}
var _ = jsonrpc.ID{}
