package policy

import (
	"errors"
	"testing"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// TestRefusal: a list-phase refusal is the unknown item's error; a
// call-phase one says the rule's message as invalid params.
func TestRefusal(t *testing.T) {
	unknown := errors.New("Unknown tool: t")
	hidden := &Refusal{Decision: Decision{Unknown: true}, Noun: "tool", Unknown: unknown}
	if hidden.Error() != unknown.Error() || !errors.Is(hidden, unknown) {
		t.Errorf("list phase: %q, unwraps to the unknown item: %v", hidden.Error(), errors.Is(hidden, unknown))
	}
	called := &Refusal{Decision: Decision{Message: "path must be under /tmp"}, Noun: "tool"}
	if called.Unwrap() != nil || called.Error() != "path must be under /tmp" {
		t.Errorf("call phase: %q", called.Error())
	}
	if e := called.RPCError(); e.Code != jsonrpc.CodeInvalidParams || e.Message != "path must be under /tmp" {
		t.Errorf("RPCError = %+v", e)
	}
	if (&Refusal{}).Message() == "" {
		t.Error("no default message")
	}
}
