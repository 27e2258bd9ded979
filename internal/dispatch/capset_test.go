package dispatch

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/protocol"
)

// TestCapSetIsBounded: distinct client capability values, as many as a
// client cares to send, leave capSet's table within its bounds, and a
// large value is answered without being kept.
func TestCapSetIsBounded(t *testing.T) {
	h := &Server{}
	big := json.RawMessage(`{"elicitation":{},"x":"` + strings.Repeat("y", capSetMaxBytes) + `"}`)
	if !h.capSet(big)["elicitation"] {
		t.Fatal("a large value is not parsed")
	}
	if _, ok := h.capSets.Load(string(big)); ok {
		t.Error("a value over capSetMaxBytes was kept")
	}
	for i := range 20 * capSetMaxEntries {
		caps := json.RawMessage(fmt.Sprintf(`{"sampling":{},"experimental":{"n%d":%q}}`, i, strings.Repeat("z", 1000)))
		if !h.capSet(caps)["sampling"] {
			t.Fatal("capSet lost a name")
		}
	}
	n := 0
	h.capSets.Range(func(any, any) bool { n++; return true })
	if n > capSetMaxEntries {
		t.Errorf("capSet holds %d entries, bound %d", n, capSetMaxEntries)
	}
	// A value seen again is served from the table.
	small := json.RawMessage(`{"roots":{}}`)
	first := h.capSet(small)
	if second := h.capSet(small); fmt.Sprintf("%p", first) != fmt.Sprintf("%p", second) {
		t.Error("a small value was not cached")
	}
}

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
