package gateway_test

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/testkit"
)

// TestSchemaBomb: an upstream lists tools whose inputSchema expands
// through $ref to 2^20 and 2^47 schemas (issue 26: 5.7 s and 896 MiB for
// one call at depth 20; no answer at 47). They are listed, their schemas
// are not enforced (over the expansion bound), and a call with a bad
// argument reaches the upstream promptly, allocating little.
func TestSchemaBomb(t *testing.T) {
	h := testkit.NewHostileUpstream(t, testkit.Hostile{SchemaBombs: []int{20, 47}})
	_, url := startGatewayG(t, []upstreamSpec{hostileSpec("h", h, "h")})
	cs := testkit.Connect(t, url, nil)
	ctx := context.Background()
	names := toolNames(t, cs)
	for _, name := range []string{"h__bomb-20", "h__bomb-47"} {
		if !slices.Contains(names, name) {
			t.Fatalf("%s not listed: %v", name, names)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"x": 1, "text": "bad"}})
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		// Not enforced: the upstream answers (echo) rather than the gateway
		// refusing x.
		if res.IsError || callText(t, res) != "hostile:bad" {
			t.Errorf("%s: isError %v, %q; want the upstream's answer", name, res.IsError, callText(t, res))
		}
		if took > 3*time.Second {
			t.Errorf("%s: answered in %v", name, took)
		}
		if a := after.TotalAlloc - before.TotalAlloc; a > 64<<20 {
			t.Errorf("%s: the call allocated %d MiB", name, a>>20)
		}
	}
}
