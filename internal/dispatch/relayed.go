package dispatch

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

// relayedError returns the error a request relayed to up ended with, as
// the client gets it: an upstream's JSON-RPC error (a *jsonrpc.Error from
// its answer, or an *upstream.Error whose 4xx body carried one) as a
// *jsonrpc.Error in the client's namespace; any other err as it is.
func relayedError(up *upstreamRef, err error) error {
	var e *jsonrpc.Error
	var ue *upstream.Error
	switch {
	case errors.As(err, &ue):
		if e = answeredError(ue); e == nil {
			return err
		}
	case !errors.As(err, &e):
		return err
	}
	if len(e.Data) == 0 || e.Data[0] != '{' || up.cat.Prefix == "" {
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
	d.SetString("uri", catalog.ExposedURI(up.cat.Prefix, uri))
	return &jsonrpc.Error{Code: e.Code, Message: e.Message, Data: d.Bytes()}
}

// answeredError returns the JSON-RPC error an upstream answered with under
// a 4xx status that is about the request, or nil.
func answeredError(ue *upstream.Error) *jsonrpc.Error {
	switch {
	case ue.RPC == nil, ue.Status < 400, ue.Status > 499, ue.Status == http.StatusUnauthorized,
		ue.Status == http.StatusForbidden, ue.Status == http.StatusProxyAuthRequired, ue.Status == http.StatusTooManyRequests:
		return nil
	}
	return ue.RPC
}

// An ErrorAnswer is a JSON-RPC error a 2026-07-28 request is answered
// with, and the HTTP status that revision gives it (see statelessStatus):
// the transport writes both while nothing of the answer was sent.
type ErrorAnswer struct {
	Err    *jsonrpc.Error
	Status int
}

func (e *ErrorAnswer) Error() string { return e.Err.Error() }

// statelessStatus is the HTTP status of a 2026-07-28 error answer with
// code, whether the error is the gateway's or an upstream's (relayed
// whatever status the upstream used, and whichever revision it speaks):
// basic/transports/streamable-http, "Protocol Version Header": a method not
// implemented (-32601) is 404, -32022 and -32020 are 400; basic/index,
// "Per-request protocol fields": -32021 and a malformed request's -32602
// are 400. Every -32602 is 400 (as the reference SDK answers them), so
// that a name is refused alike whether the gateway hid it or the upstream
// does not know it. Any other error is 200, as a session's are.
func statelessStatus(code int64) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, protocol.CodeHeaderMismatch, protocol.CodeMissingClientCapability, protocol.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}
