package auth

import (
	"slices"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
)

func TestTenantOfClaims(t *testing.T) {
	nested := &config.Issuer{TenantClaim: "org.tenant"}
	if got, scopes := TenantOfClaims(nested, map[string]any{"org": map[string]any{"tenant": "acme"}, "scope": "a b"}); got != "acme" || !slices.Equal(scopes, []string{"a", "b"}) {
		t.Errorf("nested: %q %v", got, scopes)
	}
	if got, _ := TenantOfClaims(nested, map[string]any{"org.tenant": "flat"}); got != "flat" {
		t.Errorf("claim named as written: %q", got)
	}
	if got, _ := TenantOfClaims(nested, map[string]any{"org": "x"}); got != "" {
		t.Errorf("not an object: %q", got)
	}
	if got, _ := TenantOfClaims(&config.Issuer{Tenant: "fixed"}, nil); got != "fixed" {
		t.Errorf("fixed tenant: %q", got)
	}
}
