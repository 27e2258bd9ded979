package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// Issue 26: lists are keyed by the identity the upstream is reached with,
// unless lists: shared says they are the same for everyone.

func resourceURIs(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range res.Resources {
		out = append(out, r.URI)
	}
	return out
}

// TestListsPerTenantProcess: two tenants of one stdio upstream, each with
// a process of its own (the default isolation) and no credentials of
// their own. A resource created in acme's process, and listed to acme, is
// not listed to globex, whose list is its own process's; with lists:
// shared set, one copy serves both, as documented.
func TestListsPerTenantProcess(t *testing.T) {
	for _, tc := range []struct {
		name, lists string
		leaks       bool
	}{{"unset", "", false}, {"shared", config.ListsShared, true}} {
		t.Run(tc.name, func(t *testing.T) {
			lab := newLabIssuer(t)
			bin := testkit.StdioServer(t)
			_, url := startGatewayG(t, nil, labAuth(lab), func(c *config.Config) {
				c.Upstreams = append(c.Upstreams, config.Upstream{Name: "fs", Command: []string{bin}, Lists: tc.lists,
					Stdio: &config.UpstreamStdio{StopGrace: config.Duration(time.Second)}})
				c.Tenants = []config.Tenant{
					{ID: "acme", Upstreams: []config.TenantUpstream{{Name: "fs"}}},
					{ID: "globex", Upstreams: []config.TenantUpstream{{Name: "fs"}}},
				}
				c.Server.ListCacheTTL = config.Duration(time.Hour)
			})
			connect := func(tenant string) *mcp.ClientSession {
				tok := labToken(t, lab, url, "user-"+tenant, tenant)
				return testkit.Connect(t, url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + tok}}})
			}
			acme, globex := connect("acme"), connect("globex")
			if _, err := acme.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs__create", Arguments: map[string]any{"name": "acme-secret-plan"}}); err != nil {
				t.Fatal(err)
			}
			const mine = "fs+mem://acme-secret-plan"
			if got := resourceURIs(t, acme); !slices.Contains(got, mine) {
				t.Fatalf("acme does not see its resource: %v", got)
			}
			got := resourceURIs(t, globex)
			if leaked := slices.Contains(got, mine); leaked != tc.leaks {
				t.Errorf("globex sees %v (leaked %v, want %v)", got, leaked, tc.leaks)
			}
			if !slices.Contains(got, "fs+mem://static") {
				t.Errorf("globex misses its process's resource: %v", got)
			}
		})
	}
}

// TestListsSessionResourcesDefault: an HTTP upstream that opens a session
// per client session and lists a resource to the session that created it
// only. With lists unset, another session (of the same tenant and
// principal) is not shown it; lists: shared is the explicit choice to
// share (TestHostileSessionResources covers it), and tools stay shared
// either way.
func TestListsSessionResourcesDefault(t *testing.T) {
	h := testkit.NewHostileUpstream(t, testkit.Hostile{SessionResources: true})
	url := startGateway(t, []upstreamSpec{hostileSpec("h", h, "h")}, func(c *config.Config) {
		c.Server.ListCacheTTL = config.Duration(time.Hour)
	})
	ctx := context.Background()
	a := testkit.Connect(t, url, nil)
	res, err := a.CallTool(ctx, &mcp.CallToolParams{Name: "h__create"})
	if err != nil {
		t.Fatal(err)
	}
	mine := "h+" + text(t, res)
	if got := resourceURIs(t, a); !slices.Contains(got, mine) {
		t.Fatalf("the owner does not see its resource %s: %v", mine, got)
	}
	b := testkit.Connect(t, url, nil)
	if got := resourceURIs(t, b); slices.Contains(got, mine) || !slices.Contains(got, "h+mem://shared") {
		t.Errorf("another session sees %v; want h+mem://shared and not %s", got, mine)
	}
	// Tools are still fetched once for both sessions.
	toolNames(t, a)
	toolNames(t, b)
	if n := h.Count("tools/list"); n != 1 {
		t.Errorf("tools/list reached the upstream %d times, want 1", n)
	}
}

// BenchmarkResourcesListNewSession: what keeping resources/list per
// session costs: each iteration opens a session and lists resources, with
// lists unset (per session: one upstream resources/list each) and shared
// (one for all).
func BenchmarkResourcesListNewSession(b *testing.B) {
	for _, lists := range []string{"", config.ListsShared} {
		name := "unset"
		if lists != "" {
			name = lists
		}
		b.Run(name, func(b *testing.B) {
			h := testkit.NewHostileUpstream(b, testkit.Hostile{})
			url := startGateway(b, []upstreamSpec{hostileSpec("h", h, "h")}, func(c *config.Config) {
				c.Upstreams[0].Lists = lists
				c.Server.ListCacheTTL = config.Duration(time.Hour)
			})
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				cs := testkit.Connect(b, url, nil)
				if _, err := cs.ListResources(ctx, nil); err != nil {
					b.Fatal(err)
				}
				cs.Close()
			}
			b.StopTimer()
			b.ReportMetric(float64(h.Count("resources/list"))/float64(b.N), "upstream-lists/op")
		})
	}
}
