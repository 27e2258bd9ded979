package telemetry

import (
	"testing"

	"github.com/mcpgw/gateway/internal/protocol"
)

// TestMethodLabels: every MCP method has a label of its own (tasks/update
// among them); anything else is "other".
func TestMethodLabels(t *testing.T) {
	for _, m := range protocol.Methods {
		if got := MethodLabel(m.Name); got != m.Name {
			t.Errorf("%s is labelled %q", m.Name, got)
		}
	}
	for _, name := range []string{"tasks/update", "server/discover", "subscriptions/listen"} {
		if MethodLabel(name) != name {
			t.Errorf("%s has no label", name)
		}
	}
	if MethodLabel("x/unknown") != otherLabel {
		t.Error("an unknown method has a label of its own")
	}
}
