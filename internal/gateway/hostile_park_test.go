package gateway_test

import (
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestParkedCallsPerPrincipal: a 2026-07-28 client whose calls an upstream
// asks for input, and that never retries, holds at most
// limits.parked_calls_per_principal upstream calls open; the next call
// fails at once naming the limit, and a retry that completes a parked call
// frees its place.
func TestParkedCallsPerPrincipal(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	g, url := startGatewayG(t, []upstreamSpec{spec(a)}, func(c *config.Config) {
		c.Limits.ParkedCallsPerPrincipal = 2
	})
	call := askCaller(t, url, nil)
	parked := func(m map[string]any) (state, key string) {
		t.Helper()
		res, _ := m["result"].(map[string]any)
		if res["resultType"] != "input_required" {
			t.Fatalf("want input_required, got %v", m)
		}
		for k := range res["inputRequests"].(map[string]any) {
			key = k
		}
		return res["requestState"].(string), key
	}
	state, key := parked(call(1, ""))
	parked(call(2, ""))
	over := call(3, "")
	e, _ := over["error"].(map[string]any)
	if e == nil || e["code"].(float64) != -32600 || !strings.Contains(e["message"].(string), "parked_calls_per_principal (2)") {
		t.Fatalf("third parked call: %v, want -32600 naming the limit", over)
	}
	if n := limitCount(t, g, "parked_calls_per_principal"); n != 1 {
		t.Errorf("parked_calls_per_principal rejections = %d, want 1", n)
	}
	// Completing the first call frees its place.
	done := call(4, `,"inputResponses":{"`+key+`":{"action":"accept","content":{"name":"Bob"}}},"requestState":"`+state+`"`)
	if res, _ := done["result"].(map[string]any); res["resultType"] != "complete" {
		t.Fatalf("retry: %v", done)
	}
	parked(call(5, ""))
}
