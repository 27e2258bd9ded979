package session_test

import (
	"testing"

	"github.com/mcpgw/gateway/internal/session"
)

func TestNewID(t *testing.T) {
	const n = 1000
	seen := make(map[string]bool, n)
	for range n {
		id := session.NewID()
		if len(id) != 32 {
			t.Errorf("NewID() = %q: length %d, want 32", id, len(id))
		}
		for _, c := range []byte(id) {
			// Streamable HTTP: Mcp-Session-Id holds only visible ASCII
			// (0x21 to 0x7E).
			if c < 0x21 || c > 0x7e {
				t.Errorf("NewID() = %q: byte %#x is not visible ASCII", id, c)
				break
			}
		}
		if seen[id] {
			t.Fatalf("NewID() returned %q twice", id)
		}
		seen[id] = true
	}
}
