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
	// Claims are all the verified token's claims, as JSON decodes them,
	// for policy rules (internal/policy); nil for the anonymous caller.
	// Read-only.
	Claims map[string]any
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

// verified is what the context holds: the principal, and the token it was
// verified from ("" for the anonymous one).
type verified struct {
	p     *Principal
	token string
}

// WithPrincipal returns a copy of ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, &verified{p: p})
}

// withVerified returns a copy of ctx carrying p and the token it was
// verified from.
func withVerified(ctx context.Context, p *Principal, token string) context.Context {
	return context.WithValue(ctx, principalKey{}, &verified{p: p, token: token})
}

// PrincipalFrom returns the principal in ctx, if any.
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	v, ok := ctx.Value(principalKey{}).(*verified)
	return v.principal(), ok && v.principal() != nil
}

// TokenFrom returns the access token the principal in ctx was verified
// from, "" if none. Only token exchange (internal/credentials) may use it,
// and only to send it to the authorization server that issued it.
func TokenFrom(ctx context.Context) string {
	if v, ok := ctx.Value(principalKey{}).(*verified); ok && v != nil {
		return v.token
	}
	return ""
}

func (v *verified) principal() *Principal {
	if v == nil {
		return nil
	}
	return v.p
}

// AnonymousSubject is the subject of the principal [Anonymous] installs.
const AnonymousSubject = "anonymous"

// Anonymous returns middleware that authenticates nobody: every request gets
// the same anonymous principal of the given tenant. It is what the gateway
// uses when no token issuer is configured.
func Anonymous(tenant string) func(http.Handler) http.Handler {
	v := &verified{p: &Principal{Subject: AnonymousSubject, Tenant: tenant}}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, v)))
		})
	}
}
