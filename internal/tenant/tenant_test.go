package tenant

import (
	"testing"

	"github.com/mcpgw/gateway/internal/config"
)

func testConfig() *config.Config {
	return &config.Config{
		Upstreams: []config.Upstream{{Name: "github"}, {Name: "search"}, {Name: "secret"}},
		Tenants: []config.Tenant{
			{ID: "acme", Upstreams: []config.TenantUpstream{
				{
					Name:           "github",
					Tools:          config.Rules{Allow: []string{"list_*", "get_*", "create_issue"}, Deny: []string{"delete_*", "get_secret"}},
					Prompts:        config.Rules{Allow: []string{"*"}},
					Resources:      config.Rules{Allow: []string{"repo://acme/*"}},
					RequiredScopes: map[string][]string{"create_issue": {"mcp:write"}},
				},
				{Name: "search"},
			}},
			{ID: "globex", Upstreams: []config.TenantUpstream{{Name: "search"}}},
			{ID: "all"},
			{ID: "none", Upstreams: []config.TenantUpstream{}},
		},
	}
}

func TestDecide(t *testing.T) {
	s := NewSet(testConfig())
	tests := []struct {
		tenant, upstream string
		kind             Kind
		name             string
		want             bool
	}{
		{"acme", "github", Tool, "list_repos", true},
		{"acme", "github", Tool, "get_issue", true},
		{"acme", "github", Tool, "create_issue", true},
		{"acme", "github", Tool, "delete_repo", false},
		{"acme", "github", Tool, "get_secret", false}, // deny wins over allow
		{"acme", "github", Tool, "merge_pr", false},   // not allowed
		{"acme", "github", Tool, "LIST_repos", false}, // case matters
		{"acme", "github", Prompt, "anything", true},
		{"acme", "github", Resource, "repo://acme/x", true},
		{"acme", "github", Resource, "repo://globex/x", false},
		{"acme", "github", Resource, "repo://acme/../globex/x", false},
		{"acme", "github", Resource, "repo://acme/%2e%2e/globex/x", false},
		{"acme", "github", Resource, "repo://acme%2f..%2fglobex/x", false},
		{"acme", "search", Tool, "anything", true},
		{"acme", "secret", Tool, "anything", false},
		{"globex", "github", Tool, "list_repos", false},
		{"globex", "search", Tool, "q", true},
		{"all", "secret", Tool, "x", true},
		{"none", "search", Tool, "x", false},
	}
	for _, tt := range tests {
		v, err := s.Get(tt.tenant)
		if err != nil {
			t.Fatal(err)
		}
		d := v.Decide(tt.kind, tt.upstream, tt.name)
		if d.Allowed != tt.want {
			t.Errorf("%s: Decide(%v, %s, %q) = %+v, want %v", tt.tenant, tt.kind, tt.upstream, tt.name, d, tt.want)
		}
		if d.Rule == "" {
			t.Errorf("decision without a rule: %+v", d)
		}
	}
	if _, err := s.Get("initech"); err != ErrUnknown {
		t.Errorf("unknown tenant: %v", err)
	}
	acme, _ := s.Get("acme")
	if got := acme.RequiredScopes("github", "create_issue"); len(got) != 1 || got[0] != "mcp:write" {
		t.Errorf("RequiredScopes = %v", got)
	}
	if got := acme.Upstreams; len(got) != 2 || got[0] != "github" || got[1] != "search" {
		t.Errorf("acme upstreams %v", got)
	}
}

func TestAnonymousDefaultTenant(t *testing.T) {
	cfg := &config.Config{Upstreams: []config.Upstream{{Name: "a"}, {Name: "b"}}}
	v, err := NewSet(cfg).Get(DefaultID)
	if err != nil || len(v.Upstreams) != 2 || !v.Decide(Tool, "b", "x").Allowed {
		t.Fatalf("default view %+v, %v", v, err)
	}
	if _, err := NewSet(cfg).Get("other"); err != ErrUnknown {
		t.Errorf("other tenant: %v", err)
	}
}
