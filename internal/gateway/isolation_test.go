package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestTenantIsolation is the isolation matrix: two tenants, three upstreams
// with the same tool names, real tokens. Each tenant sees and uses only what
// its rules allow; everything else is indistinguishable from nothing.
func TestTenantIsolation(t *testing.T) {
	idp := testkit.StartIDP(t, idpClients)
	alpha, beta, gamma := testkit.NewUpstream(t, "alpha"), testkit.NewUpstream(t, "beta"), testkit.NewUpstream(t, "gamma")
	url := startGateway(t, []upstreamSpec{spec(alpha), spec(beta), spec(gamma)}, func(c *config.Config) {
		c.Auth = config.Auth{
			Issuers:        []config.Issuer{{Name: "corp", IssuerURL: idp.Issuer, TenantClaim: "tenant"}},
			RequiredScopes: []string{"mcp"},
		}
		c.Tenants = []config.Tenant{
			{ID: "acme", Upstreams: []config.TenantUpstream{
				{Name: "alpha", Tools: config.Rules{Allow: []string{"echo", "me*"}, Deny: []string{"fail"}},
					Resources: config.Rules{Allow: []string{"test://alpha/items/*"}}},
				{Name: "beta"},
			}},
			{ID: "globex", Upstreams: []config.TenantUpstream{
				{Name: "gamma"},
				{Name: "alpha", Tools: config.Rules{Allow: []string{"fail"}}, Prompts: config.Rules{Deny: []string{"*"}}, Resources: config.Rules{Deny: []string{"*"}}},
			}},
		}
	})
	ctx := context.Background()
	acmeTok := idp.Token(t, "acme-app", url, "mcp")
	globexTok := idp.Token(t, "globex-app", url, "mcp")
	acme := testkit.Connect(t, url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + acmeTok}}})
	globex := testkit.Connect(t, url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + globexTok}}})

	names := func(cs *mcp.ClientSession) []string {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range res.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	wantAcme := []string{"alpha__echo", "alpha__meta"}
	for _, n := range testkit.UpstreamTools {
		wantAcme = append(wantAcme, "beta__"+n)
	}
	wantGlobex := []string{"alpha__fail"}
	for _, n := range testkit.UpstreamTools {
		wantGlobex = append(wantGlobex, "gamma__"+n)
	}
	slices.Sort(wantAcme)
	slices.Sort(wantGlobex)
	if got := names(acme); !slices.Equal(got, wantAcme) {
		t.Errorf("acme sees %v, want %v", got, wantAcme)
	}
	if got := names(globex); !slices.Equal(got, wantGlobex) {
		t.Errorf("globex sees %v, want %v", got, wantGlobex)
	}

	// What each tenant may call works.
	for _, c := range []struct {
		cs   *mcp.ClientSession
		tool string
	}{{acme, "alpha__echo"}, {acme, "beta__echo"}, {globex, "gamma__echo"}} {
		if _, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{"text": "x"}}); err != nil {
			t.Errorf("%s: %v", c.tool, err)
		}
	}
	if res, err := globex.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__fail"}); err != nil || !res.IsError {
		t.Errorf("globex alpha__fail: %v %+v", err, res)
	}

	// Everything else fails exactly like a tool that does not exist.
	hidden := map[*mcp.ClientSession][]string{
		acme: {
			"alpha__fail", "alpha__headers", "gamma__echo", // denied, not allowed, hidden upstream
			"echo", "fail", // original names
			"ALPHA__echo", "alpha__Echo", "Beta__echo", // casing
			"alpha%5F%5Fecho", "alpha__echo\x00", "alpha__echo ", "alpha__f\u0430il", // encodings, a Cyrillic a
			"gamma__echo/../alpha__echo",
		},
		globex: {"alpha__echo", "beta__echo", "alpha__meta", "echo", "GAMMA__echo"},
	}
	for cs, tools := range hidden {
		for _, tool := range tools {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "x"}})
			if err == nil || !strings.Contains(err.Error(), "Unknown tool: "+tool) {
				t.Errorf("calling hidden %q: %v, want the unknown-tool error", tool, err)
			}
		}
	}
	if _, err := globex.GetPrompt(ctx, &mcp.GetPromptParams{Name: "alpha__greet", Arguments: map[string]string{"who": "x"}}); err == nil || !strings.Contains(err.Error(), "Unknown prompt") {
		t.Errorf("globex alpha__greet: %v", err)
	}

	// Resources: only what the rules allow, whatever the spelling.
	if _, err := acme.ReadResource(ctx, &mcp.ReadResourceParams{URI: "alpha+test://alpha/items/1"}); err != nil {
		t.Errorf("acme allowed resource: %v", err)
	}
	for cs, uris := range map[*mcp.ClientSession][]string{
		acme: {
			"alpha+test://alpha/readme", "gamma+test://gamma/readme",
			"alpha+test://alpha/items/../readme", "alpha+test://alpha/items/%2e%2e/readme", "alpha+test://alpha/items/%2E%2E%2Freadme",
			"test://alpha/items/1",
		},
		globex: {"alpha+test://alpha/items/1", "alpha+test://alpha/readme", "beta+test://beta/readme"},
	} {
		for _, uri := range uris {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			if err == nil || !strings.Contains(err.Error(), "Resource not found: "+uri) {
				t.Errorf("reading hidden %q: %v, want resource not found", uri, err)
			}
		}
	}

	// A hidden upstream is never initialized for a tenant's sessions: gamma
	// has seen globex's session only.
	inits := 0
	for _, r := range gamma.Requests() {
		if r.RPCMethod == "initialize" {
			inits++
		}
	}
	if inits != 1 {
		t.Errorf("gamma saw %d initialize requests, want 1 (globex's session only)", inits)
	}

	// One tenant's session id is useless to the other.
	sid := initializeWith(t, url, acmeTok)
	if resp, body := do(t, authedPost(t, url, globexTok, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)); resp.StatusCode != 404 {
		t.Errorf("globex with acme's session: %d %s", resp.StatusCode, body)
	}
}

// TestAdminAssertedAnnotations: an upstream's annotations reach the client
// as hints, and an admin's assertion replaces the fields it names.
func TestAdminAssertedAnnotations(t *testing.T) {
	raw := testkit.NewRawUpstream(t) // its tool "raw" claims destructiveHint: true
	yes, no := true, false
	title := "Raw tool (reviewed)"
	url := startGateway(t, []upstreamSpec{{name: "raw", url: raw.URL}}, func(c *config.Config) {
		c.Tenants = []config.Tenant{{ID: "default", Upstreams: []config.TenantUpstream{{
			Name:        "raw",
			Annotations: map[string]config.ToolAnnotations{"raw": {DestructiveHint: &no, ReadOnlyHint: &yes, Title: &title}},
		}}}}
	})
	sid := initialize(t, url)
	body := postJSON(t, url, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	for _, want := range []string{
		`"annotations":{"destructiveHint":false,"x-custom":1,"title":"Raw tool (reviewed)","readOnlyHint":true}`,
		`"x-vendor":{"k":[1,2,3]}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("tools/list lacks %s:\n%s", want, body)
		}
	}
}
