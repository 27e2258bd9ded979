package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// auth checks the auth section and how it relates to the tenants.
func (v *validator) auth(c *Config) {
	a := &c.Auth
	tenants := make(map[string]bool, len(c.Tenants))
	for _, t := range c.Tenants {
		tenants[t.ID] = true
	}

	switch {
	case len(a.Issuers) == 0 && !a.Anonymous:
		// An anonymous key that failed to decode was reported already.
		if !v.skipped("auth.anonymous") {
			v.addf("auth.issuers", "at least one issuer is required (or set auth.anonymous: true for local development only)")
		}
	case len(a.Issuers) > 0 && a.Anonymous:
		v.addf("auth.anonymous", "cannot be combined with auth.issuers: anonymous access is for local development only")
	case a.Anonymous && len(c.Tenants) > 0 && !tenants[AnonymousTenant]:
		v.addf("auth.anonymous", "tenant %q must be configured when tenants are listed", AnonymousTenant)
	}
	if len(a.Issuers) > 0 && c.Server.PublicURL == "" && !v.skipped("server.public_url") {
		// It is the resource clients request tokens for (RFC 8707) and the
		// base of the protected resource metadata URL every 401 names.
		v.addf("server.public_url", "is required when auth.issuers are configured")
	}

	v.scopes("auth.required_scopes", a.RequiredScopes)
	nonNegative(v, "auth.leeway", a.Leeway)
	nonNegative(v, "auth.token_cache_size", a.TokenCacheSize)

	names := make(map[string]int) // name -> index of first issuer
	urls := make(map[string]int)  // issuer URL -> index of first issuer
	for i := range a.Issuers {
		is := &a.Issuers[i]
		path := fmt.Sprintf("auth.issuers[%d]", i)
		switch {
		case is.Name == "":
			v.addf(path+".name", "is required")
		case !nameRE.MatchString(is.Name):
			v.addf(path+".name", "%q must contain only a-z, 0-9 and -", is.Name)
		default:
			if j, ok := names[is.Name]; ok {
				v.addf(path+".name", "duplicate issuer name %q (also auth.issuers[%d])", is.Name, j)
			} else {
				names[is.Name] = i
			}
		}

		if is.IssuerURL == "" {
			v.addf(path+".issuer_url", "is required")
		} else if v.authURL(path+".issuer_url", is.IssuerURL, true) {
			if j, ok := urls[is.IssuerURL]; ok {
				v.addf(path+".issuer_url", "duplicate issuer_url (also auth.issuers[%d])", j)
			} else {
				urls[is.IssuerURL] = i
			}
		}
		if is.JWKSURL != "" {
			v.authURL(path+".jwks_url", is.JWKSURL, false)
		}

		switch {
		case is.TenantClaim == "" && is.Tenant == "":
			v.addf(path+".tenant_claim", "is required unless tenant is set: set tenant_claim to the claim holding the tenant id, or tenant to put every token in one tenant")
		case is.TenantClaim != "" && is.Tenant != "":
			v.addf(path+".tenant", "cannot be combined with tenant_claim: set exactly one")
		case is.TenantClaim != "":
			if !validClaimPath(is.TenantClaim) {
				v.addf(path+".tenant_claim", `%q is not a claim path: want claim names separated by single dots, such as "tenant" or "org.tenant"`, is.TenantClaim)
			}
		case len(c.Tenants) > 0 && !tenants[is.Tenant]:
			// With no tenants at all, the tenants section reports it.
			v.addf(path+".tenant", "unknown tenant %q: it must be listed in tenants", is.Tenant)
		}

		// An issuer without audiences gets [server.public_url], which is
		// required with issuers (checked above).
		for j, aud := range is.Audiences {
			if aud == "" {
				v.addf(fmt.Sprintf("%s.audiences[%d]", path, j), "must not be empty")
			}
		}
		for j, alg := range is.Algorithms {
			v.algorithm(fmt.Sprintf("%s.algorithms[%d]", path, j), alg)
		}
	}
}

// algorithm checks a JWS algorithm name (case-sensitive, as in tokens).
func (v *validator) algorithm(path, alg string) {
	switch {
	case alg == AlgRS256, alg == AlgPS256, alg == AlgES256, alg == AlgEdDSA:
	case strings.EqualFold(alg, "none"):
		v.addf(path, "%q is not accepted: tokens must be signed", alg)
	case len(alg) >= 2 && strings.EqualFold(alg[:2], "HS"):
		v.addf(path, "HMAC algorithms are not accepted: a resource server must verify with public keys (got %q)", alg)
	default:
		v.addf(path, "unknown algorithm %q: want one of %s", alg, strings.Join(DefaultAlgorithms(), ", "))
	}
}

// scopes checks a list of OAuth scopes: each one scope-token of RFC 6749
// section 3.3.
func (v *validator) scopes(path string, scopes []string) {
	for i, s := range scopes {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case s == "":
			v.addf(p, "must not be empty")
		case strings.ContainsAny(s, " \t\r\n"):
			v.addf(p, "%q must not contain spaces: list each scope separately", s)
		case !isScopeToken(s):
			v.addf(p, `%q is not a valid scope: want printable ASCII without spaces, '"' or '\'`, s)
		}
	}
}

// isScopeToken reports whether s is an RFC 6749 scope-token:
// 1*( %x21 / %x23-5B / %x5D-7E ).
func isScopeToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return s != ""
}

// validClaimPath reports whether s is claim names joined by single dots.
func validClaimPath(s string) bool {
	for seg := range strings.SplitSeq(s, ".") {
		if seg == "" {
			return false
		}
	}
	return true
}

// authURL checks an issuer or JWKS URL and reports whether it is valid: an
// absolute https URL, or http on a loopback host (tests and local
// development run their provider there). An issuer identifier also has no
// query or fragment (OpenID Connect Discovery, RFC 8414). Like httpURL it
// never quotes the URL.
func (v *validator) authURL(path, s string, issuer bool) bool {
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "":
		v.addf(path, "must be an absolute https URL")
	case u.User != nil:
		v.addf(path, "must not contain credentials (user:password@)")
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		v.addf(path, "must be https (http is accepted only on a loopback host: 127.0.0.0/8, ::1 or localhost)")
	case issuer && (u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.HasSuffix(s, "#")):
		v.addf(path, "must not have a query or fragment")
	default:
		return true
	}
	return false
}

// isLoopback reports whether host is localhost or a loopback IP address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
