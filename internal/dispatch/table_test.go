package dispatch

import (
	"testing"

	"github.com/mcpgw/gateway/internal/protocol"
)

// TestMethodTableDescribed: every method the table serves is an MCP
// request a client sends, as protocol.Methods describes it, so that its
// metric label and its Mcp-Name rule come from there.
func TestMethodTableDescribed(t *testing.T) {
	for name := range methods {
		d, ok := protocol.Method(name)
		if !ok || d.Notification || d.FromServer {
			t.Errorf("%s: described %+v (%v), want a client's request", name, d, ok)
		}
	}
}
