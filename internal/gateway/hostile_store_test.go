package gateway_test

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestHostileInitializeParamsReleased opens sessions whose clientInfo and
// capabilities are each distinct and large, as a hostile client chooses
// them, ends them with DELETE, and checks that the gateway's heap comes
// back to where it was: no copy of a value outlives the sessions holding
// it (issue 13: 30 initializes of ~4 MiB values used to hold ~240 MB for
// ever, in the memory store's intern table).
func TestHostileInitializeParamsReleased(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	const n, size = 30, 512 << 10
	url := startGateway(t, []upstreamSpec{spec(a)}, func(c *config.Config) {
		// Values this large pass the router's own bounds, so that the test
		// is of the store's.
		c.Limits.ClientInfoBytes = 2 * size
		c.Limits.ClientCapabilitiesBytes = 2 * size
		c.Sessions.MaxPerPrincipal = 2 * n
	})
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	// One session first, so that the connections and caches a first
	// session sets up are in the baseline.
	hostileStoreDelete(t, url, initialize(t, url))
	before := heap()
	for i := range n {
		pad := strings.Repeat(string(rune('a'+i%26)), size)
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
			`"capabilities":{"experimental":{"x-%d":%q}},"clientInfo":{"name":"hostile-%d","version":%q}}}`, i, pad, i, pad)
		resp, out := do(t, post(t, url, "", body))
		sid := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("initialize %d: %d %.200s", i, resp.StatusCode, out)
		}
		hostileStoreDelete(t, url, sid)
	}
	const slack = 8 << 20 // n × 2 × size is 30 MiB
	if after := heap(); after > before+slack {
		t.Errorf("heap after %d sessions with distinct %d KiB params were deleted: %d bytes above the start, want at most %d",
			n, size>>10, after-before, slack)
	}
}

// TestHostileSessionCapPerPrincipal checks sessions.max_per_principal
// through HTTP, with either store: one principal (here the anonymous one)
// gets as many sessions as the cap and no more, no refused initialize
// hands out a session id, and a DELETE makes room at once.
func TestHostileSessionCapPerPrincipal(t *testing.T) {
	for _, tt := range []struct {
		name  string
		store func(t *testing.T) func(*config.Config)
	}{
		{"memory", func(*testing.T) func(*config.Config) { return func(*config.Config) {} }},
		{"redis", func(t *testing.T) func(*config.Config) { return redisStore(t) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := testkit.NewUpstream(t, "alpha")
			const capN = 3
			capped := func(c *config.Config) { c.Sessions.MaxPerPrincipal = capN }
			store := tt.store(t)
			// Two replicas: with Redis they share the cap.
			one := startGateway(t, []upstreamSpec{spec(a)}, store, capped)
			two := one
			if tt.name == "redis" {
				two = startGateway(t, []upstreamSpec{spec(a)}, store, capped)
			}
			var sids []string
			for i := range capN {
				sids = append(sids, initialize(t, []string{one, two}[i%2]))
			}
			for _, url := range []string{one, two} {
				resp, body := do(t, post(t, url, "", initBody))
				if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Mcp-Session-Id") != "" {
					t.Fatalf("initialize over max_per_principal: %d, session id %q; want a refusal without an id",
						resp.StatusCode, resp.Header.Get("Mcp-Session-Id"))
				}
				if !strings.Contains(body, `"error"`) {
					t.Errorf("refusal body %q has no JSON-RPC error", body)
				}
			}
			// The sessions held are untouched.
			for _, sid := range sids {
				if body := postJSON(t, two, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); body != `{"jsonrpc":"2.0","id":1,"result":{}}` {
					t.Fatalf("ping: %s", body)
				}
			}
			hostileStoreDelete(t, two, sids[0])
			initialize(t, one)
			if resp, _ := do(t, post(t, one, "", initBody)); resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("initialize over max_per_principal after one DELETE and one initialize: %d", resp.StatusCode)
			}
		})
	}
}

// hostileStoreDelete ends session sid with DELETE.
func hostileStoreDelete(t *testing.T, url, sid string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodDelete, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, body := do(t, req)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE %s: %d %s", sid, resp.StatusCode, body)
	}
}
