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

// TestDecideURISpellings: a deny rule holds for every spelling of a URI
// that an upstream which normalizes URIs reads as the denied one, and an
// allow rule does not reach further through normalization.
func TestDecideURISpellings(t *testing.T) {
	cfg := &config.Config{
		Upstreams: []config.Upstream{{Name: "fs"}, {Name: "pub"}},
		Tenants: []config.Tenant{{ID: "t", Upstreams: []config.TenantUpstream{
			{Name: "fs", Resources: config.Rules{Deny: []string{"file:///secret/*"}}},
			{Name: "pub", Resources: config.Rules{Allow: []string{"file:///pub/*"}}},
		}}},
	}
	v, err := NewSet(cfg).Get("t")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{
		"file:///secret/key",
		"FILE:///secret/key",
		"File:///secret/key",
		"fIlE:///secret/key",
		"file:////secret/key",
		"file://///secret/key",
		"file:/secret/key",
		"FILE:/secret/key",
		"file://localhost/secret/key",
		"file://LocalHost/secret/key",
		"FILE://LOCALHOST//secret/key",
		"file:///secret//key",
		"file:///%2Fsecret/key",
		"file:%2F%2F%2Fsecret/key",
		"file:///secret/key?x=1",
	} {
		if d := v.Decide(Resource, "fs", u); d.Allowed {
			t.Errorf("fs: %q allowed (%s)", u, d.Rule)
		}
	}
	for _, u := range []string{"file:///public/key", "file:///secretary", "file://host/secret/key", "repo://x/secret/key"} {
		if d := v.Decide(Resource, "fs", u); !d.Allowed {
			t.Errorf("fs: %q denied (%s)", u, d.Rule)
		}
	}
	for u, want := range map[string]bool{
		"file:///pub/a":             true,
		"file:///pub//a":            true, // canonical file:///pub/a: both forms allowed
		"file:///pub/a?x":           true,
		"FILE:///pub/a":             false, // the written form matches no allow rule
		"file:////pub/a":            false,
		"file:/pub/a":               false,
		"file:///pub/%2e%2e/secret": false,
		"file:///pubx/a":            false,
	} {
		if d := v.Decide(Resource, "pub", u); d.Allowed != want {
			t.Errorf("pub: %q: %+v, want allowed=%v", u, d, want)
		}
	}
}

func TestCanonicalURI(t *testing.T) {
	for in, want := range map[string]string{
		"file:///a/b":                "file:///a/b",
		"FILE:/a":                    "file:///a",
		"file://LOCALHOST/a":         "file:///a",
		"file://Host//a":             "file://host/a",
		"HTTPS://Example.COM//a?b//": "https://example.com/a?b//",
		"repo:/a//b":                 "repo:/a/b",
		"urn:x:Y":                    "urn:x:Y",
		"no scheme//x":               "no scheme//x",
		"1x://a":                     "1x://a",
		"file://":                    "file://",
	} {
		if got := canonicalURI(in); got != want {
			t.Errorf("canonicalURI(%q) = %q, want %q", in, got, want)
		}
	}
	u := "file:///a/b"
	if n := testing.AllocsPerRun(100, func() { _ = canonicalURI(u) }); n > 1 {
		t.Errorf("%v allocations for a canonical URI", n)
	}
}

func TestPresentation(t *testing.T) {
	desc := "d"
	cfg := &config.Config{
		Upstreams: []config.Upstream{{Name: "gh"}, {Name: "jira"}},
		Tenants: []config.Tenant{{ID: "acme", Upstreams: []config.TenantUpstream{
			{Name: "gh", Present: map[string]config.ToolPresentation{"create_issue": {Alias: "new_issue", Description: &desc}}},
			{Name: "jira"},
		}}, {ID: "plain"}},
	}
	s := NewSet(cfg)
	acme, _ := s.Get("acme")
	if r, ok := acme.Alias("new_issue"); !ok || r != (ToolRef{"gh", "create_issue"}) {
		t.Errorf("alias: %v %v", r, ok)
	}
	if _, ok := acme.Alias("create_issue"); ok {
		t.Error("an original name is an alias")
	}
	if p, ok := acme.Presentation("gh", "create_issue"); !ok || *p.Description != "d" {
		t.Errorf("presentation: %+v %v", p, ok)
	}
	if _, ok := acme.Presentation("jira", "create_issue"); ok {
		t.Error("another upstream's tool presented")
	}
	plain, _ := s.Get("plain")
	if !acme.Presents() || plain.Presents() {
		t.Errorf("Presents: acme %v, plain %v", acme.Presents(), plain.Presents())
	}
}
