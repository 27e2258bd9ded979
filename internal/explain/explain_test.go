package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/policy"
	"github.com/mcpgw/gateway/internal/testkit"
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
	if err := Explain(context.Background(), cfg, "acme", &out, Options{}); err != nil {
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

// TestExplainStdioTenant: explain runs a stdio upstream as the tenant
// would, with the tenant's env, lists its tools, and stops its process.
func TestExplainStdioTenant(t *testing.T) {
	// A stdio server in shell: it answers initialize and tools/list with
	// a tool named after its TOOL variable.
	script := `while read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case "$line" in
  *'"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"sh","version":"1"}}}\n' "$id";;
  *'"tools/list"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"%s","inputSchema":{"type":"object"}}]}}\n' "$id" "$TOOL";;
  esac
done`
	cfg := &config.Config{
		Auth:      config.Auth{Anonymous: true},
		Upstreams: []config.Upstream{{Name: "sh", Command: []string{"sh", "-c", script}, Env: map[string]string{"TOOL": "base_tool"}}},
		Tenants:   []config.Tenant{{ID: "acme", Upstreams: []config.TenantUpstream{{Name: "sh", Env: map[string]string{"TOOL": "acme_tool"}}}}},
	}
	cfg.ApplyDefaults()
	var out bytes.Buffer
	if err := Explain(context.Background(), cfg, "acme", &out, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "sh__acme_tool") || strings.Contains(out.String(), "base_tool") {
		t.Errorf("explain did not run the tenant's process:\n%s", out.String())
	}
}

// TestExplainPolicy: with a principal, explain marks what its policy
// rules hide, names the rule that decided each item, and gives the
// call-time decision of a call, naming the argument and not its value.
func TestExplainPolicy(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	cfg := &config.Config{
		Auth:      config.Auth{Anonymous: true},
		Upstreams: []config.Upstream{{Name: "alpha", URL: a.URL}},
		Tenants: []config.Tenant{{ID: "default", Policy: []config.PolicyRule{
			{Name: "gate-sre-only", Phase: config.PhaseList, Match: config.PolicyMatch{Tools: []string{"gate"}},
				Unless: &config.PolicyCondition{Groups: []string{"sre"}}, Effect: config.EffectDeny},
			{Name: "sandbox-text", Phase: config.PhaseCall, Match: config.PolicyMatch{Tools: []string{"echo"}},
				Unless: &config.PolicyCondition{Arguments: []config.ArgumentMatch{{Name: "text", Glob: "sandbox-*"}}}, Effect: config.EffectDeny},
		}}},
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	dev := &policy.Principal{Subject: "dana", Claims: map[string]any{"groups": []any{"dev"}}}
	err := Explain(t.Context(), cfg, "default", &out, Options{Principal: dev,
		Call: &Call{Tool: "alpha__echo", Arguments: json.RawMessage(`{"text":"prod-repo"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		`- alpha__gate`, `hidden by policy: tenants[0].policy[0] "gate-sre-only"`,
		`+ alpha__echo`, `call alpha__echo: refused by tenants[0].policy[1] "sandbox-text"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("explain lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "prod-repo") {
		t.Errorf("explain printed an argument value:\n%s", got)
	}
}

// TestExplainUnreachable: explain, an admin's tool, says where it tried
// an upstream that does not answer, without the URL's query or userinfo.
func TestExplainUnreachable(t *testing.T) {
	cfg := &config.Config{
		Auth:      config.Auth{Anonymous: true},
		Upstreams: []config.Upstream{{Name: "gone", URL: "http://user:pw@127.0.0.1:1/mcp?key=k1"}},
	}
	cfg.ApplyDefaults()
	var out bytes.Buffer
	if err := Explain(t.Context(), cfg, "default", &out, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "unreachable: http://127.0.0.1:1/mcp: ") || strings.Contains(got, "k1") || strings.Contains(got, "pw") {
		t.Errorf("explain output:\n%s", got)
	}
}
