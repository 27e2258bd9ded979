package policy

import "github.com/mcpgw/gateway/internal/jsonrpc"

// A Refusal is a request a policy rule refused. One the list phase
// refused answers as the unknown item it is to the caller (Unknown, which
// Unwrap gives); a call refused by a call-phase rule answers with the
// rule's message: as a tool result a model can act on for tools/call
// (when Decision.AsResult), else as invalid params (RPCError).
type Refusal struct {
	Decision Decision
	// Noun is what was refused ("tool", "prompt", "resource"), for the
	// denials metric.
	Noun string
	// Unknown, if not nil, is the error of an unknown item the caller
	// gets instead of the rule's message.
	Unknown error
}

func (e *Refusal) Error() string {
	if e.Unknown != nil {
		return e.Unknown.Error()
	}
	return e.Message()
}

func (e *Refusal) Unwrap() error { return e.Unknown }

// Message is the rule's message, or a default one.
func (e *Refusal) Message() string {
	if e.Decision.Message != "" {
		return e.Decision.Message
	}
	return "This call is not allowed by the gateway's policy."
}

// RPCError is the JSON-RPC error of a call-phase refusal.
func (e *Refusal) RPCError() *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: e.Message()}
}
