package gateway_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestToolSearchHugeList: an upstream lists 500 tools with 2.5 KB
// descriptions each (1.2 MB): search still answers, finds a tool by the
// first words of its description and by its name, and not by words past
// the indexed prefix of its description.
func TestToolSearchHugeList(t *testing.T) {
	h := testkit.NewHostileUpstream(t, testkit.Hostile{ManyTools: 500, ToolDescBytes: 2500})
	_, url := startGatewayG(t, []upstreamSpec{hostileSpec("h", h, "h")}, func(c *config.Config) {
		c.Tenants = []config.Tenant{{ID: "default", Upstreams: []config.TenantUpstream{{Name: "h"}},
			ToolSearch: &config.ToolSearch{MaxResults: 3}}}
	})
	cs := testkit.Connect(t, url, nil)
	search := func(query string) []string {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcpgw__search_tools", Arguments: map[string]any{"query": query}})
		if err != nil || res.IsError {
			t.Fatalf("search %q: %v %v", query, res, err)
		}
		var sc struct{ Tools []struct{ Name string } }
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &sc); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range sc.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	if got := search("w123x3"); len(got) != 1 || got[0] != "h__tool-123" {
		t.Errorf("search by a first word of a description: %v", got)
	}
	if got := search("w123x200"); len(got) != 0 {
		t.Errorf("search by a word past the indexed prefix: %v", got)
	}
	if got := search("tool 499"); len(got) == 0 || got[0] != "h__tool-499" {
		t.Errorf("search by name: %v", got)
	}
}
