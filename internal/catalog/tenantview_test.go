package catalog

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/tenant"
)

func presentingView(t *testing.T) *tenant.View {
	desc := "Opens an issue in acme's tracker."
	cfg := &config.Config{
		Upstreams: []config.Upstream{{Name: "gh", URL: "http://127.0.0.1:1/mcp"}},
		Tenants: []config.Tenant{{ID: "t", Upstreams: []config.TenantUpstream{{Name: "gh", Present: map[string]config.ToolPresentation{
			"open_issue": {Alias: "new_issue", Description: &desc, FixedArguments: map[string]string{"owner": "acme"}},
		}}}}},
	}
	v, err := tenant.NewSet(cfg).Get("t")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPresent: a tool is shown under its alias, with the admin's
// description and without its fixed arguments; a tool that had the alias's
// name is left out; the list stays in name order.
func TestPresent(t *testing.T) {
	v := presentingView(t)
	items := []Item{
		{Upstream: "gh", Original: "open_issue", Exposed: "gh__open_issue", Raw: json.RawMessage(`{"name":"gh__open_issue","description":"x","inputSchema":{"type":"object","properties":{"owner":{"type":"string"},"title":{"type":"string"}},"required":["owner","title"]}}`)},
		{Upstream: "gh", Original: "new_issue", Exposed: "new_issue", Raw: json.RawMessage(`{"name":"new_issue"}`)},
		{Upstream: "gh", Original: "close", Exposed: "gh__close", Raw: json.RawMessage(`{"name":"gh__close"}`)},
	}
	got := Present(v, items, nil)
	if len(got) != 2 || got[0].Exposed != "gh__close" || got[1].Exposed != "new_issue" || got[1].Original != "open_issue" {
		t.Fatalf("Present = %+v", got)
	}
	raw := string(got[1].Raw)
	if !strings.Contains(raw, `"name":"new_issue"`) || !strings.Contains(raw, "acme's tracker") || strings.Contains(raw, "owner") {
		t.Errorf("presented tool: %s", raw)
	}
}

// TestFixArguments: the fixed arguments are set; a call that gives one
// (or a case variant) or whose arguments are no object fails.
func TestFixArguments(t *testing.T) {
	fixed := map[string]string{"owner": "acme"}
	if got, failure := FixArguments("new_issue", fixed, json.RawMessage(`{"title":"x"}`)); failure != "" || string(got) != `{"title":"x","owner":"acme"}` {
		t.Errorf("FixArguments = %s, %q", got, failure)
	}
	if got, failure := FixArguments("new_issue", fixed, nil); failure != "" || string(got) != `{"owner":"acme"}` {
		t.Errorf("no arguments: %s, %q", got, failure)
	}
	for _, args := range []string{`{"Owner":"evil"}`, `{"owner":"evil"}`, `[1]`} {
		if _, failure := FixArguments("new_issue", fixed, json.RawMessage(args)); !strings.HasPrefix(failure, `Invalid arguments for tool "new_issue"`) {
			t.Errorf("%s: failure %q", args, failure)
		}
	}
}
