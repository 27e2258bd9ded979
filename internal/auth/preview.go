package auth

import (
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpgw/gateway/internal/config"
)

// TenantOfClaims returns the tenant a token of issuer ic carrying claims
// would act for, as the verifier decides it ("" when the tenant claim is
// absent, empty or not a string), and its scopes: what an operator
// previews for a subject without holding one of its tokens. Nothing is
// verified: claims are what the operator typed.
func TenantOfClaims(ic *config.Issuer, claims map[string]any) (tenant string, scopes []string) {
	scopes, _ = scopesOf(jwt.MapClaims(claims))
	if ic.Tenant != "" {
		return ic.Tenant, scopes
	}
	is := &issuer{tenantKey: ic.TenantClaim, tenantPath: strings.Split(ic.TenantClaim, ".")}
	return is.tenantOf(jwt.MapClaims(claims)), scopes
}
