package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestPresentation: two tenants of one upstream each see create_issue
// under the alias new_issue, with the owner argument fixed to their own
// value: each lists its own definition and calls with its own owner; the
// exposed name is unknown to them; setting owner is refused without an
// upstream call; metrics keep the original name.
func TestPresentation(t *testing.T) {
	idp := testkit.StartIDP(t, idpClients)
	su := newSchemaUpstream(t)
	desc := "Open an issue in the acme tracker."
	g, url := startGatewayG(t, []upstreamSpec{{name: "s", url: su.url}}, func(c *config.Config) {
		c.Auth = config.Auth{Issuers: []config.Issuer{{Name: "corp", IssuerURL: idp.Issuer, TenantClaim: "tenant"}}}
		c.Tenants = []config.Tenant{
			{ID: "acme", Upstreams: []config.TenantUpstream{{Name: "s", Present: map[string]config.ToolPresentation{
				"create_issue": {Alias: "new_issue", Description: &desc, FixedArguments: map[string]string{"owner": "acme"}},
			}}}},
			{ID: "globex", Upstreams: []config.TenantUpstream{{Name: "s", Present: map[string]config.ToolPresentation{
				"create_issue": {Alias: "new_issue", FixedArguments: map[string]string{"owner": "globex"}},
				"stats":        {Description: &desc},
			}}}},
		}
	})
	ctx := context.Background()
	connect := func(client string) *mcp.ClientSession {
		tok := idp.Token(t, client, url)
		return testkit.Connect(t, url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + tok}}})
	}
	acme, globex := connect("acme-app"), connect("globex-app")

	tool := func(cs *mcp.ClientSession, name string) *mcp.Tool {
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var found *mcp.Tool
		for _, tl := range res.Tools {
			if tl.Name == "s__create_issue" {
				t.Errorf("the exposed name of an aliased tool is listed")
			}
			if tl.Name == name {
				found = tl
			}
		}
		if found == nil {
			t.Fatalf("%s not listed", name)
		}
		return found
	}
	for _, tc := range []struct {
		cs   *mcp.ClientSession
		desc string
	}{{acme, desc}, {globex, ""}} {
		tl := tool(tc.cs, "new_issue")
		if tc.desc != "" && tl.Description != tc.desc {
			t.Errorf("description %q, want %q", tl.Description, tc.desc)
		}
		schema, _ := json.Marshal(tl.InputSchema)
		var s struct {
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		}
		_ = json.Unmarshal(schema, &s)
		if _, ok := s.Properties["owner"]; ok || !slices.Equal(s.Required, []string{"title"}) || s.Properties["title"] == nil {
			t.Errorf("inputSchema %s: want owner removed from properties and required", schema)
		}
	}
	if d := tool(globex, "s__stats").Description; d != desc {
		t.Errorf("globex stats description %q", d)
	}
	if d := tool(acme, "s__stats").Description; d == desc {
		t.Errorf("acme sees globex's description of stats")
	}

	for _, tc := range []struct {
		cs    *mcp.ClientSession
		owner string
	}{{acme, "acme"}, {globex, "globex"}} {
		res, err := tc.cs.CallTool(ctx, &mcp.CallToolParams{Name: "new_issue", Arguments: map[string]any{"title": "bug"}})
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(callText(t, res)), &got); res.IsError || err != nil || got["owner"] != tc.owner || got["title"] != "bug" {
			t.Errorf("%s: the upstream got %q (isError %v)", tc.owner, callText(t, res), res.IsError)
		}
	}

	before := su.calls.Load()
	for _, owner := range []string{"owner", "Owner"} {
		res, err := acme.CallTool(ctx, &mcp.CallToolParams{Name: "new_issue", Arguments: map[string]any{"title": "bug", owner: "globex"}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || !strings.Contains(callText(t, res), "must not be given") {
			t.Errorf("setting %s: isError %v, %q", owner, res.IsError, callText(t, res))
		}
	}
	if n := su.calls.Load() - before; n != 0 {
		t.Errorf("a refused call reached the upstream %d times", n)
	}
	// The exposed name of an aliased tool is unknown, as any unknown name.
	_, errAliased := acme.CallTool(ctx, &mcp.CallToolParams{Name: "s__create_issue", Arguments: map[string]any{"title": "bug"}})
	_, errUnknown := acme.CallTool(ctx, &mcp.CallToolParams{Name: "s__nope", Arguments: map[string]any{"title": "bug"}})
	if errAliased == nil || errUnknown == nil ||
		strings.ReplaceAll(errAliased.Error(), "s__create_issue", "X") != strings.ReplaceAll(errUnknown.Error(), "s__nope", "X") {
		t.Errorf("calling the exposed name: %v; an unknown name: %v", errAliased, errUnknown)
	}

	m := scrape(t, g)
	for _, tenant := range []string{"acme", "globex"} {
		if v := metricValue(m, `mcpgw_tool_calls_total{outcome="ok",tenant="`+tenant+`",tool="create_issue",upstream="s"}`); v != 1 {
			t.Errorf("%s: tool calls by original name: %v, want 1", tenant, v)
		}
	}
}
