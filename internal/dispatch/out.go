package dispatch

import (
	"encoding/json"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// An Out is where one request's answer goes: the transport's. A method
// writes the messages it relays before its result with Event; the
// dispatcher writes the result. How they travel (one JSON body, or an SSE
// stream), and every HTTP status, are the transport's choice.
type Out interface {
	// Event sends a message before the response (a notification, or a
	// request to the client), switching the answer to a stream. An error
	// means the client is gone, and wraps rpcerr.ErrClientGone.
	Event(msg []byte) error
	// Stream switches the answer to a stream before any event: the
	// upstream streams its answer, and so does the gateway.
	Stream()
	// Collects reports that nothing reaches the client before the
	// response (a batch): events are dropped, and no request can be
	// asked of the client.
	Collects() bool
	// Started reports whether the answer has begun.
	Started() bool
	// Result writes the success response to request id.
	Result(id jsonrpc.ID, result json.RawMessage)
	// Refuse answers err to request id at the HTTP level when the transport has a
	// status for it and nothing was written yet, and reports whether it
	// did. The dispatcher asks it of every error before making it a
	// JSON-RPC error response.
	Refuse(id jsonrpc.ID, err error) bool
}
