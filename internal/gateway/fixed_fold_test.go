package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestFixedArgumentCaseFolding: a fixed argument spelt with a character
// that some upstream's case-insensitive matching takes for an ASCII letter
// (the Kelvin sign, the dotless ı, the long s) is refused like the fixed
// name itself, without an upstream call; a call without it reaches the
// upstream with the fixed value alone.
func TestFixedArgumentCaseFolding(t *testing.T) {
	idp := testkit.StartIDP(t, idpClients)
	su := newSchemaUpstream(t)
	_, url := startGatewayG(t, []upstreamSpec{{name: "s", url: su.url}}, func(c *config.Config) {
		c.Auth = config.Auth{Issuers: []config.Issuer{{Name: "corp", IssuerURL: idp.Issuer, TenantClaim: "tenant"}}}
		c.Tenants = []config.Tenant{{ID: "acme", Upstreams: []config.TenantUpstream{{Name: "s", Present: map[string]config.ToolPresentation{
			// odd's schema is not enforced, so the upstream gets whatever
			// the gateway lets through, and echoes it.
			"odd": {FixedArguments: map[string]string{"kind": "bug", "class": "b"}},
		}}}}}
	})
	ctx := context.Background()
	tok := idp.Token(t, "acme-app", url)
	cs := testkit.Connect(t, url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + tok}}})

	before := su.calls.Load()
	for _, name := range []string{"kind", "KIND", "\u212Aind", "k\u0131nd", "K\u0130ND", "cla\u017Fs", "CLA\u017FS"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "s__odd", Arguments: map[string]any{"x": 1, name: "feature"}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || !strings.Contains(callText(t, res), "is set by the gateway and must not be given") {
			t.Errorf("%q: isError %v, %q; want it refused", name, res.IsError, callText(t, res))
		}
	}
	if n := su.calls.Load() - before; n != 0 {
		t.Errorf("a refused call reached the upstream %d times", n)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "s__odd", Arguments: map[string]any{"x": 1, "kin": "k", "kinds": "k"}})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(callText(t, res)), &got); res.IsError || err != nil {
		t.Fatalf("isError %v, %q", res.IsError, callText(t, res))
	}
	want := map[string]any{"x": 1.0, "kin": "k", "kinds": "k", "kind": "bug", "class": "b"}
	if len(got) != len(want) {
		t.Errorf("the upstream got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("the upstream got %s=%v, want %v", k, got[k], v)
		}
	}
}
