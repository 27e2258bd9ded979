// Package relay is the relay of an upstream's answer to the client: the
// loop that forwards a client request to its upstream and relays what
// comes back (Relayer.Relay: notifications as they arrive, requests for
// input bridged between the revisions, a 2026-07-28 caller's call parked
// for its retry, then the result), reaching the request through the
// narrow Hop interface that internal/dispatch implements; what an
// upstream's error becomes for the client (Error), which of the
// upstream's log messages a 2026-07-28 request hears (WantsLog), and how a
// request's end counts for the upstream's circuit breaker (BreakerOutcome)
// and in the audit log (FailureReason).
package relay

import (
	"errors"
	"net/http"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/upstream"
)

// An upstream's JSON-RPC error is its answer, whatever HTTP status carried
// it (a 2026-07-28 upstream answers its errors with 400 or 404): the client
// gets the upstream's code, message and data (scrubbed of secrets by
// package upstream), with a resource URI in data (data.uri, as a -32602 for
// an unknown resource names it) in the gateway's namespace. A status about
// the gateway rather than the request (401, 403, 407, 429) is not an
// answer, nor is a 5xx: those stay the gateway's own errors.

// Error returns the error a request relayed to an upstream whose exposed
// names carry prefix ended with, as the client gets it: an upstream's
// JSON-RPC error (a *jsonrpc.Error from its answer, or an *upstream.Error
// whose 4xx body carried one) as a *jsonrpc.Error in the client's
// namespace; any other err as it is.
func Error(prefix string, err error) error {
	var e *jsonrpc.Error
	var ue *upstream.Error
	switch {
	case errors.As(err, &ue):
		if e = Answered(ue); e == nil {
			return err
		}
	case !errors.As(err, &e):
		return err
	}
	if len(e.Data) == 0 || e.Data[0] != '{' || prefix == "" {
		return e
	}
	d, derr := jsonx.ParseValidObject(e.Data)
	if derr != nil {
		return e
	}
	uri, ok := d.GetString("uri")
	if !ok || uri == "" {
		return e
	}
	d.SetString("uri", catalog.ExposedURI(prefix, uri))
	return &jsonrpc.Error{Code: e.Code, Message: e.Message, Data: d.Bytes()}
}

// Answered returns the JSON-RPC error an upstream answered with under a
// 4xx status that is about the request, or nil.
func Answered(ue *upstream.Error) *jsonrpc.Error {
	switch {
	case ue.RPC == nil, ue.Status < 400, ue.Status > 499, ue.Status == http.StatusUnauthorized,
		ue.Status == http.StatusForbidden, ue.Status == http.StatusProxyAuthRequired, ue.Status == http.StatusTooManyRequests:
		return nil
	}
	return ue.RPC
}

// WantsLog reports whether a 2026-07-28 request that asked for log
// messages at level (its _meta logLevel) hears log message msg: msg's
// level is at or above it.
func WantsLog(level string, msg *jsonrpc.Message) bool {
	p, err := jsonx.ParseValidObject(msg.Params)
	if err != nil {
		return false
	}
	l, _ := p.GetString("level")
	return protocol.LogSeverity(l) >= protocol.LogSeverity(level)
}
