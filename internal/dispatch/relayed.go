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

// A RelayedError is a JSON-RPC error an upstream answered a request with,
// as the client gets it: the upstream's code, message and data, with a
// resource URI in data (data.uri, as a -32602 for an unknown resource
// carries it) in the gateway's namespace. An upstream's JSON-RPC error is
// its answer whatever HTTP status carried it (a 2026-07-28 upstream
// answers errors with 400). BadRequest says the client's revision wants it
// answered with HTTP 400: a 2026-07-28 client, and an error the upstream
// answered with 400, or one the revision answers with 400 whoever sends it
// (a missing client capability, a header mismatch, an unsupported
// version: 2026-07-28 schema, MissingRequiredClientCapabilityError "For
// HTTP, the response status code MUST be 400"), as a 2025-11-25 upstream
// answers them with 200. The transport can say so only while nothing of
// the response was sent.
type RelayedError struct {
	Err        *jsonrpc.Error
	BadRequest bool
}

func (e *RelayedError) Error() string { return e.Err.Error() }
func (e *RelayedError) Unwrap() error { return e.Err }

// relayedError returns the error a request of rq relayed to up ended with,
// as the client gets it: an upstream's JSON-RPC error (err a
// *jsonrpc.Error, or an *upstream.Error carrying one) becomes a
// RelayedError; any other err is returned as it is.
func (rq *Request) relayedError(up *upstreamRef, err error) error {
	var e *jsonrpc.Error
	status := http.StatusOK
	var ue *upstream.Error
	switch {
	case errors.As(err, &ue) && ue.RPC != nil:
		e, status = ue.RPC, ue.Status
	case errors.As(err, &e):
	default:
		return err
	}
	if len(e.Data) > 0 {
		if d, derr := jsonx.ParseValidObject(e.Data); derr == nil {
			if uri, ok := d.GetString("uri"); ok && uri != "" {
				d.SetString("uri", catalog.ExposedURI(up.cat.Prefix, uri))
				e = &jsonrpc.Error{Code: e.Code, Message: e.Message, Data: d.Bytes()}
			}
		}
	}
	bad := status == http.StatusBadRequest
	switch e.Code {
	case protocol.CodeMissingClientCapability, protocol.CodeHeaderMismatch, protocol.CodeUnsupportedProtocolVersion:
		bad = true
	}
	return &RelayedError{Err: e, BadRequest: rq.Stateless && bad}
}
