package auth

import (
	"context"
	"net/http"
	"slices"
)

// A Principal is a verified caller.
type Principal struct {
	// Issuer and Subject identify the caller; together they are unique.
	Issuer  string
	Subject string
	// ClientID is the OAuth client the token was issued to, if known.
	ClientID string
	// Tenant is the tenant id the caller acts for.
	Tenant string
	// Scopes are the scopes granted to the token.
	Scopes []string
}

// HasScopes reports whether p was granted every one of scopes. Scopes
// compare as exact strings: the gateway knows no scope hierarchy.
func (p *Principal) HasScopes(scopes ...string) bool {
	for _, s := range scopes {
		if !slices.Contains(p.Scopes, s) {
			return false
		}
	}
	return true
}

type principalKey struct{}

// WithPrincipal returns a copy of ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal in ctx, if any.
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}

// AnonymousSubject is the subject of the principal [Anonymous] installs.
const AnonymousSubject = "anonymous"

// Anonymous returns middleware that authenticates nobody: every request gets
// the same anonymous principal of the given tenant. It is what the gateway
// uses when no token issuer is configured.
func Anonymous(tenant string) func(http.Handler) http.Handler {
	p := &Principal{Subject: AnonymousSubject, Tenant: tenant}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
		})
	}
}
