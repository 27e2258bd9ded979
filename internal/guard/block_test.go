package guard

import (
	"testing"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// TestBlockError: a block says the verdict's message (or a default),
// names the kinds found and never the text, and is an internal error on
// the wire.
func TestBlockError(t *testing.T) {
	e := &BlockError{Verdict: Verdict{Action: Block, Findings: []Finding{{Kind: "email"}, {Kind: "private-key"}}}}
	if e.Error() == "" || e.Kinds() != "email,private-key" {
		t.Errorf("Error %q, Kinds %q", e.Error(), e.Kinds())
	}
	e.Verdict.Message = "Found: email."
	if got := e.RPCError(); got.Code != jsonrpc.CodeInternalError || got.Message != "Found: email." {
		t.Errorf("RPCError = %+v", got)
	}
}
