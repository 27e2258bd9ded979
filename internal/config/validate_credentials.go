package config

import (
	"net/http"
	"slices"
)

// upstreamAuth checks the effective auth of an upstream (tenant is ""), or
// of a tenant's use of it, at path: the mode is known and what it needs is
// there.
func (v *validator) upstreamAuth(path string, a *UpstreamAuth) {
	if a == nil {
		return
	}
	need := func(key, val string) {
		if val == "" {
			v.addf(path+"."+key, "is required with mode %s", a.Mode)
		}
	}
	switch a.Mode {
	case AuthClientCredentials, AuthTokenExchange:
		switch {
		case a.TokenURL == "" && a.Issuer == "":
			v.addf(path+".token_url", "token_url or issuer is required with mode %s", a.Mode)
		case a.TokenURL != "" && a.Issuer != "":
			v.addf(path+".issuer", "give token_url or issuer, not both")
		case a.TokenURL != "":
			v.httpURL(path+".token_url", a.TokenURL)
		default:
			v.httpURL(path+".issuer", a.Issuer)
		}
		need("client_id", a.ClientID)
		need("client_secret", a.ClientSecret)
	case AuthSignedIdentity:
	case AuthUserOAuth:
		// No issuer: the upstream's RFC 9728 metadata names it, when the
		// upstream answers 401. A public client has no secret (PKCE
		// protects its codes).
		if a.TokenURL != "" {
			v.addf(path+".token_url", "does not apply to mode %s: give issuer (or none, for discovery from the upstream)", a.Mode)
		}
		if a.Issuer != "" {
			v.httpURL(path+".issuer", a.Issuer)
		} else if a.ClientSecret != "" {
			v.warnf(path+".issuer", "is not set: the client secret goes to whichever authorization server the upstream's metadata names; set issuer to pin it (or restrict discovery with vault.discovered_issuers)")
		}
		need("client_id", a.ClientID)
	case "":
		v.addf(path+".mode", "is required: %s, %s, %s or %s", AuthClientCredentials, AuthTokenExchange, AuthSignedIdentity, AuthUserOAuth)
	default:
		v.addf(path+".mode", "unknown mode %q: must be %s, %s, %s or %s", a.Mode, AuthClientCredentials, AuthTokenExchange, AuthSignedIdentity, AuthUserOAuth)
	}
	if a.Actor && a.Mode != AuthTokenExchange {
		v.addf(path+".actor", "applies to mode %s only", AuthTokenExchange)
	}
	if a.Resource != "" {
		v.httpURL(path+".resource", a.Resource)
	}
	if a.Header != "" {
		switch ck := http.CanonicalHeaderKey(a.Header); {
		case !validHeaderName(a.Header):
			v.addf(path+".header", "is not a valid HTTP field name")
		case reservedHeaders[ck]:
			v.addf(path+".header", "%s is set by the gateway itself", ck)
		}
	}
	v.scopes(path+".scopes", a.Scopes)
}

// EffectiveAuth returns the auth of upstream u for tenant t: the
// upstream's, with every key the tenant's entry for u sets replacing the
// upstream's. nil means none.
func EffectiveAuth(u *Upstream, t *TenantUpstream) *UpstreamAuth {
	if t == nil || t.Auth == nil {
		return u.Auth
	}
	if u.Auth == nil {
		return t.Auth
	}
	a := *u.Auth
	o := t.Auth
	for _, f := range []struct {
		dst *string
		src string
	}{
		{&a.Mode, o.Mode}, {&a.TokenURL, o.TokenURL}, {&a.Issuer, o.Issuer}, {&a.ClientID, o.ClientID},
		{&a.ClientSecret, o.ClientSecret}, {&a.Resource, o.Resource}, {&a.Audience, o.Audience}, {&a.Header, o.Header},
	} {
		if f.src != "" {
			*f.dst = f.src
		}
	}
	if o.TokenURL != "" {
		a.Issuer = ""
	} else if o.Issuer != "" {
		a.TokenURL = ""
	}
	if o.Scopes != nil {
		a.Scopes = slices.Clone(o.Scopes)
	}
	a.Actor = a.Actor || o.Actor
	return &a
}

// TenantUpstream returns tenant t's entry for upstream name, or nil.
func (t *Tenant) TenantUpstream(name string) *TenantUpstream {
	for i := range t.Upstreams {
		if t.Upstreams[i].Name == name {
			return &t.Upstreams[i]
		}
	}
	return nil
}
