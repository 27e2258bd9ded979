package gateway_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/gateway"
	"github.com/mcpgw/gateway/internal/testkit"
)

// policyClients are acme's principals: an SRE, and a contractor of the
// dev group.
var policyClients = []testkit.IDPClient{
	{ID: "acme-sre", Secret: "sre-secret", Tenant: "acme", Claims: map[string]any{"groups": []string{"sre"}}},
	{ID: "acme-dev", Secret: "dev-secret", Tenant: "acme", Claims: map[string]any{"groups": []string{"dev"}, "contractor": true}},
	{ID: "gateway-pdp", Secret: "pdp-secret"},
}

// TestPolicyRules (issue 29): rules inside a tenant decide, per
// principal, what it is shown and what it may call, on the same items on
// every path: a tool a list rule hides is missing from tools/list and
// unknown to tools/call (the same error as a name that never existed); a
// call rule on an argument refuses with a tool result that names the
// argument and never its value; a CEL rule reads claims; a rule with
// effect pdp asks a real AuthZEN decision point. The audit record of a
// refusal names the rule; /metrics counts the decisions.
func TestPolicyRules(t *testing.T) {
	idp := testkit.StartIDP(t, policyClients)
	a := testkit.NewUpstream(t, "alpha")
	pdp := testkit.NewAuthZEN(t, `"sre" in subject.properties.groups && action.name == "tools/call"`)
	var auditLog syncBuffer
	g, url := startGatewayWith(t, gateway.Options{Audit: audit.New(&auditLog)}, []upstreamSpec{spec(a)}, func(c *config.Config) {
		c.Auth = config.Auth{
			Issuers:        []config.Issuer{{Name: "corp", IssuerURL: idp.Issuer, TenantClaim: "tenant"}},
			RequiredScopes: []string{"mcp"},
		}
		c.Policy.PDP = &config.PolicyPDP{URL: pdp.URL, Auth: &config.UpstreamAuth{
			Mode: config.AuthClientCredentials, Issuer: idp.Issuer, ClientID: "gateway-pdp", ClientSecret: "pdp-secret", Resource: "https://pdp.example"}}
		c.Tenants = []config.Tenant{{ID: "acme", Policy: []config.PolicyRule{
			{Name: "gate-sre-only", Phase: config.PhaseList, Match: config.PolicyMatch{Tools: []string{"gate"}},
				Unless: &config.PolicyCondition{Groups: []string{"sre"}}, Effect: config.EffectDeny},
			{Name: "sandbox-text", Phase: config.PhaseCall, Match: config.PolicyMatch{Tools: []string{"echo"}},
				Unless: &config.PolicyCondition{Arguments: []config.ArgumentMatch{{Name: "text", Glob: "sandbox-*"}}}, Effect: config.EffectDeny},
			{Name: "no-fail-for-contractors", Phase: config.PhaseList, Match: config.PolicyMatch{Tools: []string{"fail"}},
				When: &config.PolicyCondition{CEL: `"contractor" in principal.claims && principal.claims.contractor == true`}, Effect: config.EffectDeny},
			{Name: "headers-by-pdp", Phase: config.PhaseCall, Match: config.PolicyMatch{Tools: []string{"headers"}}, Effect: config.EffectPDP},
		}}}
	})
	connect := func(client string) *mcp.ClientSession {
		return testkit.Connect(t, url, &testkit.ConnectOptions{Header: http.Header{"Authorization": {"Bearer " + idp.Token(t, client, url, "mcp")}}})
	}
	sre, dev := connect("acme-sre"), connect("acme-dev")
	ctx := context.Background()

	// Lists: each principal sees its own.
	sreTools, devTools := toolNames(t, sre), toolNames(t, dev)
	for _, name := range []string{"alpha__gate", "alpha__fail", "alpha__echo", "alpha__headers"} {
		if !slices.Contains(sreTools, name) {
			t.Errorf("the SRE does not see %s: %v", name, sreTools)
		}
	}
	for _, name := range []string{"alpha__gate", "alpha__fail"} {
		if slices.Contains(devTools, name) {
			t.Errorf("the contractor sees %s", name)
		}
	}
	if !slices.Contains(devTools, "alpha__echo") {
		t.Errorf("the contractor lost echo: %v", devTools)
	}

	// Hidden is unknown: the same error as a tool that never existed.
	_, hidden := dev.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__gate"})
	_, never := dev.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__nosuch"})
	if hidden == nil || never == nil || strings.ReplaceAll(hidden.Error(), "gate", "X") != strings.ReplaceAll(never.Error(), "nosuch", "X") {
		t.Errorf("hidden %v, unknown %v", hidden, never)
	}

	// The same decisions for a 2026-07-28 caller.
	devToken := idp.Token(t, "acme-dev", url, "mcp")
	do2026 := func(method, params, name string) string {
		req := post2026(t, url, 1, method, params, func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+devToken)
			if name != "" {
				r.Header.Set("Mcp-Name", name)
			}
		})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if body := do2026("tools/list", "", ""); !strings.Contains(body, "alpha__echo") || strings.Contains(body, "alpha__gate") {
		t.Errorf("2026-07-28 tools/list: %s", body)
	}
	if body := do2026("tools/call", `"name":"alpha__gate"`, "alpha__gate"); !strings.Contains(body, "-32602") {
		t.Errorf("2026-07-28 call of a hidden tool: %s", body)
	}
	if body := do2026("tools/call", `"name":"alpha__echo","arguments":{"text":"prod"}`, "alpha__echo"); !strings.Contains(body, `"isError":true`) {
		t.Errorf("2026-07-28 call outside the sandbox: %s", body)
	}

	// A call rule on an argument: a tool result naming the argument, not
	// its value; the upstream is not called.
	before := a.Count("tools/call")
	res, err := dev.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": "prod-secret-repo"}})
	if err != nil || !res.IsError {
		t.Fatalf("echo outside the sandbox: %v %+v", err, res)
	}
	if msg := text(t, res); !strings.Contains(msg, "text") || strings.Contains(msg, "prod-secret-repo") {
		t.Errorf("refusal %q: want the argument named, its value not", msg)
	}
	if a.Count("tools/call") != before {
		t.Error("the refused call reached the upstream")
	}
	res, err = dev.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": "sandbox-1"}})
	if err != nil || res.IsError {
		t.Fatalf("echo in the sandbox: %v %+v", err, res)
	}

	// The decision point: the SRE may call headers, the contractor not.
	if res, err := sre.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__headers"}); err != nil || res.IsError {
		t.Errorf("the PDP refused the SRE: %v %+v", err, res)
	}
	// A refusal by a rule that reads no argument is a JSON-RPC error.
	if _, err := dev.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__headers"}); err == nil || !strings.Contains(err.Error(), "headers-by-pdp") {
		t.Errorf("the PDP let the contractor call headers: %v", err)
	}
	if v := pdp.Violations(); len(v) > 0 {
		t.Errorf("AuthZEN request shapes: %v", v)
	}
	// Every request to the PDP carries the gateway's own token (client
	// credentials), never a caller's.
	reqs := pdp.Requests()
	if len(reqs) == 0 {
		t.Error("the PDP was never asked")
	}
	for _, r := range reqs {
		if got := r.Header.Get("Authorization"); tokenClient(t, got) != "gateway-pdp" {
			t.Errorf("the PDP got Authorization %q, want the gateway's own token", got)
		}
	}

	// The audit names the rule, never the argument.
	log := auditLog.String()
	if !strings.Contains(log, "sandbox-text") || !strings.Contains(log, "gate-sre-only") {
		t.Errorf("audit log does not name the rules:\n%s", log)
	}
	if strings.Contains(log, "prod-secret-repo") {
		t.Error("audit log holds an argument value")
	}
	metrics := scrape(t, g)
	for _, want := range []string{`mcpgw_policy_decisions_total{decision="deny",source="rule",tenant="acme"}`, `mcpgw_pdp_requests_total{outcome="ok"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// tokenClient returns the client_id claim of a "Bearer <JWT>" header
// value, read without verifying it.
func tokenClient(t *testing.T, header string) string {
	t.Helper()
	tok, ok := strings.CutPrefix(header, "Bearer ")
	parts := strings.Split(tok, ".")
	if !ok || len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		ClientID string `json:"client_id"`
	}
	_ = json.Unmarshal(b, &claims)
	return claims.ClientID
}
