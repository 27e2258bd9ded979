package guard

import (
	"strings"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// A BlockError is a request a guard stopped: arguments refused (the
// upstream is not called) or a result withheld. A tools/call answers it
// with a tool result the model can act on; other methods with a JSON-RPC
// error (RPCError).
type BlockError struct{ Verdict Verdict }

func (e *BlockError) Error() string {
	if e.Verdict.Message != "" {
		return e.Verdict.Message
	}
	return "The gateway's content guards withheld this content."
}

// RPCError is the JSON-RPC error of a blocked prompts/get or
// resources/read.
func (e *BlockError) RPCError() *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: e.Error()}
}

// Kinds names what the guards found, for the audit log: never the text.
func (e *BlockError) Kinds() string {
	var ks []string
	for _, f := range e.Verdict.Findings {
		ks = append(ks, f.Kind)
	}
	return strings.Join(ks, ",")
}
