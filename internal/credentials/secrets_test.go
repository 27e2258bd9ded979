package credentials_test

import (
	"slices"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
)

// TestUpstreamSecrets: every secret the gateway holds for an upstream,
// its own and its tenants', is listed under it and under no other.
func TestUpstreamSecrets(t *testing.T) {
	cfg := &config.Config{
		Upstreams: []config.Upstream{
			{Name: "a", Headers: map[string]string{"Authorization": "Bearer a-token"}, Auth: &config.UpstreamAuth{ClientSecret: "a-client"}},
			{Name: "b", Env: map[string]string{"KEY": "b-env"}},
		},
	}
	got := credentials.UpstreamSecrets(cfg)
	for name, want := range map[string][]string{"a": {"Bearer a-token", "a-client"}, "b": {"b-env"}} {
		s := got[name]
		slices.Sort(s)
		slices.Sort(want)
		if !slices.Equal(s, want) {
			t.Errorf("%s: %q, want %q", name, s, want)
		}
	}
	if s := credentials.SecretsOf(&config.Upstream{Name: "c"}, map[string]config.TenantUpstream{
		"t1": {Headers: map[string]string{"X-Key": "t1-header"}, Env: map[string]string{"E": "t1-env"}, Auth: &config.UpstreamAuth{ClientSecret: "t1-client"}},
	}); len(s) != 3 {
		t.Errorf("tenants' secrets: %q, want 3", s)
	}
}
