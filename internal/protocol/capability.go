package protocol

import (
	"encoding/json"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// A CapabilityError is a 2026-07-28 caller's request that needed a client
// capability the caller did not declare in its _meta: an upstream of the
// session-based revisions asked for input the caller cannot give. It is
// answered MissingRequiredClientCapabilityError, -32021, with HTTP 400
// (2026-07-28 basic/index, "Per-request protocol fields").
type CapabilityError struct {
	Capability string // "elicitation", "sampling" or "roots"
	Sub        string // the sub-capability ("url", "tools"), or ""
}

func (e *CapabilityError) Error() string {
	if e.Sub != "" {
		return "Missing required client capability: " + e.Capability + "." + e.Sub
	}
	return "Missing required client capability: " + e.Capability
}

// RPCError is the error's JSON-RPC form: data.requiredCapabilities is a
// ClientCapabilities object naming the missing capability (schema
// MissingRequiredClientCapabilityError), {"elicitation":{}} or
// {"elicitation":{"url":{}}}.
func (e *CapabilityError) RPCError() *jsonrpc.Error {
	var required any = struct{}{}
	if e.Sub != "" {
		required = map[string]any{e.Sub: struct{}{}}
	}
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{e.Capability: required}})
	return &jsonrpc.Error{Code: CodeMissingClientCapability, Message: e.Error(), Data: data}
}
