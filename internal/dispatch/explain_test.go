package dispatch

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
)

// TestExplainPerUserTenant: an upstream that one tenant reaches as each of
// its users (its own auth override) is explained so, and not listed for that
// tenant: explain has no user to act for.
func TestExplainPerUserTenant(t *testing.T) {
	cfg := &config.Config{
		Auth:      config.Auth{Anonymous: true},
		Upstreams: []config.Upstream{{Name: "svc", URL: "http://127.0.0.1:1/mcp"}},
		Tenants: []config.Tenant{{ID: "acme", Upstreams: []config.TenantUpstream{{Name: "svc", Auth: &config.UpstreamAuth{
			Mode: config.AuthTokenExchange, TokenURL: "http://127.0.0.1:1/token", ClientID: "gw", ClientSecret: "gw-secret",
		}}}}},
	}
	cfg.ApplyDefaults()
	var out bytes.Buffer
	if err := Explain(context.Background(), cfg, "acme", &out, ExplainOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"identity: token_exchange, per user", "not listed: the upstream is reached as each user"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "gw-secret") {
		t.Errorf("explain printed the client secret:\n%s", out.String())
	}
}
